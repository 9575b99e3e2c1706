#pragma once
// The run-level test that compare and history share: one value per run (the median of that run's
// repetitions), a new run (or several) judged against the spread of a baseline's runs.
//
// Repetitions inside one run share its CPU placement, buffers and the VM's mode, so a run moves
// as a whole; a test over repetitions calls that move certain. The unit of sampling is the run.
//
// Method: the prediction interval for a future observation from a normal sample (Hahn, Meeker &
// Escobar, "Statistical Intervals", 2nd ed., Wiley 2017, ch. 4), on the logs of the run values (a
// slowdown is a ratio). With k baseline runs of log mean x and standard deviation s, a new run's
//   t = (its log - x) / (s * sqrt(1/k + 1))
// is Student's t with k-1 degrees of freedom when nothing changed. With m new runs, the p-value
// that compare and history adjust over all their metrics (Benjamini-Hochberg) is the mean's
// (s pooled with the new runs' own spread, k+m-2 degrees of freedom), and a regression must also
// show in every new run alone (each outside the single-run interval, on the same side: an
// intersection-union test, Berger 1982, so one run's fluke among several is not a regression).
// The minimum detectable change is a single run's at 80% power:
// (t_{alpha/2} + t_{0.2}) * s * sqrt(1/k + 1), k-1 degrees of freedom.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace pairperf {

// P(|T| >= |t|) for Student's t with `dof` degrees of freedom (dof > 0), through the regularized
// incomplete beta function.
double student_t_two_sided_p(double t, double dof);
// The t with P(|T| >= t) = p (0 < p < 1), by bisection on the above.
double student_t_quantile_two_sided(double p, double dof);

struct run_test {
  std::size_t base_runs = 0, new_runs = 0;
  double change = 0;              // exp(mean new log - mean base log) - 1
  std::optional<double> p_value;  // the new runs' mean; none: fewer than 2 baseline runs
  std::optional<double> p_each;   // the largest of each new run's alone (1: not all one side)
  std::optional<double> spread;   // s: the baseline runs' standard deviation of log values
  std::optional<double> mde;      // smallest relative change one run shows with 80% power
  // Baseline runs that would bring the MDE to the threshold; 0 when no baseline size can (the
  // runs vary too much for one run to show it).
  std::size_t base_runs_needed = 0;
};

// `base` and `next`: one positive value per run. `threshold` is the relative change that
// matters (e.g. 0.05); alpha the two-sided level.
run_test test_runs(std::span<const double> base, std::span<const double> next, double alpha,
                   double threshold);

// Benjamini-Hochberg: adjusted values (q) for p-values, in their order.
std::vector<double> benjamini_hochberg(std::span<const double> p);

// The words compare and history say for a metric that could not show a change of `threshold`
// (empty when it could): too few baseline runs, or runs spread wider than the threshold allows.
std::string runs_needed_note(const run_test& t, double threshold);

}  // namespace pairperf
