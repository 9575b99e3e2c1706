#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/errors.h"
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
