#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "harness/server_limits.h"
#include "harness/token.h"

namespace pairperf {
namespace {

test_case bw(std::uint64_t size) {
  test_case c;
  c.pattern = pattern_kind::stream_uni;
  c.size_bytes = size;
  return c;
}

TEST(ServerLimits, MemoryCountsBuffersAndSamplesAndValidationSlots) {
  run_config cfg;
  EXPECT_EQ(case_memory(cfg, bw(1 << 20), 1000), 2U * (1 << 20) + 8000U);
  cfg.validate = true;
  cfg.window = 32;
  EXPECT_EQ(case_memory(cfg, bw(1 << 20), 0), 2U * 32 * (1 << 20));      // a slot per message
  EXPECT_EQ(case_memory(cfg, bw(std::uint64_t{1} << 30), 0), 2U << 30);  // at least one
}

TEST(ServerLimits, RefusalsNameTheLimit) {
  server_limits l;
  l.max_case_memory = 256 << 20;
  l.max_iterations = 1'000'000;
  run_config cfg;
  EXPECT_FALSE(refuse_case(cfg, bw(64 << 10), 1000, l));
  const auto big = refuse_case(cfg, bw(std::uint64_t{1} << 30), 0, l);
  ASSERT_TRUE(big);
  EXPECT_NE(big->find("--max-case-memory 256M"), std::string::npos) << *big;
  const auto many = refuse_case(cfg, bw(8), std::uint64_t{1} << 40, l);
  ASSERT_TRUE(many);
  EXPECT_NE(many->find("--max-iterations 1000000"), std::string::npos) << *many;
  EXPECT_TRUE(refuse_case(cfg, bw(0), 1, l));
}

TEST(ServerLimits, ClientTimeoutsAreCappedByTheServers) {
  run_config cfg;
  cfg.timeouts.connect = std::chrono::hours(24);
  cfg.timeouts.per_case = std::chrono::hours(24);
  cfg.timeouts.handshake = std::chrono::hours(24);
  server_limits l;
  const run_config c = capped(cfg, l, std::chrono::seconds(5));
  EXPECT_EQ(c.timeouts.connect, l.max_connect);
  EXPECT_EQ(c.timeouts.per_case, l.max_case);
  EXPECT_EQ(c.timeouts.handshake, std::chrono::seconds(5));
  cfg.timeouts.connect = std::chrono::seconds(1);  // a shorter one stays
  EXPECT_EQ(capped(cfg, l, std::chrono::seconds(5)).timeouts.connect, std::chrono::seconds(1));
}

TEST(ServerLimits, APhaseBudgetIsPositiveFiniteSeconds) {
  EXPECT_EQ(parse_phase_budget(nlohmann::json(0.25)), std::chrono::milliseconds(250));
  EXPECT_EQ(parse_phase_budget(nlohmann::json(2)), std::chrono::seconds(2));
  for (const auto* bad : {"0", "-1", "1e300", "\"1s\"", "null", "[1]", "true"}) {
    EXPECT_THROW(parse_phase_budget(nlohmann::json::parse(bad)), std::invalid_argument) << bad;
  }
}

TEST(DriveAllowlist, CidrsAddressesAndAnything) {
  const drive_allowlist l("10.0.0.0/8,192.168.1.7,fd00::/8");
  EXPECT_TRUE(l.allows("10.200.3.4"));
  EXPECT_TRUE(l.allows("192.168.1.7"));
  EXPECT_TRUE(l.allows("fd00::1"));
  EXPECT_FALSE(l.allows("127.0.0.1"));
  EXPECT_FALSE(l.allows("192.168.1.8"));
  EXPECT_TRUE(drive_allowlist("*").allows("8.8.8.8"));
  EXPECT_TRUE(drive_allowlist().empty());
  EXPECT_THROW(drive_allowlist("10.0.0.0/8,,"), usage_error);
  EXPECT_THROW(drive_allowlist("10.0.0.0/abc"), usage_error);
  EXPECT_THROW(drive_allowlist("10.0.0.0/999"), usage_error);
}

TEST(Token, MatchesOnlyTheSameStringAndStaysOutOfArgv) {
  EXPECT_TRUE(token_matches("", nlohmann::json(nullptr)));
  EXPECT_TRUE(token_matches("s3cret", "s3cret"));
  EXPECT_FALSE(token_matches("s3cret", "s3cre"));
  EXPECT_FALSE(token_matches("s3cret", "s3cret!"));
  EXPECT_FALSE(token_matches("s3cret", ""));
  EXPECT_FALSE(token_matches("s3cret", 42));
  EXPECT_EQ(redact_argv({"pairperf", "run", "--token", "x", "--token-file=/k", "h"}),
            (std::vector<std::string>{"pairperf", "run", "--token", "(redacted)",
                                      "--token-file=(redacted)", "h"}));
}

// A hello's optional fields: defaults where absent or malformed, bounds where present.
TEST(ServerLimits, HelloExtrasAreBounded) {
  const auto extras = [](const char* text) {
    return read_hello_extras(nlohmann::json::parse(text));
  };
  auto x = extras(R"({"type": "hello"})");
  EXPECT_FALSE(x.ticket);
  EXPECT_EQ(x.budget_s, 0);
  EXPECT_EQ(x.nccl_budget.count(), 0);  // not asked: a plain run's hello
  x = extras(R"({"ticket": 7, "budget_s": 1e9, "want": ["nccl"], "nccl_budget_s": 5})");
  ASSERT_TRUE(x.ticket);
  EXPECT_EQ(*x.ticket, 7U);
  EXPECT_EQ(x.budget_s, 86400.0);
  EXPECT_EQ(x.nccl_budget.count(), 5000);
  EXPECT_EQ(extras(R"({"want": ["nccl"]})").nccl_budget.count(), 3000);
  EXPECT_EQ(extras(R"({"want": ["nccl"], "nccl_budget_s": 1e6})").nccl_budget.count(), 30000);
  EXPECT_EQ(extras(R"({"want": "nccl", "ticket": -1})").nccl_budget.count(), 0);
  EXPECT_FALSE(extras(R"({"ticket": -1})").ticket);
}

}  // namespace
}  // namespace pairperf
