#include "analysis/export.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/stats.h"

namespace pairperf {
namespace {

struct spread {
  double value = 0;
  std::optional<double> lower, upper;
  std::size_t values = 0, results = 0;  // repetitions pooled, results (files) they came from
};

// One case key's results across every input file, in the order keys first appear.
struct keyed {
  std::string key;
  std::vector<const case_result*> results;
};

std::vector<keyed> by_key(const result_set& set) {
  std::vector<keyed> out;
  std::map<std::string, std::size_t> index;
  for (const auto& r : set.results) {
    const std::string key = case_key(r.test);
    const auto [it, added] = index.emplace(key, out.size());
    if (added) out.push_back(keyed{key, {}});
    out[it->second].results.push_back(&r);
  }
  return out;
}

// A metric of one case key: one result gives its own headline (over all its samples); several
// (the same case in several files) pool their repetitions and give the median, never the last
// file's value. The extremes are over every pooled repetition.
std::optional<spread> metric_of(const keyed& k, headline which) {
  std::vector<double> values;
  const case_result* only = nullptr;
  std::size_t results = 0;
  for (const auto* r : k.results) {
    if (r->status != case_status::ok) continue;
    const auto v = repetition_values(*r, which);
    if (v.empty()) continue;
    values.insert(values.end(), v.begin(), v.end());
    only = r;
    ++results;
  }
  if (values.empty()) return std::nullopt;
  spread out;
  out.values = values.size();
  out.results = results;
  out.value =
      results == 1 ? headline_of(*only, which).value_or(median_of(values)) : median_of(values);
  if (values.size() > 1) {
    out.lower = *std::min_element(values.begin(), values.end());
    out.upper = *std::max_element(values.begin(), values.end());
  }
  return out;
}

nlohmann::json bencher_value(const spread& s, double scale) {
  nlohmann::json j{{"value", s.value * scale}};
  if (s.lower) j["lower_value"] = *s.lower * scale;
  if (s.upper) j["upper_value"] = *s.upper * scale;
  return j;
}

nlohmann::json gab_entry(const keyed& k, const spread& s, const char* what, const char* unit,
                         double scale) {
  nlohmann::json j{
      {"name", fmt::format("{} {}", k.key, what)}, {"unit", unit}, {"value", s.value * scale}};
  if (s.lower && s.upper)
    j["range"] = fmt::format("{:.4g}..{:.4g}", *s.lower * scale, *s.upper * scale);
  j["extra"] = s.results > 1 ? fmt::format("median of {} repetition(s) pooled from {} results",
                                           s.values, s.results)
                             : fmt::format("{} repetition(s)", s.values);
  return j;
}

}  // namespace

nlohmann::json to_bencher(const result_set& results) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& k : by_key(results)) {
    nlohmann::json measures = nlohmann::json::object();
    if (k.results.front()->test.pattern == pattern_kind::pingpong) {
      if (const auto p50 = metric_of(k, headline::latency_p50))
        measures["latency"] = bencher_value(*p50, 1e9);
      if (const auto p99 = metric_of(k, headline::latency_p99))
        measures["latency-p99"] = bencher_value(*p99, 1e9);
    } else if (const auto bw = metric_of(k, headline::bandwidth)) {
      measures["bandwidth-bytes-per-second"] = bencher_value(*bw, 1.0);
    }
    if (!measures.empty()) out[k.key] = measures;
  }
  return out;
}

nlohmann::json to_gab_bigger_is_better(const result_set& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& k : by_key(results)) {
    if (k.results.front()->test.pattern == pattern_kind::pingpong) continue;
    if (const auto bw = metric_of(k, headline::bandwidth))
      out.push_back(gab_entry(k, *bw, "bandwidth", "GB/s", 1e-9));
  }
  return out;
}

nlohmann::json to_gab_smaller_is_better(const result_set& results) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& k : by_key(results)) {
    if (k.results.front()->test.pattern != pattern_kind::pingpong) continue;
    if (const auto p50 = metric_of(k, headline::latency_p50))
      out.push_back(gab_entry(k, *p50, "latency p50", "us", 1e6));
    if (const auto p99 = metric_of(k, headline::latency_p99))
      out.push_back(gab_entry(k, *p99, "latency p99", "us", 1e6));
  }
  return out;
}

}  // namespace pairperf
