#include <gtest/gtest.h>

#include <cmath>

#include "harness/phase_plan.h"

namespace pairperf {
namespace {

using namespace std::chrono_literals;

run_config budget(std::chrono::nanoseconds duration, std::chrono::nanoseconds per_case = 20s) {
  run_config c;
  c.duration = duration;
  c.timeouts.per_case = per_case;
  c.min_iterations = 10;
  c.max_iterations = 4'000'000;
  return c;
}

TEST(PhasePlan, TheMeasuredCountIsTheBudgetAtThePilotsRateWithinHalfTheCaseTimeout) {
  EXPECT_EQ(planned_count(budget(1s), 1000.0), 1'000'000U);  // 1 us per iteration
  // A busy host: 4 ms per round trip; 0.3 s of it, under a 2 s case timeout.
  EXPECT_EQ(planned_count(budget(300ms, 2s), 4e6), 75U);
  // A budget longer than half the case timeout measures for half of it.
  EXPECT_EQ(planned_count(budget(10s, 2s), 1e6), 1000U);
  EXPECT_EQ(planned_count(budget(1ms), 1e6), 10U);               // min_iterations
  EXPECT_EQ(planned_count(budget(10s, 600s), 1.0), 4'000'000U);  // max_iterations
  EXPECT_EQ(planned_count(budget(1s), std::nan("")), 10U);
}

TEST(PhasePlan, PilotPhasesGrowEightfoldAndStopAtTheirTime) {
  const run_config c = budget(1s);
  const double pilot = pilot_budget_ns(c);
  EXPECT_EQ(pilot, 1e8);                                                // a tenth of the budget
  EXPECT_EQ(pilot_budget_ns(budget(60s)), 0.5e9);                       // at most half a second
  EXPECT_EQ(next_pilot_count(c, pilot, 1e4, 1000.0, 16, 16), 128U);     // grows eightfold
  EXPECT_EQ(next_pilot_count(c, pilot, 9.999e7, 1000.0, 128, 16), 0U);  // less than a warm-up left
  EXPECT_EQ(next_pilot_count(c, pilot, 9.9e7, 1000.0, 1'000'000, 16), 1000U);  // what is left
  EXPECT_EQ(next_pilot_count(c, pilot, 2e8, 1000.0, 16, 16), 0U);              // time is up
  EXPECT_EQ(next_pilot_count(c, pilot, 1e4, std::nan(""), 16, 16), 0U);
}

TEST(PhasePlan, ACountedMeasurementTakesWhatIsLeftAtMostDoublingAndSkipsCrumbs) {
  const run_config c = budget(1s);
  // Half the budget ran at the planned rate: the other half.
  EXPECT_EQ(next_measure_count(c, 0.5e9, 500'000), 500'000U);
  // The rate got ten times better: at most double what ran.
  EXPECT_EQ(next_measure_count(c, 0.05e9, 500'000), 1'000'000U);
  // The rate collapsed (a busy host): the budget is spent, stop.
  EXPECT_EQ(next_measure_count(c, 3e9, 500'000), 0U);
  // Less than a sixteenth of what ran is left: not worth a phase.
  EXPECT_EQ(next_measure_count(c, 0.99e9, 500'000), 0U);
  // min_iterations is reached whatever the time.
  run_config m = c;
  m.min_iterations = 5000;
  EXPECT_EQ(next_measure_count(m, 5e9, 1000), 4000U);
  // Never past max_iterations.
  run_config x = c;
  x.max_iterations = 600'000;
  EXPECT_EQ(next_measure_count(x, 0.5e9, 500'000), 100'000U);
  EXPECT_EQ(next_measure_count(x, 0.5e9, 600'000), 0U);
}

TEST(PhasePlan, ATimedPhasesCapLeavesRoomForABetterRate) {
  const run_config c = budget(1s);
  EXPECT_EQ(timed_cap(1'000'000, c), 2'000'000U);
  EXPECT_EQ(timed_cap(75, c), 65536U);  // a slow pilot does not hold a faster phase to 150
  EXPECT_EQ(timed_cap(3e6, c), 4'000'000U);
}

TEST(PhasePlan, CountsAreWholeAndBounded) {
  const run_config c = budget(1s);
  EXPECT_EQ(phase_count(0.2, c), 1U);
  EXPECT_EQ(phase_count(1e300, c), 4'000'000U);
  EXPECT_EQ(phase_count(-5, c), 1U);
  EXPECT_EQ(phase_count(std::nan(""), c), 1U);
  pattern_outcome o;
  o.elapsed_ns = 0;
  EXPECT_EQ(elapsed_ns(o), 1.0);  // never a division by zero
  o.elapsed_ns = 4000;
  EXPECT_EQ(per_iteration(o, 4), 1000.0);
  EXPECT_EQ(per_iteration(o, 0), 4000.0);
}

}  // namespace
}  // namespace pairperf
