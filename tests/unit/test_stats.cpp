#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/stats.h"

namespace pairperf {
namespace {

TEST(Stats, UniformOneToThousand) {
  std::vector<std::int64_t> v(1000);
  std::iota(v.begin(), v.end(), 1);
  std::shuffle(v.begin(), v.end(), std::mt19937(42));
  const sample_stats s = summarize(v, 1.0);
  EXPECT_EQ(s.count, 1000U);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 1000);
  EXPECT_DOUBLE_EQ(s.avg, 500.5);
  // Type-7 interpolation: rank q*(n-1).
  EXPECT_DOUBLE_EQ(s.p50, 500.5);
  EXPECT_DOUBLE_EQ(s.p90, 900.1);
  EXPECT_DOUBLE_EQ(s.p99, 990.01);
  EXPECT_NEAR(s.p99_9, 999.001, 1e-9);
  // Population standard deviation of 1..n: sqrt((n^2-1)/12).
  EXPECT_NEAR(s.stddev, std::sqrt((1000.0 * 1000.0 - 1) / 12), 1e-9);
}

TEST(Stats, ScaleTurnsRoundTripNanosecondsIntoOneWaySeconds) {
  std::vector<std::int64_t> v{2000, 4000, 6000};
  const sample_stats s = summarize(v, 0.5e-9);
  EXPECT_DOUBLE_EQ(s.min, 1e-6);
  EXPECT_DOUBLE_EQ(s.p50, 2e-6);
  EXPECT_DOUBLE_EQ(s.max, 3e-6);
}

TEST(Stats, ConstantAndSingleSample) {
  std::vector<std::int64_t> v(500, 7);
  const sample_stats s = summarize(v, 1.0);
  EXPECT_DOUBLE_EQ(s.stddev, 0);
  EXPECT_DOUBLE_EQ(s.p99_9, 7);
  std::vector<std::int64_t> one{42};
  const sample_stats t = summarize(one, 1.0);
  EXPECT_DOUBLE_EQ(t.p50, 42);
  EXPECT_DOUBLE_EQ(t.p99, 42);
  std::vector<std::int64_t> none;
  EXPECT_EQ(summarize(none, 1.0).count, 0U);
}

TEST(Stats, NormalDistributionMatchesTheory) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(10000, 100);
  std::vector<std::int64_t> v(1'000'000);
  for (auto& x : v) x = std::llround(normal(rng));
  const sample_stats s = summarize(v, 1.0);
  EXPECT_NEAR(s.avg, 10000, 1);
  EXPECT_NEAR(s.stddev, 100, 1);
  EXPECT_NEAR(s.p50, 10000, 1);
  EXPECT_NEAR(s.p90, 10000 + 1.2816 * 100, 2);
  EXPECT_NEAR(s.p99, 10000 + 2.3263 * 100, 3);
  EXPECT_NEAR(s.p99_9, 10000 + 3.0902 * 100, 6);
}

TEST(Stats, ExponentialTailIsSeenBecauseAllSamplesCount) {
  // A window of the last samples would miss the early outliers; statistics over all must not.
  std::vector<std::int64_t> v(100'000, 1000);
  for (int i = 0; i < 200; ++i) v[static_cast<std::size_t>(i)] = 1'000'000;  // first 0.2% are slow
  const sample_stats s = summarize(v, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 1e6);
  EXPECT_DOUBLE_EQ(s.p99_9, 1e6);
  EXPECT_DOUBLE_EQ(s.p99, 1000);
}

TEST(Stats, RecorderKeepsCapacityAndCountsOverflow) {
  sample_recorder r;
  r.reset(3);
  for (int i = 0; i < 5; ++i) r.record(i);
  EXPECT_EQ(r.recorded(), 5U);
  ASSERT_EQ(r.samples().size(), 3U);
  EXPECT_EQ(r.samples()[2], 2);
  r.reset(2);
  EXPECT_EQ(r.samples().size(), 0U);
}

TEST(Stats, JsonRoundTrip) {
  std::vector<std::int64_t> v{1, 2, 3, 4};
  const sample_stats s = summarize(v, 1e-9);
  const nlohmann::json j = s;
  EXPECT_TRUE(j.contains("p99_9"));
  const auto back = j.get<sample_stats>();
  EXPECT_DOUBLE_EQ(back.p90, s.p90);
  EXPECT_EQ(back.count, 4U);
}

}  // namespace
}  // namespace pairperf
