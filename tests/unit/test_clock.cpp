#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/clock.h"

namespace pairperf {
namespace {

TEST(Clock, ParsesTheVariable) {
  EXPECT_EQ(parse_clock_choice(""), clock_choice::automatic);
  EXPECT_EQ(parse_clock_choice("auto"), clock_choice::automatic);
  EXPECT_EQ(parse_clock_choice("tsc"), clock_choice::tsc);
  EXPECT_EQ(parse_clock_choice("monotonic"), clock_choice::monotonic);
  EXPECT_FALSE(parse_clock_choice("TSC"));
  EXPECT_FALSE(parse_clock_choice("rdtsc"));
}

TEST(Clock, TheTscRuleNamesWhatIsMissing) {
  tsc_facts good{true, true, true, true};
  EXPECT_EQ(tsc_unusable_reason(good), "");
  tsc_facts f = good;
  f.x86_64 = false;
  EXPECT_EQ(tsc_unusable_reason(f), "not an x86-64 CPU");
  f = good;
  f.constant_tsc = false;
  EXPECT_NE(tsc_unusable_reason(f).find("lack constant_tsc"), std::string::npos)
      << tsc_unusable_reason(f);
  f.nonstop_tsc = false;
  EXPECT_NE(tsc_unusable_reason(f).find("constant_tsc and nonstop_tsc"), std::string::npos)
      << tsc_unusable_reason(f);
  f = good;
  f.kernel_lists_tsc = false;
  EXPECT_NE(tsc_unusable_reason(f).find("clock sources"), std::string::npos);
}

// What read_tsc_facts sees must be what /proc/cpuinfo says (a flag that is a prefix of another,
// such as "tsc" of "constant_tsc", must not count).
TEST(Clock, ReadsTheFlagsOfThisHost) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  const tsc_facts f = read_tsc_facts();
  EXPECT_EQ(f.constant_tsc, flags.find(" constant_tsc ") != std::string::npos) << flags;
  EXPECT_EQ(f.nonstop_tsc, flags.find(" nonstop_tsc ") != std::string::npos) << flags;
}

// The loops' clock, whichever source it chose, keeps time with CLOCK_MONOTONIC: over 50 ms the
// two agree within 0.2% (a miscalibrated counter, or a wrong fixed-point conversion, is off by
// far more).
TEST(Clock, AgreesWithTheMonotonicClock) {
  setup_loop_clock();
  const nlohmann::json ctx = loop_clock_context();
  const tsc_facts f = read_tsc_facts();
  if (tsc_unusable_reason(f).empty() && std::getenv("PAIRPERF_CLOCK") == nullptr) {
    EXPECT_EQ(ctx.at("source"), "tsc") << ctx.dump();
    EXPECT_GT(ctx.at("tsc_hz").get<double>(), 1e8) << ctx.dump();
  } else {
    EXPECT_EQ(ctx.at("source"), "monotonic") << ctx.dump();
    EXPECT_FALSE(ctx.at("why_not_tsc").get<std::string>().empty()) << ctx.dump();
  }
  EXPECT_GT(ctx.at("read_ns").get<double>(), 0.0);
  for (int attempt = 0; attempt < 5; ++attempt) {
    const std::int64_t m0 = clock_detail::monotonic_ns();
    const std::int64_t l0 = loop_now_ns();
    while (clock_detail::monotonic_ns() - m0 < 50'000'000) {
    }
    const std::int64_t l1 = loop_now_ns();
    const std::int64_t m1 = clock_detail::monotonic_ns();
    const double ratio = static_cast<double>(l1 - l0) / static_cast<double>(m1 - m0);
    // A preemption between the paired reads skews one attempt; a wrong clock skews all.
    if (ratio > 0.998 && ratio < 1.002) return;
    if (attempt == 4)
      FAIL() << "loop clock / CLOCK_MONOTONIC over 50 ms: " << ratio << " " << ctx.dump();
  }
}

TEST(Clock, NeverGoesBackwards) {
  setup_loop_clock();
  std::int64_t last = loop_now_ns();
  for (int i = 0; i < 100000; ++i) {
    const std::int64_t now = loop_now_ns();
    ASSERT_GE(now, last) << "at read " << i;
    last = now;
  }
}

}  // namespace
}  // namespace pairperf
