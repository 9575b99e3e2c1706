#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>

#include "core/errors.h"
#include "core/output.h"
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

// A folder of its own, removed with what is left in it.
struct scratch {
  std::filesystem::path dir;
  scratch() {
    std::string name = (std::filesystem::temp_directory_path() / "pairperf-out-XXXXXX").string();
    dir = ::mkdtemp(name.data());
  }
  ~scratch() { std::filesystem::remove_all(dir); }
  [[nodiscard]] std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `body` in a child whose files may grow to `limit` bytes (RLIMIT_FSIZE: writes past it
// fail with EFBIG, as on a full disk, without needing root to mount a small one). The child's
// exit status: 0 when every expectation held (the child reports the first that did not).
int with_file_size_limit(rlim_t limit, const std::function<std::string()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    const std::string failed = body();
    if (!failed.empty()) std::fprintf(stderr, "%s\n", failed.c_str());
    ::_exit(failed.empty() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(ReservedOutput, NoRoomIsAnErrorBeforeAnyWorkAndLeavesNothing) {
  const scratch s;
  const auto path = (s.dir / "r.json").string();
  EXPECT_EQ(with_file_size_limit(64 * 1024,
                                 [&]() -> std::string {
                                   try {
                                     reserved_output out(path, 1024 * 1024);
                                   } catch (const usage_error& e) {
                                     const std::string what = e.what();
                                     if (what.find("cannot write " + path) == std::string::npos)
                                       return "the error does not name the path: " + what;
                                     return "";
                                   }
                                   return "a reservation past the limit was taken";
                                 }),
            0);
  EXPECT_EQ(s.names(), std::vector<std::string>{});
}

TEST(ReservedOutput, AFailedCommitKeepsThePreviousFileAndLeavesNoOther) {
  const scratch s;
  const auto path = (s.dir / "r.json").string();
  std::ofstream(path) << "previous\n";
  EXPECT_EQ(with_file_size_limit(16 * 1024,
                                 [&]() -> std::string {
                                   reserved_output out(path, 1024);
                                   try {
                                     out.commit(std::string(64 * 1024, 'x'));  // past the limit
                                   } catch (const std::runtime_error& e) {
                                     return std::string(e.what()).find(path) == std::string::npos
                                                ? std::string("the error does not name the path")
                                                : std::string();
                                   }
                                   return "a write past the limit succeeded";
                                 }),
            0);
  EXPECT_EQ(read_text(path), "previous\n");
  EXPECT_EQ(s.names(), std::vector<std::string>{"r.json"});
}

TEST(ReservedOutput, ACommitReplacesThePreviousFileWholeAndAnUncommittedOneLeavesNothing) {
  const scratch s;
  const auto path = (s.dir / "r.json").string();
  std::ofstream(path) << "previous\n";
  { reserved_output abandoned(path, 4096); }  // a run that ended before writing
  EXPECT_EQ(read_text(path), "previous\n");
  EXPECT_EQ(s.names(), std::vector<std::string>{"r.json"});
  reserved_output out(path, 1 << 20);
  out.commit("new\n");
  EXPECT_EQ(read_text(path), "new\n");
  EXPECT_EQ(std::filesystem::file_size(path), 4U);  // the reservation trimmed
  EXPECT_EQ(s.names(), std::vector<std::string>{"r.json"});
}

// A reporter that fails on its second result, as a stream on a disk that filled would.
class failing_reporter final : public reporter {
 public:
  void report_context(const nlohmann::json& /*context*/) override {}
  void report_result(const case_result& /*result*/) override {
    if (++m_results == 2) throw std::runtime_error("cannot write s.jsonl: No space left on device");
  }
  void finalize() override { throw std::logic_error("finalize called on a dropped reporter"); }

 private:
  int m_results = 0;
};

class counting_reporter final : public reporter {
 public:
  explicit counting_reporter(int& results, bool& finalized)
      : m_results(results), m_finalized(finalized) {}
  void report_context(const nlohmann::json& /*context*/) override {}
  void report_result(const case_result& /*result*/) override { ++m_results; }
  void finalize() override { m_finalized = true; }

 private:
  int& m_results;
  bool& m_finalized;
};

TEST(MultiReporter, AnOutputThatFailsIsDroppedWithItsReasonAndTheOthersGetEveryCase) {
  int results = 0;
  bool finalized = false;
  multi_reporter out;
  out.add(std::make_unique<failing_reporter>());
  out.add(std::make_unique<counting_reporter>(results, finalized));
  out.report_context(nlohmann::json::object());
  for (int i = 0; i < 5; ++i) out.report_result(sample_result());
  EXPECT_NO_THROW(out.finalize());
  EXPECT_EQ(results, 5);
  EXPECT_TRUE(finalized);
  EXPECT_EQ(out.failures(),
            std::vector<std::string>{"cannot write s.jsonl: No space left on device"});
}

TEST(JsonlReporter, AStreamThatCannotGrowEndsAtItsLastWholeLine) {
  const scratch s;
  const auto path = (s.dir / "r.jsonl").string();
  EXPECT_EQ(
      with_file_size_limit(6 * 1024,
                           [&]() -> std::string {
                             jsonl_reporter j(path);
                             j.report_context({{"argv", {"pairperf"}}});
                             try {
                               for (int i = 0; i < 100; ++i) j.report_result(sample_result());
                             } catch (const std::runtime_error& e) {
                               return std::string(e.what()).find("each whole") == std::string::npos
                                          ? std::string("no word on the lines kept: ") + e.what()
                                          : std::string();
                             }
                             return "100 results fit in 6 KiB";
                           }),
      0);
  const std::string text = read_text(path);
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n)
    EXPECT_NO_THROW((void)nlohmann::json::parse(line));
  EXPECT_GE(n, 2);
}

}  // namespace
}  // namespace pairperf
