// pairperf compare and the host's noise: a regression-sized change is the build's only where the
// new runs' waits for a CPU cannot explain it (docs/commands/compare.md, "Not the host's noise").
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "analysis/compare.h"
#include "compare_synth.h"

namespace pairperf {
namespace {

// Never a regression for want of a CPU: a new run 20% slower that waited 30% of its measurement
// is inconclusive; one that waited 5% is a regression all the same.
TEST(CompareProperties, ARegressionTheNewRunsWaitForACpuExplainsIsInconclusive) {
  synth g(13);
  const result_set base = g.runs(8, 10e9, 3e-6, 0.01);
  const auto waited = [&](double share) {
    result_set r = g.runs(1, 8e9, 3e-6, 0.01);
    for (auto& x : r.results)
      x.host_noise = {{"noisy", true},
                      {"why", "the client was descheduled"},
                      {"client", {{"descheduled_share", share}, {"involuntary_switches", 0}}}};
    return r;
  };
  comparison c = compare_results(base, waited(0.3), {});
  const metric_change& bw = c.cases.at(0).metrics.at(0);
  EXPECT_FALSE(bw.regression);
  EXPECT_TRUE(bw.inconclusive);
  EXPECT_NE(bw.note.find("its host noise explains"), std::string::npos) << bw.note;
  c = compare_results(base, waited(0.05), {});
  EXPECT_TRUE(c.cases.at(0).metrics.at(0).regression) << nlohmann::json(c).dump(1);
  // A host busy through the baseline too (every run waited 30%): the new run's wait is the usual
  // one and explains nothing; the 20% drop is a regression.
  result_set busy_base;
  for (int i = 0; i < 8; ++i) {
    result_set r = g.runs(1, 10e9, 3e-6, 0.01);
    for (auto& x : r.results)
      x.host_noise = {{"noisy", true},
                      {"why", "the client was descheduled"},
                      {"client", {{"descheduled_share", 0.3}, {"involuntary_switches", 0}}}};
    busy_base.add(r);
  }
  c = compare_results(busy_base, waited(0.3), {});
  EXPECT_TRUE(c.cases.at(0).metrics.at(0).regression) << nlohmann::json(c).dump(1);
}

// A host that takes the CPU away for `share` of a run's measurement, `wait_s` of run-queue wait
// on the client side (the synthetic runs' repetitions: 100 samples and 0.2 s each).
void load(result_set& r, double share, double wait_s) {
  for (auto& x : r.results)
    x.host_noise = {{"noisy", true},
                    {"why", "the client was descheduled"},
                    {"client",
                     {{"descheduled_share", share},
                      {"runqueue_wait_s", wait_s},
                      {"wall_s", 1.0},
                      {"involuntary_switches", 100}}}};
}

// A latency percentile moved by d needs its share of the samples delayed by d each: a loaded run's
// p50 33% higher is explained where its waits could carry that (0.3 s over 500 samples), and a
// regression where they could not (10 us of waiting cannot lift 50 samples by 1 us one-way).
//
// The baseline's quiet runs were switched out once every 5 samples, as long samples are (a 1 MiB
// ping-pong: 26 switches in 69 round trips, each a tick's preemption of a few us): switches that
// every run has explain no difference, and do not hide what the new run's waits explain.
TEST(CompareProperties, ALatencyIsExplainedOnlyAsFarAsItsWaitsCanCarry) {
  synth g(21);
  result_set base = g.runs(8, 10e9, 3e-6, 0.01);
  for (auto& x : base.results)
    x.host_noise = {{"noisy", false},
                    {"client",
                     {{"descheduled_share", 0.005},
                      {"runqueue_wait_s", 0.005},
                      {"wall_s", 1.0},
                      {"involuntary_switches", 100}}}};
  result_set next = g.runs(1, 10e9, 4e-6, 0.01);
  load(next, 0.3, 0.3);
  comparison c = compare_results(base, next, {});
  const metric_change& p50 = c.cases.at(1).metrics.at(0);
  ASSERT_EQ(p50.metric, "latency p50");
  EXPECT_FALSE(p50.regression) << p50.note;
  EXPECT_TRUE(p50.inconclusive);
  EXPECT_NE(p50.note.find("can delay the 50% of its samples that its median rests on"),
            std::string::npos)
      << p50.note;
  const metric_change& p99 = c.cases.at(1).metrics.at(1);
  EXPECT_FALSE(p99.regression) << p99.note;
  EXPECT_NE(p99.note.find("its p99 rests on"), std::string::npos) << p99.note;
  load(next, 1e-5, 10e-6);
  c = compare_results(base, next, {});
  EXPECT_TRUE(c.cases.at(1).metrics.at(0).regression) << nlohmann::json(c).dump(1);
  EXPECT_EQ(c.exit_code(), 3);
}

// Whether a bandwidth moves with its waits is read from the baseline's own noisy runs: where they
// held their figure while waiting 40% (a link at its rate), a loaded run 20% slower is a
// regression; where they lost what they waited (CPU-bound), the same run is inconclusive, as it
// is where no baseline run waited at all.
TEST(CompareProperties, TheBaselinesLoadedRunsTellWhetherWaitsExplainABandwidth) {
  synth g(22);
  const auto with_loaded = [&](double loaded_bw) {
    result_set base = g.runs(6, 10e9, 3e-6, 0.01);
    for (int i = 0; i < 3; ++i) {
      result_set r = g.runs(1, loaded_bw, 3e-6, 0.01);
      load(r, 0.4, 0.4);
      base.add(r);
    }
    return base;
  };
  result_set next = g.runs(1, 8e9, 3e-6, 0.01);
  load(next, 0.4, 0.4);
  comparison c = compare_results(with_loaded(10e9), next, {});
  const metric_change& held = c.cases.at(0).metrics.at(0);
  EXPECT_EQ(held.base_noisy_runs, 3U);
  EXPECT_TRUE(held.regression) << held.note;
  c = compare_results(with_loaded(6e9), next, {});
  const metric_change& lost = c.cases.at(0).metrics.at(0);
  EXPECT_FALSE(lost.regression) << lost.note;
  EXPECT_NE(lost.note.find("no two baseline runs that waited as long held this figure (3 noisy"),
            std::string::npos)
      << nlohmann::json(c).dump(1);
  c = compare_results(g.runs(6, 10e9, 3e-6, 0.01), next, {});
  EXPECT_FALSE(c.cases.at(0).metrics.at(0).regression) << nlohmann::json(c).dump(1);
  EXPECT_NE(c.cases.at(0).metrics.at(0).note.find("(none of them waited)"), std::string::npos)
      << c.cases.at(0).metrics.at(0).note;
}

}  // namespace
}  // namespace pairperf
