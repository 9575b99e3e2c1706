#include "core/clock.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"

namespace pairperf {

namespace clock_detail {
state g_state;
}  // namespace clock_detail

namespace {

constexpr const char* variable = "PAIRPERF_CLOCK";
constexpr std::int64_t calibration_ns = 5'000'000;
constexpr unsigned fraction_bits = 32;

struct setup_result {
  std::string source = "monotonic";
  std::string why_not_tsc;
  double tsc_hz = 0;
  double calibrated_over_s = 0;
  tsc_facts facts;
  double read_ns = 0;
};
setup_result g_result;
std::once_flag g_once;

bool has_word(const std::string& text, std::string_view word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

#if defined(__x86_64__)
// One (ticks, nanoseconds) pair: the clock read bracketed by two counter reads, the tightest
// bracket of a few kept, its middle taken as the counter's value at the clock read.
struct clock_pair {
  std::uint64_t ticks;
  std::int64_t ns;
};
clock_pair read_pair() {
  clock_pair best{0, 0};
  std::uint64_t best_width = ~std::uint64_t{0};
  for (int i = 0; i < 7; ++i) {
    const std::uint64_t a = __rdtsc();
    const std::int64_t ns = clock_detail::monotonic_ns();
    const std::uint64_t b = __rdtsc();
    if (b >= a && b - a < best_width) {
      best_width = b - a;
      best = {a + (b - a) / 2, ns};
    }
  }
  return best;
}

// Calibrates the counter against CLOCK_MONOTONIC; false (and why) when the result is absurd.
bool calibrate(clock_detail::state& s, setup_result& r) {
  const clock_pair first = read_pair();
  while (clock_detail::monotonic_ns() - first.ns < calibration_ns) {
  }
  const clock_pair last = read_pair();
  const double span_ns = static_cast<double>(last.ns - first.ns);
  const double ticks = static_cast<double>(last.ticks - first.ticks);
  const double hz = ticks / span_ns * 1e9;
  if (!(hz >= 1e8 && hz <= 1e11)) {
    r.why_not_tsc =
        fmt::format("calibration gave {:.0f} Hz, not a plausible counter frequency", hz);
    return false;
  }
  s.base_ticks = last.ticks;
  s.base_ns = last.ns;
  s.shift = fraction_bits;
  s.mult = static_cast<std::uint64_t>(std::llround(1e9 / hz * std::ldexp(1.0, fraction_bits)));
  r.tsc_hz = hz;
  r.calibrated_over_s = span_ns * 1e-9;
  return true;
}
#endif

void do_setup() {
  setup_result r;
  r.facts = read_tsc_facts();
  const char* env = std::getenv(variable);
  const auto choice =
      parse_clock_choice(env == nullptr ? "" : env).value_or(clock_choice::automatic);
  clock_detail::state s;
  if (choice == clock_choice::monotonic) {
    r.why_not_tsc = fmt::format("{}=monotonic", variable);
  } else {
    r.why_not_tsc = tsc_unusable_reason(r.facts);
    // PAIRPERF_CLOCK=tsc overrides the flags (not the architecture).
    if (choice == clock_choice::tsc && r.facts.x86_64) r.why_not_tsc.clear();
#if defined(__x86_64__)
    if (r.why_not_tsc.empty() && calibrate(s, r)) {
      s.tsc = true;
      r.source = "tsc";
    }
#endif
  }
  clock_detail::g_state = s;
  constexpr int reads = 1000;
  const std::int64_t t0 = clock_detail::monotonic_ns();
  // Neither read can be dropped: rdtsc is a volatile builtin, clock_gettime an external call.
  for (int i = 0; i < reads; ++i) (void)loop_now_ns();
  const std::int64_t t1 = clock_detail::monotonic_ns();
  r.read_ns = static_cast<double>(t1 - t0) / reads;
  g_result = std::move(r);
}

}  // namespace

std::optional<clock_choice> parse_clock_choice(std::string_view text) {
  if (text.empty() || text == "auto") return clock_choice::automatic;
  if (text == "tsc") return clock_choice::tsc;
  if (text == "monotonic") return clock_choice::monotonic;
  return std::nullopt;
}

void check_clock_variable() {
  const char* env = std::getenv(variable);
  if (env != nullptr && !parse_clock_choice(env)) {
    throw usage_error(fmt::format(
        "{}={} is not one of auto, tsc, monotonic (the clock of the timed loops)", variable, env));
  }
}

std::string tsc_unusable_reason(const tsc_facts& f) {
  if (!f.x86_64) return "not an x86-64 CPU";
  std::string missing;
  if (!f.constant_tsc) missing += "constant_tsc";
  if (!f.nonstop_tsc) missing += missing.empty() ? "nonstop_tsc" : " and nonstop_tsc";
  if (!missing.empty()) return fmt::format("the CPU flags lack {} (/proc/cpuinfo)", missing);
  if (!f.kernel_lists_tsc) {
    return "the kernel does not list tsc among its clock sources (it found the counters "
           "unsynchronised or unstable)";
  }
  return {};
}

tsc_facts read_tsc_facts() {
  tsc_facts f;
#if defined(__x86_64__)
  f.x86_64 = true;
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      f.constant_tsc = has_word(line, "constant_tsc");
      f.nonstop_tsc = has_word(line, "nonstop_tsc");
      break;
    }
  }
  std::ifstream sources("/sys/devices/system/clocksource/clocksource0/available_clocksource");
  if (!sources) {
    f.kernel_lists_tsc = true;
  } else {
    std::string all((std::istreambuf_iterator<char>(sources)), std::istreambuf_iterator<char>());
    f.kernel_lists_tsc = has_word(all, "tsc");
  }
  return f;
}

void setup_loop_clock() { std::call_once(g_once, do_setup); }

nlohmann::json loop_clock_context() {
  setup_loop_clock();
  const setup_result& r = g_result;
  nlohmann::json j{{"source", r.source},
                   {"read_ns", std::round(r.read_ns * 10) / 10},
                   {"constant_tsc", r.facts.constant_tsc},
                   {"nonstop_tsc", r.facts.nonstop_tsc},
                   {"kernel_lists_tsc", r.facts.kernel_lists_tsc}};
  if (r.source == "tsc") {
    j["tsc_hz"] = std::round(r.tsc_hz);
    j["calibrated_over_s"] = r.calibrated_over_s;
  } else {
    j["why_not_tsc"] = r.why_not_tsc;
  }
  return j;
}

}  // namespace pairperf
