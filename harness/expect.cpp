#include "harness/expect.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/errors.h"
#include "core/units.h"
#include "host/gpus.h"
#include "host/noise.h"
#include "host/pair.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

// The kind of a lane an expectation names: as the case's own lanes report it, else as the case's
// transport classifies the name (a lane that did not show up is what a missed expectation is
// about).
lane_kind kind_of_lane(const case_result& r, const std::string& name) {
  if (r.provenance) {
    for (const auto* set : {&r.provenance->lanes, &r.provenance->bulk}) {
      for (const auto& l : *set) {
        if (l.transport == name && l.kind != lane_kind::unknown) return l.kind;
      }
    }
  }
  const transport_entry* entry = transport_registry::instance().find(r.test.transport);
  return entry != nullptr && entry->lane_kind_of ? entry->lane_kind_of(name) : lane_kind::unknown;
}

constexpr const char* forms =
    "transport=NAME, transport!=NAME, bw>=8GB/s[@SIZE], lat<=5us[@SIZE], lat.p99<=20us[@SIZE]";

// Longest operators first so ">=" is not read as ">".
constexpr std::array<std::pair<const char*, expectation::op>, 6> ops{{
    {">=", expectation::op::ge},
    {"<=", expectation::op::le},
    {"!=", expectation::op::ne},
    {">", expectation::op::gt},
    {"<", expectation::op::lt},
    {"=", expectation::op::eq},
}};

const char* op_text(expectation::op o) {
  for (const auto& [t, v] : ops) {
    if (v == o) return t;
  }
  return "?";
}

double parse_rate(const std::string& text, const std::string& whole) {
  struct unit {
    const char* suffix;
    double scale;
  };
  constexpr std::array<unit, 8> units{{{"GiB/s", 1024.0 * 1024 * 1024},
                                       {"GB/s", 1e9},
                                       {"MiB/s", 1024.0 * 1024},
                                       {"MB/s", 1e6},
                                       {"Gb/s", 1e9 / 8},
                                       {"Mb/s", 1e6 / 8},
                                       {"KB/s", 1e3},
                                       {"B/s", 1}}};
  for (const auto& u : units) {
    const std::string suffix = u.suffix;
    if (text.size() > suffix.size() &&
        text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0) {
      try {
        std::size_t used = 0;
        const double v = std::stod(text.substr(0, text.size() - suffix.size()), &used);
        if (used == text.size() - suffix.size() && v >= 0) return v * u.scale;
      } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): reported below
      }
    }
  }
  throw usage_error(
      fmt::format("--expect {}: '{}' is not a rate (e.g. 8GB/s, 900MiB/s, 100Gb/s)", whole, text));
}

bool compare(double seen, expectation::op how, double want) {
  switch (how) {
    case expectation::op::eq:
      return seen == want;
    case expectation::op::ne:
      return seen != want;
    case expectation::op::ge:
      return seen >= want;
    case expectation::op::le:
      return seen <= want;
    case expectation::op::gt:
      return seen > want;
    case expectation::op::lt:
      return seen < want;
  }
  return false;
}

std::optional<double> latency(const sample_stats& s, const std::string& stat) {
  if (stat == "p50") return s.p50;
  if (stat == "p90") return s.p90;
  if (stat == "p99") return s.p99;
  if (stat == "p99_9") return s.p99_9;
  if (stat == "avg") return s.avg;
  if (stat == "min") return s.min;
  if (stat == "max") return s.max;
  return std::nullopt;
}

// One check: {expect, seen, pass, why}.
nlohmann::json check(const expectation& e, const case_result& r,
                     const std::optional<expectation_hint>& hint) {
  nlohmann::json out{{"expect", e.text}};
  switch (e.what) {
    case expectation::metric::transport: {
      const auto named = [&](const lane& l) { return l.transport == e.name; };
      const std::vector<lane> lanes = carrying_lanes(r);
      std::vector<std::string> seen;
      for (const auto& l : lanes) seen.push_back(l.transport + "/" + l.device);
      const bool present = std::any_of(lanes.begin(), lanes.end(), named);
      // On the endpoint, but unable to carry this row's bytes (gpus.h carrying_lanes).
      const bool idle_lane =
          !present && r.provenance &&
          std::any_of(r.provenance->lanes.begin(), r.provenance->lanes.end(), named);
      const bool pass = e.how == expectation::op::eq ? present : !present;
      out["seen"] =
          fmt::format("data lanes {}", seen.empty() ? std::string("(none)")
                                                    : fmt::format("{}", fmt::join(seen, ", ")));
      out["pass"] = pass;
      out["why"] =
          pass ? fmt::format("{} {} the data lanes", e.name, present ? "is among" : "is not among")
               : fmt::format(
                     "expected {} {} the data lanes, which are what UCX or the kernel really used, "
                     "not the "
                     "configuration asked for",
                     e.name, e.how == expectation::op::eq ? "among" : "absent from");
      if (idle_lane)
        out["why"] = fmt::format("{} is on the endpoint but carries nothing here: {}", e.name,
                                 r.gpu_path_why);
      // The hint explains a missing shared-memory lane, or a network lane where shared memory
      // was wanted.
      const lane_kind kind = kind_of_lane(r, e.name);
      const bool about_shm = e.how == expectation::op::eq ? kind == lane_kind::shared_memory
                                                          : kind == lane_kind::network;
      if (!pass && hint && about_shm) {
        out["cause"] = hint->cause;
        out["fix"] = hint->fix;
        out["why"] = fmt::format("{}; cause: {}; fix: {}", out["why"].get<std::string>(),
                                 hint->cause, hint->fix);
      }
      return out;
    }
    case expectation::metric::bandwidth: {
      const auto& b = *r.bandwidth_Bps;
      const double seen = preferred_Bps(r.bandwidth_Bps).value_or(0);
      const bool pass = compare(seen, e.how, e.value);
      out["seen"] = format_rate(seen, rate_unit::gb);
      out["seen_Bps"] = seen;
      out["pass"] = pass;
      out["why"] =
          fmt::format("{} bandwidth {} {} {}", b.receiver_Bps ? "receiver" : "sender",
                      format_rate(seen, rate_unit::gb), pass ? "meets" : "misses",
                      fmt::format("{} {}", op_text(e.how), format_rate(e.value, rate_unit::gb)));
      return out;
    }
    case expectation::metric::latency: {
      const double seen = *latency(*r.latency_s, e.statistic);
      const bool pass = compare(seen, e.how, e.value);
      out["seen"] = format_seconds(seen);
      out["seen_s"] = seen;
      out["pass"] = pass;
      out["why"] = fmt::format("one-way latency {} {} {} {} {}", e.statistic, format_seconds(seen),
                               pass ? "meets" : "misses", op_text(e.how), format_seconds(e.value));
      return out;
    }
  }
  return out;
}

}  // namespace

expectation parse_expectation(const std::string& text) {
  expectation e;
  e.text = text;
  std::string body = text;
  if (const auto at = body.rfind('@'); at != std::string::npos) {
    e.size = parse_size(body.substr(at + 1));
    body.resize(at);
  }
  std::size_t pos = std::string::npos;
  std::string op_found;
  for (const auto& [t, v] : ops) {
    pos = body.find(t);
    if (pos != std::string::npos) {
      e.how = v;
      op_found = t;
      break;
    }
  }
  if (pos == std::string::npos || pos == 0)
    throw usage_error(fmt::format("--expect {}: expected one of {}", text, forms));
  const std::string key = body.substr(0, pos);
  const std::string value = body.substr(pos + op_found.size());
  if (value.empty())
    throw usage_error(fmt::format("--expect {}: no value after '{}'", text, op_found));
  if (key == "transport") {
    if (e.how != expectation::op::eq && e.how != expectation::op::ne)
      throw usage_error(fmt::format("--expect {}: transport takes = or !=", text));
    e.what = expectation::metric::transport;
    e.name = value;
  } else if (key == "bw") {
    e.what = expectation::metric::bandwidth;
    e.value = parse_rate(value, text);
  } else if (key == "lat" || key.rfind("lat.", 0) == 0) {
    e.what = expectation::metric::latency;
    if (key != "lat") e.statistic = key.substr(4);
    if (!latency(sample_stats{}, e.statistic)) {
      throw usage_error(fmt::format(
          "--expect {}: unknown latency statistic '{}' (p50, p90, p99, p99_9, avg, min, max)", text,
          e.statistic));
    }
    if (std::isdigit(static_cast<unsigned char>(value.back())) != 0) {
      throw usage_error(fmt::format("--expect {}: give the latency a unit (ns, us, ms, s)", text));
    }
    e.value = static_cast<double>(parse_duration(value).count()) * 1e-9;
  } else {
    throw usage_error(
        fmt::format("--expect {}: unknown quantity '{}' (forms: {})", text, key, forms));
  }
  return e;
}

bool applies(const expectation& e, const test_case& c) {
  if (e.size && *e.size != c.size_bytes) return false;
  switch (e.what) {
    case expectation::metric::transport:
      return true;
    case expectation::metric::bandwidth:
      return c.pattern != pattern_kind::pingpong;
    case expectation::metric::latency:
      return c.pattern == pattern_kind::pingpong;
  }
  return false;
}

namespace {

// Why a case an expectation covers cannot be judged by it; empty when it can.
std::string cannot_judge(const expectation& e, const case_result& r) {
  if (r.status != case_status::ok)
    return fmt::format("{}{}", to_string(r.status), r.message.empty() ? "" : ": " + r.message);
  if (e.what == expectation::metric::bandwidth && !preferred_Bps(r.bandwidth_Bps))
    return "no bandwidth figure";
  if (e.what == expectation::metric::latency && !r.latency_s) return "no latency figure";
  return {};
}

}  // namespace

std::vector<std::string> expectation_tally::unjudged(
    const std::vector<expectation>& expectations) const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < expectations.size() && i < judged.size(); ++i) {
    if (judged[i] > 0 && noisy_misses[i] == 0) continue;
    if (why_not[i].empty()) {
      out.push_back(fmt::format("--expect {}: judged no case (none it applies to ran)",
                                expectations[i].text));
      continue;
    }
    // The same reason for many cases is said once, with the case numbers.
    std::vector<std::pair<std::string, std::vector<std::size_t>>> grouped;
    for (const auto& [number, why] : why_not[i]) {
      const std::string& reason = why;  // a lambda may not capture a structured binding (clang 14)
      auto it = std::find_if(grouped.begin(), grouped.end(),
                             [&](const auto& g) { return g.first == reason; });
      if (it == grouped.end()) it = grouped.insert(grouped.end(), {why, {}});
      it->second.push_back(number);
    }
    std::vector<std::string> parts;
    for (const auto& [why, numbers] : grouped)
      parts.push_back(fmt::format("case{} {}: {}", numbers.size() > 1 ? "s" : "",
                                  fmt::join(numbers, ","), why));
    out.push_back(fmt::format(
        "--expect {}: {}: {}", expectations[i].text,
        judged[i] > 0 ? fmt::format("{} miss(es) on noisy cases not judged", noisy_misses[i])
                      : std::string("judged no case"),
        fmt::join(parts, "; ")));
  }
  return out;
}

void apply_expectations(const std::vector<expectation>& expectations, case_result& r,
                        const std::optional<expectation_hint>& hint, expectation_tally* tally) {
  nlohmann::json checks = nlohmann::json::array();
  std::vector<std::string> missed, unjudged, reasons;
  for (std::size_t i = 0; i < expectations.size(); ++i) {
    const expectation& e = expectations[i];
    if (!applies(e, r.test)) continue;
    if (std::string why = cannot_judge(e, r); !why.empty()) {
      unjudged.push_back(e.text);
      if (std::find(reasons.begin(), reasons.end(), why) == reasons.end()) reasons.push_back(why);
      if (tally != nullptr) tally->why_not[i].emplace_back(r.test.index + 1, std::move(why));
      continue;
    }
    nlohmann::json c = check(e, r, hint);
    // A figure measured while the host took the CPU away misses for the host's sake, not the
    // path's: not judged (transport checks read the provenance, which noise does not change).
    if (!c.at("pass").get<bool>() && e.what != expectation::metric::transport &&
        is_noisy(r.host_noise)) {
      std::string why = "noisy: " + noise_reason(r.host_noise);
      unjudged.push_back(e.text);
      if (std::find(reasons.begin(), reasons.end(), why) == reasons.end()) reasons.push_back(why);
      if (tally != nullptr) {
        ++tally->noisy_misses[i];
        tally->why_not[i].emplace_back(r.test.index + 1, std::move(why));
      }
      continue;
    }
    if (tally != nullptr) ++tally->judged[i];
    if (!c.at("pass").get<bool>()) missed.push_back(c.at("why").get<std::string>());
    checks.push_back(std::move(c));
  }
  if (!unjudged.empty())
    r.unjudged = {{"expect", unjudged},
                  {"why", fmt::format("not judged: {}", fmt::join(reasons, "; "))}};
  if (checks.empty()) return;
  r.verdict = nlohmann::json{{"pass", missed.empty()}, {"checks", checks}};
  if (!missed.empty()) {
    r.status = case_status::fail;
    r.message = fmt::format("--expect: {}", fmt::join(missed, "; "));
  }
}

}  // namespace pairperf
