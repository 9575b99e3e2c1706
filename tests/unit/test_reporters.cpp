#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
#include "harness/client_results.h"
#include "harness/console_reporter.h"
#include "harness/json_reporter.h"

namespace pairperf {
namespace {

case_result sample_result() {
  case_result r;
  r.test.index = 2;
  r.test.transport = "tcp";
  r.test.test = "tcp_lat";
  r.test.size_bytes = 4096;
  r.test.iface = "eth0";
  r.iterations = 10;
  r.latency_s = sample_stats{10, 1e-6, 2e-6, 2.5e-6, 3e-6, 9e-6, 1e-5, 1e-5, 1e-7};
  r.message_rate_per_s = 2.5e5;
  r.provenance =
      provenance{{lane{"tcp", "eth0", lane_kind::network}}, "tcp stream", {}, {}, {}, ""};
  return r;
}

TEST(ConsoleReporter, RowShowsSizeLatencyRateAndPath) {
  console_reporter c(stdout, rate_unit::gb);
  const std::string row = c.format_row(sample_result());
  EXPECT_NE(row.find("   3 "), std::string::npos) << row;  // 1-based index
  EXPECT_NE(row.find("4K"), std::string::npos) << row;
  EXPECT_NE(row.find("2.50 us"), std::string::npos) << row;
  EXPECT_NE(row.find("9.00 us"), std::string::npos) << row;
  EXPECT_NE(row.find("250.0 K/s"), std::string::npos) << row;
  EXPECT_NE(row.find("tcp/eth0"), std::string::npos) << row;
  EXPECT_NE(console_reporter::header().find("lat p99"), std::string::npos);
}

TEST(ProgressLine, ShowsPlaceElapsedAndTimeLeft) {
  const case_result r = sample_result();  // case index 2 (the third), 4K on eth0
  EXPECT_EQ(progress_text(r.test, 20, 75.4, 1234.0),
            "[3/20 10%] tcp tcp_lat 4K eth0  1:15 elapsed, ~20:34 left");
  EXPECT_EQ(progress_text(r.test, 20, 3725, 0),
            "[3/20 10%] tcp tcp_lat 4K eth0  1:02:05 elapsed, ~0:00 left");
  // No budget known: no estimate.
  EXPECT_EQ(progress_text(r.test, 20, 2, -1), "[3/20 10%] tcp tcp_lat 4K eth0  0:02 elapsed");
}

TEST(ProgressLine, TimeLeftIsTheBudgetsAtTheFinishedCasesPace) {
  // Nothing done: the budgets alone (10 cases of 0.5 s).
  EXPECT_DOUBLE_EQ(estimate_left_s(0, 10, 0.0, 0.5), 5.0);
  // 4 cases took 3 s against 2 s planned: the other 6 at 1.5x their budget.
  EXPECT_DOUBLE_EQ(estimate_left_s(4, 6, 3.0, 0.5), 4.5);
  // A first case that took 20x its budget (a slow set-up) counts at most 5x; skipped cases that
  // took nothing at least 0.2x.
  EXPECT_DOUBLE_EQ(estimate_left_s(1, 10, 10.0, 0.5), 25.0);
  EXPECT_DOUBLE_EQ(estimate_left_s(5, 10, 0.0, 0.5), 1.0);
  EXPECT_DOUBLE_EQ(estimate_left_s(3, 0, 1.0, 0.5), 0.0);
  EXPECT_LT(estimate_left_s(3, 5, 1.0, 0), 0);  // no budget, no estimate
}

// A validated stream of GPU buffers is measured with the checker's copies in it (3.1 GB/s for a
// 1076 GB/s cuda_ipc path on an H200): the row says so; host rows and unvalidated rows do not.
TEST(ConsoleReporter, ValidatedGpuBandwidthIsMarkedAsTheCheckers) {
  const auto printed = [](const case_result& r) {
    char* text = nullptr;
    std::size_t size = 0;
    std::FILE* f = open_memstream(&text, &size);
    console_reporter(f, rate_unit::gb).report_result(r);
    std::fclose(f);
    std::string out(text, size);
    std::free(text);  // NOLINT: open_memstream's buffer
    return out;
  };
  case_result r = sample_result();
  r.status = case_status::ok;
  r.bandwidth_Bps = bandwidth{3.1e9, 3.1e9};
  r.validated = validation{43, 0};
  EXPECT_EQ(printed(r).find("the checker's"), std::string::npos) << printed(r);
  r.test.client_memory = r.test.server_memory = memory_type::cuda;
  EXPECT_NE(printed(r).find("copied to host memory"), std::string::npos) << printed(r);
  r.validated.reset();
  EXPECT_EQ(printed(r).find("the checker's"), std::string::npos) << printed(r);
}

TEST(JsonReporter, WritesSchemaVersionContextAndResults) {
  const auto path = std::filesystem::temp_directory_path() / "pairperf_test_results.json";
  json_reporter j(path);
  j.report_context({{"tool", {{"name", "pairperf"}}}});
  j.report_result(sample_result());
  j.finalize();
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["schema"], "pairperf.result");
  EXPECT_EQ(doc["schema_version"], result_schema_version);
  EXPECT_EQ(doc["context"]["tool"]["name"], "pairperf");
  ASSERT_EQ(doc["results"].size(), 1U);
  EXPECT_DOUBLE_EQ(doc["results"][0]["latency_s"]["p50"].get<double>(), 2.5e-6);
  std::filesystem::remove(path);
}

// The per-case overhead reaches the results file's context at the end of the run, beside the
// context written at its start; each case carries its wall time.
TEST(JsonReporter, TheContextIsAmendedWithTheOverheadAtTheEnd) {
  const auto path = std::filesystem::temp_directory_path() / "pairperf_test_overhead.json";
  json_reporter j(path);
  j.report_context({{"tool", {{"name", "pairperf"}}}});
  overhead_meter m;
  m.setup_done(0.5);
  case_result a = sample_result();
  a.elapsed_s = 0.010;
  a.wall_s = 0.030;  // 20 ms of fixed cost
  case_result b = sample_result();
  b.elapsed_s = 0.100;
  b.wall_s = 0.140;  // 40 ms
  case_result c = sample_result();
  c.elapsed_s = 0.001;
  c.wall_s = 0.050;  // 49 ms
  case_result skipped = sample_result();
  skipped.status = case_status::skipped;
  skipped.wall_s = 0.002;  // measured nothing: not counted
  for (const case_result* r : {&a, &b, &c, &skipped}) {
    m.add(*r);
    j.report_result(*r);
  }
  j.amend_context("overhead", m.summary(1.0));
  j.finalize();
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  const auto& o = doc.at("context").at("overhead");
  EXPECT_EQ(doc["context"]["tool"]["name"], "pairperf");
  EXPECT_EQ(o.at("cases"), 3);
  EXPECT_NEAR(o.at("per_case_s").at("median").get<double>(), 0.040, 1e-9) << o.dump();
  EXPECT_NEAR(o.at("per_case_s").at("mean").get<double>(), 0.109 / 3, 1e-9) << o.dump();
  EXPECT_NEAR(o.at("per_case_s").at("min").get<double>(), 0.020, 1e-9);
  EXPECT_NEAR(o.at("per_case_s").at("max").get<double>(), 0.049, 1e-9);
  EXPECT_NEAR(o.at("measured_s").get<double>(), 0.111, 1e-9);
  EXPECT_NEAR(o.at("share_of_wall").get<double>(), 0.609, 1e-9);  // (0.109 + 0.5) / 1.0
  EXPECT_NEAR(doc.at("results")[0].at("wall_s").get<double>(), 0.030, 1e-12);
  EXPECT_EQ(doc.at("results")[3].at("wall_s").get<double>(), 0.002);
  std::filesystem::remove(path);
}

TEST(JsonlReporter, WritesALinePerResultAsItGoes) {
  const auto path = std::filesystem::temp_directory_path() / "pairperf_test_results.jsonl";
  jsonl_reporter j(path);
  j.report_context({{"argv", {"pairperf"}}});
  j.report_result(sample_result());
  // Readable before finalize: a run that dies keeps what it finished.
  std::ifstream in(path);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(nlohmann::json::parse(first)["schema"], "pairperf.result");
  EXPECT_EQ(nlohmann::json::parse(second)["case"]["test"], "tcp_lat");
  j.finalize();
  std::filesystem::remove(path);
}

TEST(JsonReporter, UnwritablePathIsAnErrorBeforeAnyCase) {
  // Checked when the reporter is made (before the sweep), not when it writes (after it).
  EXPECT_THROW(json_reporter("/proc/pairperf-cannot-write/results.json"), usage_error);
  EXPECT_THROW(json_reporter("/proc/pairperf-cannot-write/results.json", true), usage_error);
  EXPECT_THROW(json_reporter("/dev/null"), usage_error);  // never replaced by a regular file
}

}  // namespace
}  // namespace pairperf
