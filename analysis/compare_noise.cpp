#include "analysis/compare_noise.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "analysis/run_test.h"
#include "core/stats.h"
#include "core/units.h"
#include "host/noise.h"

namespace pairperf {

headline headline_for(const std::string& metric) {
  if (metric == "bandwidth") return headline::bandwidth;
  return metric == "latency p50" ? headline::latency_p50 : headline::latency_p99;
}

std::vector<std::pair<double, double>> run_ranges(
    const std::vector<std::vector<const case_result*>>& runs, const std::string& metric) {
  std::vector<std::pair<double, double>> out;
  for (const auto& reps : repetitions_by_run(runs, metric)) {
    const auto [lo, hi] = std::minmax_element(reps.begin(), reps.end());
    out.emplace_back(*lo, *hi);
  }
  return out;
}

std::vector<noise_exposure> run_exposures(const std::vector<std::vector<const case_result*>>& runs,
                                          const std::string& metric) {
  std::vector<noise_exposure> out;
  for (const auto& run : runs) {
    noise_exposure worst;
    bool any = false;
    for (const auto* r : run) {
      if (repetition_values(*r, headline_for(metric)).empty()) continue;
      std::uint64_t samples = 0;
      double elapsed = 0;
      for (const auto& rep : r->repetitions) {
        samples += rep.iterations;
        elapsed += rep.elapsed_s;
      }
      noise_exposure e = exposure_of(r->host_noise, samples > 0 ? samples : r->iterations);
      // A percentile is the median of the repetitions': the one with the fewest samples (the one
      // the waits slowed most) and its share of the waiting, by its time, bound what it moved.
      const auto fewest = std::min_element(
          r->repetitions.begin(), r->repetitions.end(),
          [](const repetition& x, const repetition& y) { return x.iterations < y.iterations; });
      if (fewest != r->repetitions.end() && fewest->iterations > 0 && elapsed > 0) {
        e.wait_s *= std::clamp(fewest->elapsed_s / elapsed, 0.0, 1.0);
        e.samples = fewest->iterations;
      }
      worst.waited = std::max(worst.waited, e.waited);
      if (worst.samples == 0 ||
          (e.samples > 0 && e.wait_s / static_cast<double>(e.samples) >
                                worst.wait_s / static_cast<double>(worst.samples))) {
        worst.wait_s = e.wait_s;
        worst.samples = e.samples;
      }
      any = true;
    }
    if (any) out.push_back(worst);
  }
  return out;
}

namespace {

// Whether the baseline's own noisy runs show this bandwidth holding under load (a link at its
// rate, not the CPUs): at least two that waited 5 points beyond the usual, each within the
// threshold of the quiet median and every one of its repetitions within twice it. A new run that
// waited much longer than they did is not covered.
bool held_under_load(const metric_change& m, double usual_wait, double new_wait) {
  std::size_t held = 0;
  double longest = 0;
  for (std::size_t i = 0; i < m.base_loaded.size(); ++i) {
    if (i >= m.base_loaded_noise.size() || i >= m.base_loaded_range.size()) return false;
    const double w = m.base_loaded_noise[i].waited;
    if (w <= usual_wait + 0.05) continue;
    const auto within = [&](double v, double share) {
      return m.base_median > 0 && std::abs(v / m.base_median - 1) <= share;
    };
    if (!within(m.base_loaded[i], m.threshold) ||
        !within(m.base_loaded_range[i].first, 2 * m.threshold) ||
        !within(m.base_loaded_range[i].second, 2 * m.threshold))
      return false;
    ++held;
    longest = std::max(longest, w);
  }
  return held >= 2 && new_wait <= longest + 0.1;
}

// A bandwidth that waited for a CPU beyond the baseline's usual wait. Where the baseline's noisy
// runs show the figure holding under load, the waits explain no drop. A wait of a few points is
// credited (value x (1 - usual) / (1 - waited)). Beyond 5 points, any drop: how much a figure
// that moves with the CPUs loses to another tenant is not a fixed share of the wait (measured on
// loopback TCP, 2 cores: 1 MiB streams lost 80-89% of their figure while waiting 43-46%).
std::string bandwidth_noise_explanation(const metric_change& m, double usual_wait) {
  std::vector<double> waits;
  for (const auto& e : m.next_noise) waits.push_back(std::min(e.waited, 0.95));
  const auto [least, most] = std::minmax_element(waits.begin(), waits.end());
  if (held_under_load(m, usual_wait, *most)) return {};
  const std::string waited = fmt::format(
      "the new run waited for a CPU up to {:.1f}% of its measurement (the baseline's "
      "runs {:.1f}%)",
      *most * 100, usual_wait * 100);
  if (*least > usual_wait + 0.05) {
    return fmt::format(
        "{}, and no two baseline runs that waited as long held this figure{}", waited,
        m.base_loaded.empty() ? std::string(" (none of them waited)")
                              : fmt::format(" ({} noisy baseline run(s))", m.base_loaded.size()));
  }
  std::vector<double> credited;
  for (std::size_t i = 0; i < m.next.size(); ++i)
    credited.push_back(waits[i] > usual_wait ? m.next[i] * (1 - usual_wait) / (1 - waits[i])
                                             : m.next[i]);
  const double change = test_runs(m.base, credited, 0.05, m.threshold).change;
  if (-change > m.threshold) return {};
  return fmt::format("{}; credited the difference, the change is {:+.1f}%", waited, change * 100);
}

}  // namespace

// Whether the new runs' host noise could have made a regression-sized change (host/noise.h), as
// far as it exceeds the baseline runs' (a host busy through the baseline and the new runs alike
// slows both, and explains no difference between them). A latency percentile q moved by d needs
// 1 - q of the samples (at least one) delayed by d each, and a wait of w on either side delays a
// round trip's one-way figure by w / 2: the change is explained when every new run's waits beyond
// the baseline's usual, spread over those samples, reach it.
std::string noise_explanation(const metric_change& m) {
  if (m.next_noise.size() != m.next.size() || m.next.empty()) return {};
  std::vector<double> base_waited, base_per_sample;
  for (const auto& e : m.base_noise) {
    base_waited.push_back(e.waited);
    if (e.samples > 0) base_per_sample.push_back(e.wait_s / static_cast<double>(e.samples));
  }
  const double usual_wait = std::min(median_of(base_waited), 0.95);
  if (m.higher_is_better) return bandwidth_noise_explanation(m, usual_wait);
  const double tail = m.metric == "latency p99" ? 0.01 : 0.5;
  const double usual_per_sample = base_per_sample.empty() ? 0 : median_of(base_per_sample);
  double reach = -1, moved_most = 0;
  for (std::size_t i = 0; i < m.next.size(); ++i) {
    const noise_exposure& e = m.next_noise[i];
    if (e.samples == 0) return {};
    const double n = static_cast<double>(e.samples);
    const double beyond_usual = e.wait_s - usual_per_sample * n;
    const double r = beyond_usual / 2 / std::max(1.0, tail * n);
    const double moved = m.next[i] - m.base_median;
    if (r <= 0 || moved > r) return {};
    reach = reach < 0 ? r : std::min(reach, r);
    moved_most = std::max(moved_most, moved);
  }
  return fmt::format(
      "the new run's waits for a CPU beyond the baseline's usual can delay the {:.0f}% of its "
      "samples that its {} rests on by {} each (one-way), more than it moved ({})",
      tail * 100, m.metric == "latency p99" ? "p99" : "median", format_seconds(reach),
      format_seconds(moved_most));
}

}  // namespace pairperf
