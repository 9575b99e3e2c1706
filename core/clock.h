#pragma once
// The clock of the timed loops. Reading CLOCK_MONOTONIC through the vDSO costs about 20 ns on a
// virtual machine, once per round trip; ucx_perftest (ucs_get_time) and perftest (get_cycles)
// read the CPU's time-stamp counter instead. pairperf does too where the counter is invariant:
// x86-64 with the constant_tsc and nonstop_tsc flags and a kernel that still lists "tsc" among
// its clock sources (it removes it when it finds the counters unsynchronised). The counter is
// calibrated once per process against CLOCK_MONOTONIC (about 5 ms) and converted to nanoseconds
// with one multiply and shift. Everywhere else, and with PAIRPERF_CLOCK=monotonic, the loops read
// CLOCK_MONOTONIC. Deadlines and budgets outside the loops stay on the steady clock.
#include <time.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace pairperf {

enum class clock_choice { automatic, tsc, monotonic };

// PAIRPERF_CLOCK's value: "auto" (or unset), "tsc", "monotonic"; nullopt for anything else.
std::optional<clock_choice> parse_clock_choice(std::string_view text);
// Throws usage_error naming the variable when PAIRPERF_CLOCK is set to something else. main()
// calls it first, so a typo is a usage error, not a silently different clock.
void check_clock_variable();

// The facts of a TSC: what /proc/cpuinfo and the kernel's clock sources say. Separated from the
// reading so the rule is testable with any text.
struct tsc_facts {
  bool x86_64 = false;
  bool constant_tsc = false;
  bool nonstop_tsc = false;
  bool kernel_lists_tsc = false;  // "tsc" in available_clocksource (absent file: true)
};
// Empty when a TSC with these facts is a clock pairperf may use, else why not.
std::string tsc_unusable_reason(const tsc_facts& f);
// Reads them from this host's /proc/cpuinfo and /sys/devices/system/clocksource.
tsc_facts read_tsc_facts();

namespace clock_detail {
// 128-bit products: a counter delta of hours times a 32-bit fraction (a GCC/Clang extension).
__extension__ typedef __int128 wide;

struct state {
  bool tsc = false;
  std::uint64_t base_ticks = 0;
  std::int64_t base_ns = 0;
  std::uint64_t mult = 0;  // nanoseconds per tick, fixed point with `shift` fraction bits
  unsigned shift = 0;
};
extern state g_state;

inline std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace clock_detail

// Chooses the loops' clock once per process (thread safe; later calls return at once): the
// host context calls it (harness prepare_context, before a server forks sessions and a client
// its case workers), and run_pattern before its loops, so no loop calibrates.
void setup_loop_clock();

// Nanoseconds on the loops' clock; only differences mean anything. Before setup_loop_clock,
// CLOCK_MONOTONIC.
inline std::int64_t loop_now_ns() noexcept {
  const clock_detail::state& s = clock_detail::g_state;
#if defined(__x86_64__)
  if (s.tsc) {
    const auto delta = static_cast<std::int64_t>(__rdtsc() - s.base_ticks);
    return s.base_ns +
           static_cast<std::int64_t>((static_cast<clock_detail::wide>(delta) * s.mult) >> s.shift);
  }
#endif
  return clock_detail::monotonic_ns();
}

// What the loops time with, for a results file's host context: source ("tsc" or "monotonic"),
// why not the TSC where it is not, the calibrated frequency, the flags seen, the cost of one
// read in nanoseconds. Sets the clock up first.
nlohmann::json loop_clock_context();

}  // namespace pairperf
