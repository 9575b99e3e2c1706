#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace pairperf {

void to_json(nlohmann::json& j, const sample_stats& s) {
  j = nlohmann::json{{"count", s.count}, {"min", s.min}, {"avg", s.avg},
                     {"p50", s.p50},     {"p90", s.p90}, {"p99", s.p99},
                     {"p99_9", s.p99_9}, {"max", s.max}, {"stddev", s.stddev}};
}

void from_json(const nlohmann::json& j, sample_stats& s) {
  j.at("count").get_to(s.count);
  j.at("min").get_to(s.min);
  j.at("avg").get_to(s.avg);
  j.at("p50").get_to(s.p50);
  j.at("p90").get_to(s.p90);
  j.at("p99").get_to(s.p99);
  j.at("p99_9").get_to(s.p99_9);
  j.at("max").get_to(s.max);
  j.at("stddev").get_to(s.stddev);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double percentile_sorted(std::span<const std::int64_t> sorted, double q) noexcept {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return static_cast<double>(sorted[lo]) + frac * static_cast<double>(sorted[hi] - sorted[lo]);
}

sample_stats summarize(std::span<std::int64_t> samples, double scale) {
  sample_stats s;
  s.count = samples.size();
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  // Two passes in long double: exact enough for 1e7 samples of up to seconds in nanoseconds.
  long double sum = 0;
  for (const auto v : samples) sum += v;
  const long double mean = sum / static_cast<long double>(samples.size());
  long double sq = 0;
  for (const auto v : samples) sq += (v - mean) * (v - mean);
  s.min = static_cast<double>(samples.front()) * scale;
  s.max = static_cast<double>(samples.back()) * scale;
  s.avg = static_cast<double>(mean) * scale;
  s.stddev = std::sqrt(static_cast<double>(sq / static_cast<long double>(samples.size()))) * scale;
  s.p50 = percentile_sorted(samples, 0.50) * scale;
  s.p90 = percentile_sorted(samples, 0.90) * scale;
  s.p99 = percentile_sorted(samples, 0.99) * scale;
  s.p99_9 = percentile_sorted(samples, 0.999) * scale;
  return s;
}

void sample_recorder::reset(std::size_t n) {
  if (m_data.size() < n) m_data.resize(n);
  m_count = 0;
}

void sample_recorder::extend(std::size_t n) {
  m_count = std::min(m_count, m_data.size());  // what overflowed a phase was never kept
  if (m_data.size() - m_count < n) m_data.resize(m_count + n);
}

}  // namespace pairperf
