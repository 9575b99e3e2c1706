#include "harness/phase_plan.h"

#include <algorithm>

namespace pairperf {

double elapsed_ns(const pattern_outcome& o) noexcept {
  return static_cast<double>(std::max<std::int64_t>(o.elapsed_ns, 1));
}

double per_iteration(const pattern_outcome& o, std::uint64_t n) noexcept {
  return elapsed_ns(o) / static_cast<double>(std::max<std::uint64_t>(n, 1));
}

std::uint64_t phase_count(double x, const run_config& cfg) noexcept {
  const double hi = static_cast<double>(std::max<std::uint64_t>(cfg.max_iterations, 1));
  if (!(x >= 1.0)) return 1;  // NaN too
  return static_cast<std::uint64_t>(std::min(x, hi));
}

std::uint64_t timed_cap(double expected, const run_config& cfg) noexcept {
  return phase_count(std::max(2 * expected, 65536.0), cfg);
}

double pilot_budget_ns(const run_config& cfg) noexcept {
  return std::min(static_cast<double>(cfg.duration.count()) / 10, 0.5e9);
}

std::uint64_t next_pilot_count(const run_config& cfg, double pilot_ns, double spent_ns,
                               double per_iter_ns, std::uint64_t last, std::uint64_t warmed) {
  if (!(spent_ns < pilot_ns)) return 0;
  const double fits = (pilot_ns - spent_ns) / std::max(per_iter_ns, 1e-3);
  const double grown = 8.0 * static_cast<double>(std::max<std::uint64_t>(last, 1));
  const double n = std::min({fits, grown, static_cast<double>(cfg.max_iterations)});
  // Less than a warm-up's worth left (or a rate that is not a number): stop.
  return n >= static_cast<double>(std::max<std::uint64_t>(warmed, 1))
             ? static_cast<std::uint64_t>(n)
             : 0;
}

std::uint64_t planned_count(const run_config& cfg, double per_iter_ns) {
  const double per_iter = std::max(per_iter_ns, 1e-3);
  const double budget = static_cast<double>(cfg.duration.count()) / per_iter;
  const double cap = static_cast<double>(cfg.timeouts.per_case.count()) / 2 / per_iter;
  const double fit = std::min(budget, cap);
  const auto lo = static_cast<double>(cfg.min_iterations);
  const auto hi = static_cast<double>(std::max(cfg.max_iterations, cfg.min_iterations));
  if (!(fit >= lo)) return cfg.min_iterations;  // NaN too
  return static_cast<std::uint64_t>(std::min(fit, hi));
}

std::uint64_t next_measure_count(const run_config& cfg, double spent_ns, std::uint64_t done) {
  if (done >= cfg.max_iterations) return 0;
  const auto budget = static_cast<double>(cfg.duration.count());
  const double per_iter =
      std::max(spent_ns, 1.0) / static_cast<double>(std::max<std::uint64_t>(done, 1));
  const double fits = spent_ns < budget ? (budget - spent_ns) / per_iter : 0;
  const double bound = static_cast<double>(std::min(2 * done, cfg.max_iterations - done));
  std::uint64_t next = static_cast<std::uint64_t>(std::min(fits, bound));
  if (done < cfg.min_iterations) next = std::max(next, cfg.min_iterations - done);
  if (next == 0 || (next < done / 16 && done >= cfg.min_iterations)) return 0;
  return next;
}

}  // namespace pairperf
