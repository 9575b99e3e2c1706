// pairperf history: E-divisive change points (false alarms and detection measured over many
// synthetic series), and the newest run judged against the level the history located.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "analysis/e_divisive.h"
#include "analysis/history.h"

namespace pairperf {
namespace {

std::vector<double> series(std::mt19937_64& rng, std::size_t before, std::size_t after, double step,
                           double spread) {
  std::normal_distribution<double> noise(0.0, spread);
  std::vector<double> v;
  for (std::size_t i = 0; i < before + after; ++i)
    v.push_back(noise(rng) + (i >= before ? std::log1p(step) : 0.0));
  return v;
}

TEST(EDivisive, FindsOneStepWhereItIs) {
  std::mt19937_64 rng(1);
  const auto v = series(rng, 15, 15, -0.25, 0.02);
  const auto cps = e_divisive(v, {});
  ASSERT_EQ(cps.size(), 1U);
  EXPECT_EQ(cps[0].index, 15U);
  EXPECT_LT(cps[0].p_value, 0.05);
}

TEST(EDivisive, TwoStepsAndTooShortASeries) {
  std::mt19937_64 rng(2);
  auto v = series(rng, 10, 10, 0.3, 0.02);
  const auto more = series(rng, 0, 10, -0.2, 0.02);
  for (const double x : more) v.push_back(x + std::log1p(0.3));
  const auto cps = e_divisive(v, {});
  ASSERT_EQ(cps.size(), 2U);
  EXPECT_EQ(cps[0].index, 10U);
  EXPECT_EQ(cps[1].index, 20U);
  EXPECT_TRUE(e_divisive(std::vector<double>{1, 2, 3, 10, 11}, {}).empty());  // < 2 * min segment
}

// Stationary series of 30 runs (3% spread): a change point is a false alarm. With alpha 0.05 each
// series should raise one about 5% of the time; 400 series measure it.
TEST(EDivisive, StationarySeriesRaiseFewFalseChangePoints) {
  std::mt19937_64 rng(3);
  int alarmed = 0;
  const int trials = 400;
  for (int i = 0; i < trials; ++i) {
    e_divisive_options o;
    o.seed = static_cast<std::uint64_t>(i) + 1;
    alarmed += e_divisive(series(rng, 30, 0, 0, 0.03), o).empty() ? 0 : 1;
  }
  std::printf("stationary: %d of %d series had a change point (%.1f%%)\n", alarmed, trials,
              100.0 * alarmed / trials);
  EXPECT_LE(alarmed, trials * 8 / 100);
}

// A 25% step after 10 runs, 5 runs at the new level, 3% spread: found, at the right run.
TEST(EDivisive, TwentyFivePercentStepIsFoundWhereItHappened) {
  std::mt19937_64 rng(4);
  int found = 0;
  const int trials = 300;
  for (int i = 0; i < trials; ++i) {
    e_divisive_options o;
    o.seed = static_cast<std::uint64_t>(i) + 1;
    const auto cps = e_divisive(series(rng, 10, 5, -0.25, 0.03), o);
    found += cps.size() == 1 && cps[0].index == 10 ? 1 : 0;
  }
  std::printf("25%% step: found at its run in %d of %d series\n", found, trials);
  EXPECT_GE(found, trials * 95 / 100);
}

// Synthetic nightly runs: one results file each, with a time in its context.
class Nightly {
 public:
  explicit Nightly(std::uint64_t seed) : m_rng(seed) {}
  void add(double bw, case_status status = case_status::ok, const std::string& lane = "tcp",
           bool noisy = false) {
    std::lognormal_distribution<double> shift(0.0, 0.02);
    result_set one;
    const std::size_t night = m_runs.files.size();
    one.files = {fmt::format("night-{:02}.json", night)};
    one.contexts = {
        nlohmann::json{{"time_utc", fmt::format("2026-11-{:02}T02:00:00Z", night + 1)}}};
    case_result r;
    r.test.transport = "tcp";
    r.test.test = "tcp_bw";
    r.test.pattern = pattern_kind::stream_uni;
    r.test.size_bytes = 1 << 20;
    r.status = status;
    r.provenance = provenance{{{lane, "lo"}}, "", {}, {}, {}, ""};
    const double v = bw * shift(m_rng);
    r.bandwidth_Bps = bandwidth{v, v};
    if (noisy) r.host_noise = {{"noisy", true}, {"why", "the client was descheduled 40%"}};
    one.results = {r};
    one.run_of = {0};
    m_runs.add(one);
  }
  [[nodiscard]] const result_set& runs() const { return m_runs; }

 private:
  std::mt19937_64 m_rng;
  result_set m_runs;
};

TEST(History, AStepIsFoundAndTheRunsAfterItAreJudgedAgainstTheNewLevel) {
  Nightly n(5);
  for (int i = 0; i < 10; ++i) n.add(10e9);
  for (int i = 0; i < 6; ++i) n.add(7.5e9);
  const history h = read_history(n.runs(), {});
  ASSERT_EQ(h.series.size(), 1U);
  const history_series& s = h.series[0];
  ASSERT_EQ(s.changes.size(), 1U) << nlohmann::json(h).dump(1);
  EXPECT_EQ(s.changes[0].run, 10U);
  EXPECT_EQ(s.changes[0].verdict, "regression");
  EXPECT_NEAR(s.changes[0].change, -0.25, 0.03);
  EXPECT_EQ(h.runs[10].time_utc, "2026-11-11T02:00:00Z");
  // The newest run is at the accepted level: not a regression again.
  ASSERT_TRUE(s.latest.has_value());
  EXPECT_EQ(*s.level_since, 10U);
  EXPECT_EQ(s.latest->base.size(), 5U);
  EXPECT_FALSE(s.latest->regression);
  EXPECT_EQ(h.regressions, 0U);
  EXPECT_NE(h.exit_code(), 3);
}

TEST(History, ANewestRunBelowItsLevelIsARegression) {
  Nightly n(6);
  for (int i = 0; i < 10; ++i) n.add(10e9);
  n.add(7.5e9);
  const history h = read_history(n.runs(), {});
  EXPECT_TRUE(h.series.at(0).changes.empty());  // one run cannot make a segment
  EXPECT_EQ(h.regressions, 1U) << nlohmann::json(h).dump(1);
  EXPECT_EQ(h.exit_code(), 3);
  const nlohmann::json j = h;
  EXPECT_EQ(j["schema"], "pairperf.history");
  EXPECT_EQ(j["series"][0]["latest"]["verdict"], "regression");
}

// A night of two runs: both 25% slower is a regression; one run off by 25% and one at the level is
// a fluke the pair's own spread shows (not a regression).
TEST(History, TheNewestRunsOfANightAreJudgedTogether) {
  history_options o;
  o.judged = 2;
  Nightly slow(11);
  for (int i = 0; i < 10; ++i) slow.add(10e9);
  slow.add(7.5e9);
  slow.add(7.5e9);
  history h = read_history(slow.runs(), o);
  ASSERT_TRUE(h.series.at(0).latest.has_value());
  EXPECT_EQ(h.series[0].latest->next.size(), 2U);
  EXPECT_EQ(h.series[0].latest->base.size(), 10U);
  EXPECT_EQ(h.regressions, 1U) << nlohmann::json(h).dump(1);
  Nightly fluke(12);
  for (int i = 0; i < 10; ++i) fluke.add(10e9);
  fluke.add(7.5e9);
  fluke.add(10e9);
  h = read_history(fluke.runs(), o);
  EXPECT_EQ(h.regressions, 0U) << nlohmann::json(h).dump(1);
  EXPECT_NE(h.exit_code(), 3);
}

TEST(History, RunsAreOrderedByTimeNotByArgumentOrder) {
  Nightly n(7);
  for (int i = 0; i < 8; ++i) n.add(10e9);
  // The same runs given newest first.
  result_set reversed;
  for (std::size_t i = n.runs().files.size(); i-- > 0;) {
    result_set one;
    one.files = {n.runs().files[i]};
    one.contexts = {n.runs().contexts[i]};
    one.results = {n.runs().results[i]};
    one.run_of = {0};
    reversed.add(one);
  }
  const history h = read_history(reversed, {});
  EXPECT_EQ(h.ordered_by, "time");
  EXPECT_EQ(h.runs.front().file, "night-00.json");
  EXPECT_EQ(h.runs.back().file, "night-07.json");
}

TEST(History, StatusAndLaneChangesOfTheNewestRunAreFindings) {
  Nightly n(8);
  for (int i = 0; i < 6; ++i) n.add(10e9);
  n.add(10e9, case_status::ok, "cma");
  history h = read_history(n.runs(), {});
  EXPECT_EQ(h.provenance_changes.size(), 1U);
  EXPECT_EQ(h.exit_code(), 3);
  Nightly f(9);
  for (int i = 0; i < 6; ++i) f.add(10e9);
  f.add(10e9, case_status::error);
  h = read_history(f.runs(), {});
  EXPECT_EQ(h.status_changes.size(), 1U);
  EXPECT_EQ(h.exit_code(), 3);
}

TEST(History, OneRunOrTooFewAtTheLevelIsInconclusive) {
  Nightly n(10);
  n.add(10e9);
  history h = read_history(n.runs(), {});
  EXPECT_EQ(h.exit_code(), 4);
  EXPECT_NE(h.inconclusive_reason().find("1 run"), std::string::npos);
  n.add(10e9);
  h = read_history(n.runs(), {});
  EXPECT_EQ(h.exit_code(), 4);  // one baseline run: the spread between runs is unknown
  EXPECT_NE(h.series.at(0).latest->note.find("spread between runs is unknown"), std::string::npos);
}

// Noisy baseline runs are left out of the level, as compare leaves them out; when every run
// before the newest was noisy, they are judged (the newest run's note says so), and the history is
// never "no measured case in common".
TEST(History, NoisyRunsAreLeftOutUnlessEveryRunWasNoisy) {
  Nightly some(8);
  for (int i = 0; i < 6; ++i) some.add(10e9, case_status::ok, "tcp", i == 2);
  some.add(10e9);
  const history mixed = read_history(some.runs(), {});
  ASSERT_TRUE(mixed.series.at(0).latest.has_value());
  EXPECT_EQ(mixed.series[0].latest->base_noisy_runs, 1U);
  EXPECT_EQ(mixed.series[0].latest->base.size(), 5U);

  Nightly all(9);
  for (int i = 0; i < 7; ++i) all.add(10e9, case_status::ok, "tcp", true);
  const history h = read_history(all.runs(), {});
  ASSERT_TRUE(h.series.at(0).latest.has_value()) << nlohmann::json(h).dump(1);
  EXPECT_EQ(h.series[0].latest->base_noisy_runs, 0U);
  EXPECT_EQ(h.series[0].latest->base.size(), 6U);
  EXPECT_EQ(h.inconclusive_reason().find("shares no measured case"), std::string::npos)
      << h.inconclusive_reason();
  EXPECT_EQ(h.regressions, 0U);
}

}  // namespace
}  // namespace pairperf
