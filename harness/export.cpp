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
std::optional<spread> metric_of(const case_result& r, headline which) {
  if (r.status != case_status::ok) return std::nullopt;
  const auto head = headline_of(r, which);
  if (!head) return std::nullopt;
  spread out{*head, std::nullopt, std::nullopt};
  if (!r.repetitions.empty()) {
    const auto values = repetition_values(r, which);
    if (!values.empty()) {
      out.lower = *std::min_element(values.begin(), values.end());
      out.upper = *std::max_element(values.begin(), values.end());
    }
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
    if (const auto bw = metric_of(r, headline::bandwidth); bw && r.test.pattern != pattern_kind::pingpong)
      measures["bandwidth-bytes-per-second"] = bencher_value(*bw, 1.0);
    if (r.test.pattern == pattern_kind::pingpong) {
      if (const auto p50 = metric_of(r, headline::latency_p50)) measures["latency"] = bencher_value(*p50, 1e9);
      if (const auto p99 = metric_of(r, headline::latency_p99)) measures["latency-p99"] = bencher_value(*p99, 1e9);
    }
    if (!measures.empty()) out[case_key(r.test)] = measures;
  }
  return out;
}

nlohmann::json to_gab_bigger_is_better(const result_set& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results.results) {
    if (r.test.pattern == pattern_kind::pingpong) continue;
    if (const auto bw = metric_of(r, headline::bandwidth))
      out.push_back(gab_entry(r, *bw, "bandwidth", "GB/s", 1e-9));
  }
  return out;
}

nlohmann::json to_gab_smaller_is_better(const result_set& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : results.results) {
    if (r.test.pattern != pattern_kind::pingpong) continue;
    if (const auto p50 = metric_of(r, headline::latency_p50))
      out.push_back(gab_entry(r, *p50, "latency p50", "us", 1e6));
    if (const auto p99 = metric_of(r, headline::latency_p99))
      out.push_back(gab_entry(r, *p99, "latency p99", "us", 1e6));
  }
  return out;
}

}  // namespace pairperf
