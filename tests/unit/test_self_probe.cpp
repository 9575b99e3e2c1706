#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/self_probe.h"

namespace pairperf {
namespace {

// This test binary answers its own probes, before main, as UCX's and libfabric's do.
[[gnu::constructor]] void answer_test_probes() {
  if (is_self_probe_child("PAIRPERF_TEST_PROBE_OK")) answer_self_probe("{\"answer\": 42}");
  if (is_self_probe_child("PAIRPERF_TEST_PROBE_FAIL")) {
    std::fputs("the library said why\n", stderr);
    std::fflush(stderr);
    ::_exit(3);
  }
  if (is_self_probe_child("PAIRPERF_TEST_PROBE_SLOW")) {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    ::_exit(0);
  }
}

TEST(SelfProbe, TheChildAnswersOnStdout) {
  const auto a = ask_self_probe({"PAIRPERF_TEST_PROBE_OK", "pairperf-test-probe", "the test's probe"},
                                std::chrono::seconds(30));
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.text, "{\"answer\": 42}");
}

// A child that fails says how it ended and what it printed: the next such failure is explained.
TEST(SelfProbe, AFailedChildIsReportedWithItsExitAndLastWords) {
  const auto a = ask_self_probe(
      {"PAIRPERF_TEST_PROBE_FAIL", "pairperf-test-probe", "the test's probe"}, std::chrono::seconds(30));
  EXPECT_EQ(a.text, "");
  EXPECT_NE(a.error.find("the test's probe failed (its process ended abnormally: exit 3)"),
            std::string::npos)
      << a.error;
  EXPECT_NE(a.error.find("the library said why"), std::string::npos) << a.error;
}

TEST(SelfProbe, AChildPastItsBoundIsKilled) {
  const auto start = std::chrono::steady_clock::now();
  const auto a = ask_self_probe(
      {"PAIRPERF_TEST_PROBE_SLOW", "pairperf-test-probe", "the test's probe"}, std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(a.error.find("the test's probe did not finish within"), std::string::npos) << a.error;
}

}  // namespace
}  // namespace pairperf
