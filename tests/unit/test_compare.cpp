// pairperf compare: the run-level test against reference values, and the statistical properties
// the regression check promises, measured on synthetic runs with realistic noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "analysis/compare.h"
#include "analysis/export.h"
#include "compare_synth.h"

namespace pairperf {
namespace {

// Reference values from mpmath 1.3 (betainc, 30 digits): the two-sided p of Student's t.
TEST(StudentT, TwoSidedPAndQuantileMatchTheReference) {
  EXPECT_NEAR(student_t_two_sided_p(2.0, 5), 0.101939478829858369, 1e-12);
  EXPECT_NEAR(student_t_two_sided_p(-2.0, 5), 0.101939478829858369, 1e-12);
  EXPECT_NEAR(student_t_two_sided_p(1.5, 30), 0.144065929128645963, 1e-12);
  EXPECT_NEAR(student_t_two_sided_p(0.3, 2.5), 0.787342371495197418, 1e-12);
  EXPECT_NEAR(student_t_two_sided_p(8, 3), 0.00407657758778546789, 1e-14);
  EXPECT_DOUBLE_EQ(student_t_two_sided_p(0, 4), 1.0);
  EXPECT_NEAR(student_t_quantile_two_sided(0.05, 4), 2.776445105197799, 1e-9);
  EXPECT_NEAR(student_t_quantile_two_sided(0.05, 1), 12.706204736174705, 1e-7);
  EXPECT_NEAR(student_t_quantile_two_sided(0.05, 1e7), 1.959963984540054, 1e-6);
}

TEST(BenjaminiHochberg, AdjustsInPlaceOrder) {
  const std::vector<double> p{0.04, 0.01, 0.03, 0.5};
  const std::vector<double> q = benjamini_hochberg(p);
  EXPECT_NEAR(q[1], 0.04, 1e-12);          // 0.01 * 4 / 1
  EXPECT_NEAR(q[0], 0.04 * 4 / 3, 1e-12);  // 0.053, and 0.03 * 4/2 = 0.06 above it keeps it
  EXPECT_NEAR(q[2], 0.04 * 4 / 3, 1e-12);
  EXPECT_NEAR(q[3], 0.5, 1e-12);
}

// A/A: a new run of the same build against 5 baseline runs, runs moving 3% as a whole (the
// model's assumptions hold). The false alarms stay under alpha.
TEST(CompareProperties, AaRunsRaiseAtMostFivePercentFalseAlarms) {
  synth g(20261121);
  int alarms = 0;
  const int pairs = 1000;
  for (int i = 0; i < pairs; ++i) {
    const comparison c = compare_results(g.runs(5, 10e9, 3e-6), g.runs(1, 10e9, 3e-6), {});
    alarms += c.has_finding() ? 1 : 0;
  }
  std::printf("A/A: %d false alarms in %d comparisons (%.1f%%)\n", alarms, pairs,
              100.0 * alarms / pairs);
  EXPECT_LE(alarms, pairs * 5 / 100);
}

// The issue's failure: two runs whose repetitions are tight but whose levels differ by 20% (the
// run moved as a whole) were a certain regression over repetitions. One baseline run cannot show
// the spread between runs: inconclusive, saying what it needs.
TEST(CompareProperties, TwoSingleRunsAreNeverARegression) {
  synth g(3);
  const comparison c = compare_results(g.run(10e9, 3e-6, 10), g.run(8e9, 3.6e-6, 10), {});
  EXPECT_EQ(c.regressions, 0U);
  EXPECT_EQ(c.exit_code(), 4);
  for (const auto& k : c.cases) {
    for (const auto& m : k.metrics) {
      EXPECT_TRUE(m.inconclusive);
      EXPECT_NE(m.note.find("spread between runs is unknown"), std::string::npos) << m.note;
    }
  }
}

TEST(CompareProperties, TwentyFivePercentBandwidthDropIsCaughtAgainstFiveRuns) {
  synth g(7);
  int caught = 0;
  const int trials = 1000;
  for (int i = 0; i < trials; ++i) {
    const comparison c = compare_results(g.runs(5, 10e9, 3e-6), g.runs(1, 7.5e9, 3e-6), {});
    for (const auto& k : c.cases) {
      for (const auto& m : k.metrics) caught += m.metric == "bandwidth" && m.regression ? 1 : 0;
    }
  }
  std::printf("25%% drop: caught %d of %d (%.1f%%)\n", caught, trials, 100.0 * caught / trials);
  EXPECT_GE(caught, trials * 95 / 100);
}

// Two new runs: a regression must show in each. One run 25% off and one at the level is a fluke
// (this VM's runs switch modes now and then: TCP 1 MiB 6.3 -> 1.9 GB/s in one run of 17), not a
// regression; both 25% off is.
TEST(CompareProperties, OneRunsFlukeAmongTwoNewRunsIsNotARegression) {
  synth g(12);
  const result_set base = g.runs(8, 10e9, 3e-6, 0.01);
  result_set fluke = g.runs(1, 7.5e9, 3e-6, 0.01);
  fluke.add(g.runs(1, 10e9, 3e-6, 0.01));
  comparison c = compare_results(base, fluke, {});
  const metric_change& bw = c.cases.at(0).metrics.at(0);
  EXPECT_FALSE(bw.regression) << nlohmann::json(c).dump(1);
  EXPECT_TRUE(bw.inconclusive) << bw.note;
  result_set both = g.runs(1, 7.5e9, 3e-6, 0.01);
  both.add(g.runs(1, 7.5e9, 3e-6, 0.01));
  c = compare_results(base, both, {});
  EXPECT_TRUE(c.cases.at(0).metrics.at(0).regression) << nlohmann::json(c).dump(1);
  EXPECT_EQ(c.exit_code(), 3);
  // 8 baseline runs: the regression comes with the short baseline's caveat.
  EXPECT_NE(markdown(c).find("8 baseline run(s): a baseline of fewer than 10 runs"),
            std::string::npos)
      << markdown(c);
}

TEST(CompareProperties, ProvenanceChangeIsAlwaysAFinding) {
  synth g(99);
  for (int i = 0; i < 50; ++i) {
    // Faster, even: cma became tcp is still a finding.
    const comparison c =
        compare_results(g.run(10e9, 3e-6, 3, "cma"), g.run(11e9, 3e-6, 3, "tcp"), {});
    ASSERT_TRUE(c.has_finding());
    EXPECT_EQ(c.provenance_changes, 2U);
  }
}

TEST(Compare, MissingNewAndStatusChanges) {
  synth g(2);
  result_set base = g.run(10e9, 3e-6, 5);
  result_set next = g.run(10e9, 3e-6, 5);
  next.results[0].status = case_status::unreachable;  // bandwidth case now fails
  case_result extra = next.results[1];
  extra.test.size_bytes = 64;
  next.results.push_back(extra);
  base.results.push_back(extra);
  base.results.back().test.size_bytes = 4096;
  const comparison c = compare_results(base, next, {});
  EXPECT_EQ(c.status_changes, 1U);
  ASSERT_EQ(c.missing.size(), 1U);
  EXPECT_NE(c.missing[0].find("size=4K"), std::string::npos);
  ASSERT_EQ(c.added.size(), 1U);
  EXPECT_NE(c.added[0].find("size=64"), std::string::npos);
  const std::string md = markdown(c);
  EXPECT_NE(md.find("**status change**"), std::string::npos) << md;
  const nlohmann::json j = c;
  EXPECT_EQ(j["schema"], "pairperf.compare");
  EXPECT_EQ(j["status_changes"], 1);
}

class CompareFiles : public ::testing::Test {
 protected:
  std::filesystem::path dir;
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("pairperf-compare-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
           "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir / name;
    std::ofstream(p) << text;
    return p.string();
  }
  static std::string message_of(const std::string& path) {
    try {
      load_results(path);
    } catch (const compare_error& e) {
      return e.what();
    }
    return "(no error)";
  }
};

TEST_F(CompareFiles, MalformedAndForeignFilesGiveClearErrors) {
  EXPECT_NE(message_of(write("broken.json", "{\"schema\": ")).find("not JSON"), std::string::npos);
  EXPECT_NE(message_of(write("other.json", R"({"schema": "pairperf.doctor"})"))
                .find("schema 'pairperf.doctor' is not pairperf.result"),
            std::string::npos);
  EXPECT_NE(message_of(write("bench.json", R"({"benchmarks": []})")).find("schema '(none)'"),
            std::string::npos);
  EXPECT_NE(message_of(write("v2.json", R"({"schema": "pairperf.result", "schema_version": "2.0.0",
                                           "results": []})"))
                .find("schema version 2.0.0"),
            std::string::npos);
  EXPECT_NE(message_of(write("bad.json", R"({"schema": "pairperf.result", "schema_version": "1.0.0",
                                            "results": [{"status": "ok"}]})"))
                .find("malformed result"),
            std::string::npos);
  EXPECT_NE(message_of((dir / "nothing-here").string()).find("no such file"), std::string::npos);
  std::filesystem::create_directories(dir / "empty");
  EXPECT_NE(message_of((dir / "empty").string()).find("no .json"), std::string::npos);
}

// Found by the results-file fuzzer: a count too large for its integer (or fractional, or
// negative) reached nlohmann's cast, undefined behaviour; now the file is malformed by name.
TEST_F(CompareFiles, ACountOutOfItsRangeIsMalformedNotACast) {
  const std::string head =
      R"({"schema": "pairperf.result", "schema_version": "1.5.0", "results": [)";
  const std::string c = R"("case": {"index": 0, "transport": "tcp", "test": "tcp_bw",
      "pattern": "stream_uni", "tls": "", "iface": "lo", "memory": ["host", "host"],
      "size_bytes": 8}, "status": "ok", "elapsed_s": 1.0)";
  const std::vector<std::pair<std::string, std::string>> bad{
      {R"("iterations": 1e52)", "iterations must be a whole number"},
      {R"("iterations": 10.5)", "iterations must be a whole number"},
      {R"("warmup_iterations": -1)", "warmup_iterations must be a whole number"},
      {R"("window": 4294967296)", "window = 4294967296 is above its limit"},
      {R"("worker_case": 1.5)", "worker_case must be a whole number"},
      {R"("validation": {"messages_checked": 1e300, "corrupt_bytes": 0})",
       "messages_checked must be a whole number"},
      {R"("repetitions": [{"iterations": 100444444444444444444444444444, "elapsed_s": 0.2}])",
       "iterations must be a whole number"},
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const std::string text = head + "{" + c + ", " + bad[i].first + "}]}";
    const std::string got = message_of(write("count" + std::to_string(i) + ".json", text));
    EXPECT_NE(got.find("malformed result"), std::string::npos) << bad[i].first << ": " << got;
    EXPECT_NE(got.find(bad[i].second), std::string::npos) << bad[i].first << ": " << got;
  }
  const std::string good = head + "{" + c + R"(, "iterations": 1000, "window": 32}]})";
  EXPECT_EQ(load_results(write("good.json", good)).results.at(0).iterations, 1000U);
}

TEST_F(CompareFiles, AFolderIsOneRunAFile) {
  synth g(3);
  for (int i = 0; i < 5; ++i) {
    const result_set one = g.run(10e9, 3e-6, 3);
    const nlohmann::json doc{{"schema", "pairperf.result"},
                             {"schema_version", "1.0.0"},
                             {"context", nlohmann::json::object()},
                             {"results", one.results}};
    write("run" + std::to_string(i) + ".json", doc.dump());
  }
  const result_set s = load_results(dir.string());
  EXPECT_EQ(s.files.size(), 5U);
  EXPECT_EQ(s.run_of, (std::vector<std::size_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
  result_set two_new;
  two_new.add(load_results((dir / "run0.json").string()));
  two_new.add(load_results((dir / "run1.json").string()));
  const comparison c = compare_results(s, two_new, {});
  ASSERT_EQ(c.cases.size(), 2U);
  EXPECT_EQ(c.cases[0].metrics[0].base.size(), 5U);  // five files, one value each
  EXPECT_EQ(c.cases[0].metrics[0].next.size(), 2U);
  EXPECT_TRUE(c.cases[0].metrics[0].test.p_value.has_value());
  EXPECT_FALSE(c.has_finding());
}

TEST(Export, BencherAndGithubActionBenchmark) {
  synth g(4);
  const result_set s = g.run(10e9, 3e-6, 4);
  const nlohmann::json bmf = to_bencher(s);
  ASSERT_EQ(bmf.size(), 2U);
  const auto& lat = bmf.at(case_key(s.results[1].test));
  EXPECT_NEAR(lat.at("latency").at("value").get<double>(), s.results[1].latency_s->p50 * 1e9, 1e-6);
  EXPECT_TRUE(lat.at("latency").contains("lower_value"));
  EXPECT_TRUE(bmf.at(case_key(s.results[0].test)).contains("bandwidth-bytes-per-second"));
  const nlohmann::json bigger = to_gab_bigger_is_better(s);
  ASSERT_EQ(bigger.size(), 1U);
  EXPECT_EQ(bigger[0].at("unit"), "GB/s");
  EXPECT_NE(bigger[0].at("name").get<std::string>().find("bandwidth"), std::string::npos);
  const nlohmann::json smaller = to_gab_smaller_is_better(s);
  ASSERT_EQ(smaller.size(), 2U);  // p50 and p99
  EXPECT_EQ(smaller[0].at("unit"), "us");
}

// The minimum detectable change is what it says: a true change of that size is caught about 80%
// of the time (the power it is computed for) at alpha 0.05, and half of it mostly not.
TEST(Detectability, AChangeOfTheMdeIsCaughtAboutEightyPercentOfTheTime) {
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> noise(0.0, 0.05);
  const auto sample = [&](double scale, std::size_t n) {
    std::vector<double> v(n);
    for (auto& x : v) x = scale * noise(rng);
    return v;
  };
  // The MDE for exactly 5% spread, 8 baseline runs and 1 new run.
  const double factor =
      student_t_quantile_two_sided(0.05, 7) + student_t_quantile_two_sided(0.4, 7);
  const double mde = factor * 0.05 * std::sqrt(1.0 / 8 + 1.0);
  int caught = 0, caught_half = 0;
  const int trials = 4000;
  for (int i = 0; i < trials; ++i) {
    const auto base = sample(1.0, 8);
    caught += *test_runs(base, sample(std::exp(mde), 1), 0.05, 0.05).p_value < 0.05 ? 1 : 0;
    caught_half += *test_runs(base, sample(std::exp(mde / 2), 1), 0.05, 0.05).p_value < 0.05;
  }
  std::printf("change = MDE (%.1f%%): caught %.1f%%; half of it: %.1f%%\n", std::expm1(mde) * 100,
              100.0 * caught / trials, 100.0 * caught_half / trials);
  EXPECT_NEAR(static_cast<double>(caught) / trials, 0.80, 0.04);
  EXPECT_LT(static_cast<double>(caught_half) / trials, 0.40);
  const run_test t = test_runs(sample(1.0, 8), sample(1.0, 1), 0.05, 0.05);
  ASSERT_TRUE(t.mde && t.spread);
  EXPECT_NEAR(std::log1p(*t.mde) / *t.spread, factor * std::sqrt(1.0 / 8 + 1.0), 1e-9);
}

TEST(Detectability, RunsNeededAreWhatBringsTheMdeUnderTheThreshold) {
  const std::vector<double> one{1.0}, three{1.0, 1.1, 0.9};
  EXPECT_FALSE(test_runs(one, one, 0.05, 0.05).p_value.has_value());
  EXPECT_NE(runs_needed_note(test_runs(one, one, 0.05, 0.05), 0.05).find("1 baseline run"),
            std::string::npos);
  // Runs 1.5% apart: 3 baseline runs cannot show 5% with one new run; more can.
  const std::vector<double> tight{1.0, 1.015, 0.985};
  const run_test t = test_runs(tight, one, 0.05, 0.05);
  ASSERT_TRUE(t.mde.has_value());
  EXPECT_GT(*t.mde, 0.05);
  ASSERT_GT(t.base_runs_needed, 3U);
  std::vector<double> more(t.base_runs_needed);
  for (std::size_t i = 0; i < more.size(); ++i) more[i] = tight[i % 3];
  EXPECT_LE(*test_runs(more, one, 0.05, 0.05).mde, 0.05 * 1.05);  // the spread estimate moves
  // Runs 10% apart: no baseline is enough for one new run to show 5%.
  const run_test wide = test_runs(three, one, 0.05, 0.05);
  EXPECT_EQ(wide.base_runs_needed, 0U);
  EXPECT_NE(runs_needed_note(wide, 0.05).find("no baseline size lets one run show 5.0%"),
            std::string::npos);
}

// Runs spread 0.5-1.86 GB/s and a 45% drop: not "no change", inconclusive saying what it needs.
TEST(Compare, WideBaselineIsInconclusiveNotNoChange) {
  synth g(5);
  result_set base;
  for (const double v : {0.5e9, 1.86e9, 0.7e9, 1.5e9}) base.add(g.run(v, 3e-6, 3));
  const comparison c = compare_results(base, g.run(0.55e9, 3e-6, 3), {});
  const metric_change& bw = c.cases.at(0).metrics.at(0);
  ASSERT_EQ(bw.metric, "bandwidth");
  EXPECT_FALSE(bw.regression);
  EXPECT_TRUE(bw.inconclusive) << bw.note;
  EXPECT_NE(bw.note.find("runs vary ±"), std::string::npos) << bw.note;
  EXPECT_NE(bw.note.find("no baseline size lets one run show"), std::string::npos) << bw.note;
  EXPECT_EQ(c.exit_code(), 4);
}

TEST(Compare, NothingInCommonIsExitFourAndQuietRunsAreJudged) {
  synth g(6);
  result_set other = g.runs(1, 10e9, 3e-6);
  for (auto& r : other.results) r.test.size_bytes = 4096;
  comparison c = compare_results(g.runs(5, 10e9, 3e-6), other, {});
  EXPECT_TRUE(c.cases.empty());
  EXPECT_EQ(c.exit_code(), 4);
  EXPECT_NE(c.inconclusive_reason().find("no case in common"), std::string::npos);
  // Quiet runs (0.5% apart) and no change: judged, exit 0.
  c = compare_results(g.runs(6, 10e9, 3e-6, 0.005), g.runs(1, 10e9, 3e-6, 0.005),
                      compare_options{0.10, 0.5, 0.05});
  EXPECT_EQ(c.exit_code(), 0) << nlohmann::json(c).dump(1);
}

// A new run measured while the host took the CPU away is not "no change"; a noisy baseline run
// is left out of the baseline.
TEST(Compare, NoisyRunsAreLeftOutOrInconclusive) {
  synth quiet(8);
  const result_set base = quiet.runs(6, 10e9, 3e-6, 0.005);
  result_set next = quiet.runs(1, 10e9, 3e-6, 0.005);
  for (auto& r : next.results)
    r.host_noise = {{"noisy", true}, {"why", "the server was descheduled 45%"}};
  comparison c = compare_results(base, next, compare_options{0.10, 0.5, 0.05});
  EXPECT_EQ(c.exit_code(), 4);
  EXPECT_EQ(c.cases.at(0).noisy, "new: the server was descheduled 45%");
  EXPECT_NE(c.cases.at(0).metrics.at(0).note.find("noisy: new:"), std::string::npos);
  // A real drop on noisy data is still a regression.
  result_set dropped = quiet.runs(1, 5e9, 3e-6, 0.005);
  for (auto& r : dropped.results) r.host_noise = next.results[0].host_noise;
  c = compare_results(base, dropped, compare_options{0.10, 0.5, 0.05});
  EXPECT_EQ(c.regressions, 1U);
  EXPECT_EQ(c.exit_code(), 3);
  // A baseline run at half speed while its host was busy: left out, and counted.
  result_set with_busy = base;
  result_set busy = quiet.run(5e9, 3e-6, 5);
  for (auto& r : busy.results) r.host_noise = next.results[0].host_noise;
  with_busy.add(busy);
  c = compare_results(with_busy, quiet.runs(1, 10e9, 3e-6, 0.005),
                      compare_options{0.10, 0.5, 0.05});
  const metric_change& bw = c.cases.at(0).metrics.at(0);
  EXPECT_EQ(bw.base.size(), 6U);
  EXPECT_EQ(bw.base_noisy_runs, 1U);
  EXPECT_NE(bw.note.find("1 noisy baseline run(s) left out"), std::string::npos) << bw.note;
  EXPECT_EQ(c.exit_code(), 0) << nlohmann::json(c).dump(1);
}

// The same case in two inputs: one entry, the repetitions pooled, never the last file's value.
TEST(Export, SeveralFilesPoolACaseInsteadOfKeepingTheLast) {
  synth g(9);
  result_set a = g.run(10e9, 3e-6, 1);
  result_set b = g.run(20e9, 3e-6, 1);
  result_set both = a;
  both.results.insert(both.results.end(), b.results.begin(), b.results.end());
  const nlohmann::json bigger = to_gab_bigger_is_better(both);
  ASSERT_EQ(bigger.size(), 1U);
  const double va = *a.results[0].bandwidth_Bps->receiver_Bps;
  const double vb = *b.results[0].bandwidth_Bps->receiver_Bps;
  EXPECT_NEAR(bigger[0].at("value").get<double>(), (va + vb) / 2 * 1e-9, 1e-9);
  EXPECT_NE(bigger[0].at("extra").get<std::string>().find("pooled from 2 results"),
            std::string::npos);
  const nlohmann::json bmf = to_bencher(both);
  ASSERT_EQ(bmf.size(), 2U);
  const auto& bw = bmf.at(case_key(a.results[0].test)).at("bandwidth-bytes-per-second");
  EXPECT_DOUBLE_EQ(bw.at("lower_value").get<double>(), std::min(va, vb));
  EXPECT_DOUBLE_EQ(bw.at("upper_value").get<double>(), std::max(va, vb));
}

}  // namespace
}  // namespace pairperf
