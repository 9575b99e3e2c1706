// compare's minimum detectable change: what the comparison of two sides' repetitions could have
// shown, so that "no significant change" is only said where a change of the threshold's size
// would have been seen.
#include <algorithm>
#include <cmath>

#include "analysis/compare.h"

namespace pairperf {
namespace {

// The two-sided standard normal quantile: z with P(|Z| > z) = p, by bisection on erfc.
double normal_quantile_two_sided(double p) {
  double lo = 0;
  double hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// Student's t quantile from the normal one (Cornish-Fisher expansion in 1/dof; within 1% for
// dof >= 4, the fewest this is asked for in practice).
double t_quantile(double z, double dof) {
  const double z3 = z * z * z;
  const double z5 = z3 * z * z;
  return z + (z3 + z) / (4 * dof) + (5 * z5 + 16 * z3 + 3 * z) / (96 * dof * dof);
}

double log_spread(std::span<const double> v, double& sum_sq) {
  double mean = 0;
  for (double x : v) mean += std::log(x);
  mean /= static_cast<double>(v.size());
  for (double x : v) sum_sq += (std::log(x) - mean) * (std::log(x) - mean);
  return mean;
}

}  // namespace

detectability detectable_change(std::span<const double> base, std::span<const double> next,
                                double alpha, double threshold) {
  detectability d;
  const auto positive = [](std::span<const double> v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return x > 0; });
  };
  if (!positive(base) || !positive(next)) return d;
  // Pooled within-side spread of the logs: a shift between the sides does not inflate it.
  double sum_sq = 0;
  std::size_t df = 0;
  for (const auto side : {base, next}) {
    if (side.size() < 2) continue;
    (void)log_spread(side, sum_sq);
    df += side.size() - 1;
  }
  if (df == 0) return d;
  const double sigma = std::sqrt(sum_sq / static_cast<double>(df));
  d.noise = sigma;
  // Quantiles for the two-sided level and for 80% power, as Student's t with the pooled degrees
  // of freedom (a few repetitions a side: the normal's would promise changes the test misses);
  // the rank test needs pi/3 times the samples of the t-test (its asymptotic efficiency 3/pi).
  const auto k_for = [&](double dof) {
    const double t = t_quantile(normal_quantile_two_sided(alpha), dof) +
                     t_quantile(normal_quantile_two_sided(2 * (1 - 0.8)), dof);
    return t * sigma * std::sqrt(std::acos(-1.0) / 3);
  };
  const double k = k_for(static_cast<double>(base.size() + next.size()) - 2);
  const double step = std::log1p(threshold);
  if (step > 0) {
    double n = 4;
    for (int i = 0; i < 20; ++i) {  // n and its degrees of freedom settle in a few steps
      const double kn = k_for(std::max(2.0, 2 * n - 2)) / step;
      n = std::max(4.0, std::ceil(2 * kn * kn));
    }
    std::size_t needed = std::max<std::size_t>(4, static_cast<std::size_t>(std::min(n, 1e6)));
    while (mann_whitney_min_p(needed, needed) >= alpha) ++needed;
    d.needed = needed;
  }
  if (base.size() < 2 || next.size() < 2) return d;
  if (mann_whitney_min_p(base.size(), next.size()) >= alpha) return d;
  const double n1 = static_cast<double>(base.size());
  const double n2 = static_cast<double>(next.size());
  d.mde = std::expm1(k * std::sqrt(1 / n1 + 1 / n2));
  return d;
}

}  // namespace pairperf
