#include "analysis/run_test.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pairperf {
namespace {

// The continued fraction of the incomplete beta function (modified Lentz's method).
double beta_fraction(double a, double b, double x) {
  constexpr double tiny = 1e-300;
  constexpr double eps = 1e-15;
  double c = 1;
  double d = 1 - (a + b) * x / (a + 1);
  d = 1 / (std::abs(d) < tiny ? tiny : d);
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double md = m;
    const double even = md * (b - md) * x / ((a + 2 * md - 1) * (a + 2 * md));
    for (const double coef :
         {even, -(a + md) * (a + b + md) * x / ((a + 2 * md) * (a + 2 * md + 1))}) {
      d = 1 + coef * d;
      d = 1 / (std::abs(d) < tiny ? tiny : d);
      c = 1 + coef / c;
      if (std::abs(c) < tiny) c = tiny;
      h *= d * c;
    }
    if (std::abs(d * c - 1) < eps) break;
  }
  return h;
}

// I_x(a, b), the regularized incomplete beta function.
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) +
                                a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

struct log_sample {
  double mean = 0;
  double sum_sq = 0;  // of deviations from the mean
  std::size_t n = 0;
};

log_sample logs_of(std::span<const double> v) {
  log_sample s;
  s.n = v.size();
  if (s.n == 0) return s;
  for (const double x : v) s.mean += std::log(x);
  s.mean /= static_cast<double>(s.n);
  for (const double x : v) s.sum_sq += (std::log(x) - s.mean) * (std::log(x) - s.mean);
  return s;
}

// The smallest change detected with 80% power by k baseline and m new runs of log spread s.
double mde_for(double s, double k, double m, double alpha, bool pooled) {
  const double dof = pooled ? k + m - 2 : k - 1;
  if (dof < 1) return INFINITY;
  const double factor =
      student_t_quantile_two_sided(alpha, dof) + student_t_quantile_two_sided(0.4, dof);
  return std::expm1(factor * s * std::sqrt(1 / k + 1 / m));
}

constexpr std::size_t most_runs = 200;

// The fewest n in [lo, most_runs] with mde(n) <= threshold, or 0; mde falls as n grows.
template <class Mde>
std::size_t fewest_runs(std::size_t lo, double threshold, Mde mde) {
  if (mde(most_runs) > threshold) return 0;
  std::size_t hi = most_runs;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (mde(mid) <= threshold) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi;
}

}  // namespace

double student_t_two_sided_p(double t, double dof) {
  if (!(dof > 0) || std::isnan(t)) return 1;
  if (std::isinf(t)) return 0;
  return std::clamp(incomplete_beta(dof / 2, 0.5, dof / (dof + t * t)), 0.0, 1.0);
}

double student_t_quantile_two_sided(double p, double dof) {
  double lo = 0;
  double hi = 1;
  for (int i = 0; i < 80 && student_t_two_sided_p(hi, dof) > p; ++i) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (student_t_two_sided_p(mid, dof) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

run_test test_runs(std::span<const double> base, std::span<const double> next, double alpha,
                   double threshold) {
  run_test r;
  r.base_runs = base.size();
  r.new_runs = next.size();
  const auto positive = [](std::span<const double> v) {
    return !v.empty() && std::all_of(v.begin(), v.end(), [](double x) { return x > 0; });
  };
  if (!positive(base) || !positive(next)) return r;
  const log_sample b = logs_of(base);
  const log_sample n = logs_of(next);
  r.change = std::expm1(n.mean - b.mean);
  if (b.n < 2) return r;
  const double k = static_cast<double>(b.n);
  const double m = static_cast<double>(n.n);
  const double base_dof = k - 1;
  const double s_base = std::sqrt(b.sum_sq / base_dof);
  r.spread = s_base;
  // The mean of the new runs: pooled with their own spread when there are several.
  const bool pooled = n.n >= 2;
  const double dof = base_dof + (pooled ? m - 1 : 0);
  const double s = std::sqrt((b.sum_sq + (pooled ? n.sum_sq : 0)) / dof);
  // Each new run alone, against the baseline: the same side, and outside its prediction interval.
  double p_each = 0;
  bool same_side = true;
  for (const double x : next) {
    const double d = std::log(x) - b.mean;
    same_side = same_side && (d > 0) == (n.mean > b.mean) && d != 0;
    p_each = std::max(
        p_each,
        s_base > 0 ? student_t_two_sided_p(d / (s_base * std::sqrt(1 / k + 1)), base_dof) : 0.0);
  }
  r.p_each = same_side ? p_each : 1.0;
  if (s == 0) {
    r.p_value = n.mean == b.mean ? 1.0 : 0.0;
    r.mde = 0;
    return r;
  }
  r.p_value = student_t_two_sided_p((n.mean - b.mean) / (s * std::sqrt(1 / k + 1 / m)), dof);
  r.mde = mde_for(s_base, k, 1, alpha, false);
  r.base_runs_needed = fewest_runs(b.n, threshold, [&](std::size_t more) {
    return mde_for(s_base, static_cast<double>(more), 1, alpha, false);
  });
  return r;
}

std::vector<double> benjamini_hochberg(std::span<const double> p) {
  std::vector<std::size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return p[a] < p[b]; });
  std::vector<double> q(p.size(), 1.0);
  const auto total = static_cast<double>(p.size());
  double running = 1.0;
  for (std::size_t i = order.size(); i-- > 0;) {
    running = std::min(running, p[order[i]] * total / static_cast<double>(i + 1));
    q[order[i]] = std::min(1.0, running);
  }
  return q;
}

std::string runs_needed_note(const run_test& t, double threshold) {
  if (t.base_runs < 2) {
    return fmt::format(
        "{} baseline run: the spread between runs is unknown; keep 10 runs in the baseline (a "
        "folder of results files)",
        t.base_runs);
  }
  if (!t.mde || *t.mde <= threshold) return {};
  const std::string need =
      t.base_runs_needed > 0
          ? fmt::format("needs {} baseline runs", t.base_runs_needed)
          : fmt::format("no baseline size lets one run show {:.1f}%", threshold * 100);
  return fmt::format(
      "runs vary ±{:.1f}%: one run shows only changes beyond {:.1f}% against {} "
      "baseline runs, {}",
      t.spread.value_or(0) * 100, *t.mde * 100, t.base_runs, need);
}

}  // namespace pairperf
