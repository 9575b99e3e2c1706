#include "harness/export.h"

#include <fmt/format.h>

#include <algorithm>

namespace pairperf {
namespace {

struct spread {
  double value = 0;
  std::optional<double> lower, upper;
};

// The headline value of a metric and, when repeated, the extremes over the repetitions.
std::optional<spread> metric_of(const case_result& r, const std::string& metric) {
  const auto bw = [](const std::optional<bandwidth>& b) -> std::optional<double> {
    if (!b) return std::nullopt;
    return b->receiver_Bps ? b->receiver_Bps : b->sender_Bps;
  };
  const auto lat = [&](const std::optional<sample_stats>& s) -> std::optional<double> {
    if (!s) return std::nullopt;
    return metric == "p50" ? s->p50 : s->p99;
  };
  const auto pick = [&](const std::optional<bandwidth>& b, const std::optional<sample_stats>& s) {
    return metric == "bandwidth" ? bw(b) : lat(s);
  };
  if (r.status != case_status::ok) return std::nullopt;
  const auto head = pick(r.bandwidth_Bps, r.latency_s);
  if (!head) return std::nullopt;
  spread out{*head, std::nullopt, std::nullopt};
  for (const auto& rep : r.repetitions) {
    const auto v = pick(rep.bandwidth_Bps, rep.latency_s);
    if (!v) continue;
    out.lower = out.lower ? std::min(*out.lower, *v) : *v;
    out.upper = out.upper ? std::max(*out.upper, *v) : *v;
  }
  return out;
}

nlohmann::json bencher_value(const spread& s, double scale) {
  nlohmann::json j{{"value", s.value * scale}};
  if (s.lower) j["lower_value"] = *s.lower * scale;
  if (s.upper) j["upper_value"] = *s.upper * scale;
  return j;
}

nlohmann::json gab_entry(const case_result& r, const spread& s, const char* what, const char* unit,
                         double scale) {
  nlohmann::json j{{"name", fmt::format("{} {}", case_key(r.test), what)},
                   {"unit", unit},
                   {"value", s.value * scale}};
  if (s.lower && s.upper)
    j["range"] = fmt::format("{:.4g}..{:.4g}", *s.lower * scale, *s.upper * scale);
  j["extra"] = fmt::format("{} repetition(s); iterations {}",
                           std::max<std::size_t>(1, r.repetitions.size()), r.iterations);
  return j;
}

}  // namespace

nlohmann::json to_bencher(const result_set& results) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& r : results.results) {
    nlohmann::json measures = nlohmann::json::object();
    if (const auto bw = metric_of(r, "bandwidth"); bw && r.test.pattern != pattern_kind::pingpong)
      measures["bandwidth-bytes-per-second"] = bencher_value(*bw, 1.0);
    if (r.test.pattern == pattern_kind::pingpong) {
      if (const auto p50 = metric_of(r, "p50")) measures["latency"] = bencher_value(*p50, 1e9);
      if (const auto p99 = metric_of(r, "p99")) measures["latency-p99"] = bencher_value(*p99, 1e9);
    }
    if (!measures.empty()) out[case_key(r.test)] = measures;
  }
  return out;
}

nlohmann::json to_gab_bigger_is_better(const result_set& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results.results) {
    if (r.test.pattern == pattern_kind::pingpong) continue;
    if (const auto bw = metric_of(r, "bandwidth"))
      out.push_back(gab_entry(r, *bw, "bandwidth", "GB/s", 1e-9));
  }
  return out;
}

nlohmann::json to_gab_smaller_is_better(const result_set& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results.results) {
    if (r.test.pattern != pattern_kind::pingpong) continue;
    if (const auto p50 = metric_of(r, "p50"))
      out.push_back(gab_entry(r, *p50, "latency p50", "us", 1e6));
    if (const auto p99 = metric_of(r, "p99"))
      out.push_back(gab_entry(r, *p99, "latency p99", "us", 1e6));
  }
  return out;
}

}  // namespace pairperf
