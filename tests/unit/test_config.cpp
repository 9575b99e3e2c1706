#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/errors.h"
#include "core/result.h"

namespace pairperf {
namespace {

TEST(Config, RunConfigRoundTrips) {
  run_config c;
  c.iterations = 1234;
  c.duration = std::chrono::milliseconds(750);
  c.min_iterations = 7;
  c.warmup = 3;
  c.window = 16;
  c.validate = true;
  c.transport.progress = progress_mode::block;
  c.transport.streams = 4;
  c.transport.send_buffer_bytes = 1 << 20;
  c.timeouts.per_case = std::chrono::seconds(9);
  const nlohmann::json j = c;
  const auto back = nlohmann::json::parse(j.dump()).get<run_config>();
  EXPECT_EQ(back.iterations, c.iterations);
  EXPECT_EQ(back.duration, c.duration);
  EXPECT_EQ(back.min_iterations, 7U);
  EXPECT_EQ(back.warmup, c.warmup);
  EXPECT_EQ(back.window, 16U);
  EXPECT_TRUE(back.validate);
  EXPECT_EQ(back.transport.progress, progress_mode::block);
  EXPECT_EQ(back.transport.streams, 4U);
  EXPECT_EQ(back.transport.send_buffer_bytes, 1U << 20);
  EXPECT_EQ(back.timeouts.per_case, std::chrono::seconds(9));
  EXPECT_EQ(j.at("timeouts_s").at("case").get<double>(), 9.0);
}

TEST(Config, UnsetOptionalsStayUnset) {
  const nlohmann::json j = run_config{};
  EXPECT_TRUE(j.at("iterations").is_null());
  const auto back = j.get<run_config>();
  EXPECT_FALSE(back.iterations.has_value());
  EXPECT_FALSE(back.warmup.has_value());
}

TEST(Config, CaseRoundTrips) {
  test_case c;
  c.index = 3;
  c.transport = "tcp";
  c.test = "tcp_bibw";
  c.pattern = pattern_kind::stream_bi;
  c.iface = "eth0";
  c.server_memory = memory_type::cuda;
  c.size_bytes = 65536;
  const nlohmann::json j = c;
  EXPECT_EQ(j.at("memory"), nlohmann::json({"host", "cuda"}));
  const auto back = j.get<test_case>();
  EXPECT_EQ(back.index, 3U);
  EXPECT_EQ(back.test, "tcp_bibw");
  EXPECT_EQ(back.pattern, pattern_kind::stream_bi);
  EXPECT_EQ(back.iface, "eth0");
  EXPECT_EQ(back.server_memory, memory_type::cuda);
  EXPECT_EQ(back.size_bytes, 65536U);
}

TEST(Config, RefusesBadCases) {
  nlohmann::json j = test_case{};
  j["pattern"] = "zigzag";
  EXPECT_THROW(j.get<test_case>(), usage_error);
  j = test_case{};
  j["memory"] = {"host"};
  EXPECT_THROW(j.get<test_case>(), usage_error);
  j = test_case{};
  j.erase("size_bytes");
  EXPECT_THROW(j.get<test_case>(), nlohmann::json::exception);
}

TEST(Config, WarmupScalesWithWindowAndBytes) {
  run_config c;
  test_case t;
  t.size_bytes = 8;
  EXPECT_EQ(warmup_iterations(c, t), 64U);  // two windows of 32
  t.size_bytes = 64ULL << 20;
  EXPECT_EQ(warmup_iterations(c, t), 4U);  // 256 MiB cap
  c.warmup = 5;
  EXPECT_EQ(warmup_iterations(c, t), 5U);
}

TEST(Result, RoundTripsWithUnitsInNames) {
  case_result r;
  r.test.transport = "tcp";
  r.test.test = "tcp_bw";
  r.test.pattern = pattern_kind::stream_uni;
  r.test.size_bytes = 1024;
  r.iterations = 100;
  r.elapsed_s = 0.5;
  r.bandwidth_Bps = bandwidth{2e9, 1.9e9};
  r.message_rate_per_s = 1e6;
  r.validated = validation{100, 0};
  r.provenance = provenance{{lane{"tcp", "lo", lane_kind::network}},
                            "tcp stream",
                            {{"local", "a"}},
                            {{"local", "b"}},
                            {},
                            ""};
  const nlohmann::json j = r;
  EXPECT_EQ(j.at("bandwidth_Bps").at("receiver").get<double>(), 2e9);
  EXPECT_EQ(j.at("provenance").at("lanes")[0].at("device"), "lo");
  EXPECT_FALSE(j.contains("latency_s"));
  const auto back = j.get<case_result>();
  EXPECT_EQ(back.status, case_status::ok);
  EXPECT_DOUBLE_EQ(*back.bandwidth_Bps->sender_Bps, 1.9e9);
  EXPECT_EQ(back.provenance->lanes[0].transport, "tcp");
  EXPECT_EQ(back.validated->messages_checked, 100U);
}

TEST(Config, EachTransportsOwnOptionsTravelAsItsObject) {
  run_config c;
  c.transport.own = {{"verbs", {{"qps", 2}}}, {"ucx", {{"options", {"RNDV_THRESH=1K"}}}}};
  const nlohmann::json j = c;
  EXPECT_EQ(j.at("transports").at("verbs").at("qps"), 2);
  const auto back = j.get<run_config>();
  EXPECT_EQ(own_options(back.transport, "verbs").at("qps"), 2);
  EXPECT_TRUE(own_options(back.transport, "tcp").empty());  // none: the transport's defaults
  nlohmann::json bad = j;
  bad["transports"]["verbs"] = 7;
  EXPECT_THROW(bad.get<run_config>(), usage_error);
  bad["transports"] = {1, 2};
  EXPECT_THROW(bad.get<run_config>(), usage_error);
}

TEST(Result, LaneKindsBulkAndStagingRoundTrip) {
  case_result r;
  r.test.size_bytes = 1 << 20;
  r.provenance =
      provenance{{{"sysv", "memory", lane_kind::shared_memory}, {"tcp", "lo", lane_kind::network}},
                 "tag rndv rts",
                 {},
                 {},
                 {{"tcp", "lo", lane_kind::network}},
                 "copy-in copy-out"};
  const nlohmann::json j = r;
  EXPECT_EQ(j.at("provenance").at("lanes")[0].at("kind"), "shared_memory");
  EXPECT_EQ(j.at("provenance").at("bulk_lanes")[0].at("kind"), "network");
  const auto back = j.get<case_result>();
  EXPECT_EQ(back.provenance->lanes[1].kind, lane_kind::network);
  EXPECT_EQ(payload_lanes(*back.provenance).size(), 1U);
  EXPECT_EQ(back.provenance->staged, "copy-in copy-out");
  // A file from before kinds, or from a newer pairperf with a kind this one does not know.
  nlohmann::json old = j;
  old["provenance"]["lanes"][0].erase("kind");
  old["provenance"]["lanes"][1]["kind"] = "photonic";
  old["provenance"].erase("bulk_lanes");
  const auto older = old.get<case_result>();
  EXPECT_EQ(older.provenance->lanes[0].kind, lane_kind::unknown);
  EXPECT_EQ(older.provenance->lanes[1].kind, lane_kind::unknown);
  EXPECT_EQ(payload_lanes(*older.provenance).size(), 2U);  // no bulk: every lane carried it
}

TEST(Result, ThePeersEvidenceAddsStagingAndGpuIpcOnly) {
  provenance mine{{{"tcp", "eth0", lane_kind::network}}, "rndv", {}, {}, {}, ""};
  add_peer_evidence(mine, {{"staged", "software emulation"},
                           {"bulk_lanes",
                            {{{"transport", "cuda_ipc"}, {"device", "cuda0"}, {"kind", "gpu_ipc"}},
                             {{"transport", "tcp"}, {"device", "eth1"}, {"kind", "network"}},
                             "not a lane",
                             {{"transport", 7}}}}});
  EXPECT_EQ(mine.staged, "software emulation");
  ASSERT_EQ(mine.bulk.size(), 1U);
  EXPECT_EQ(mine.bulk[0].kind, lane_kind::gpu_ipc);
  // This side's own staging wins; evidence that is not an object changes nothing.
  mine.staged = "rendezvous pipeline cuda_copy";
  add_peer_evidence(mine, {{"staged", "software emulation"}});
  add_peer_evidence(mine, "junk");
  EXPECT_EQ(mine.staged, "rendezvous pipeline cuda_copy");
  EXPECT_EQ(path_evidence(mine).at("bulk_lanes").size(), 1U);
}

TEST(Result, SkippedCarriesOnlyTheReason) {
  case_result r;
  r.test.size_bytes = 8;
  r.status = case_status::skipped;
  r.message = "cuda memory: built without CUDA";
  const nlohmann::json j = r;
  EXPECT_EQ(j.at("status"), "skipped");
  EXPECT_FALSE(j.contains("iterations"));
  EXPECT_EQ(j.get<case_result>().message, r.message);
  EXPECT_THROW(parse_case_status("meh"), usage_error);
}

TEST(Config, PeerNumbersAreCheckedBeforeTheyAreConverted) {
  // A control message is untrusted: what nlohmann's get<> would wrap, truncate or cast out of
  // range is refused, naming the field.
  nlohmann::json c = test_case{};
  c["size_bytes"] = 0;
  EXPECT_THROW(c.get<test_case>(), usage_error);
  for (const auto& bad :
       std::vector<nlohmann::json>{nlohmann::json(-1), nlohmann::json(1.5e300), nlohmann::json(2.5),
                                   nlohmann::json::parse("18446744073709551616"),
                                   nlohmann::json(std::uint64_t{1} << 31), nlohmann::json("8")}) {
    c["size_bytes"] = bad;
    EXPECT_THROW(c.get<test_case>(), usage_error) << bad.dump();
  }
  nlohmann::json cfg = run_config{};
  for (const auto& bad : std::vector<nlohmann::json>{nlohmann::json(1e300), nlohmann::json(-1.0),
                                                     nlohmann::json("3")}) {
    cfg["timeouts_s"]["connect"] = bad;
    EXPECT_THROW(cfg.get<run_config>(), usage_error) << bad.dump();
  }
  cfg = run_config{};
  cfg["max_iterations"] = -5;
  EXPECT_THROW(cfg.get<run_config>(), usage_error);
  cfg["max_iterations"] = 1000;
  EXPECT_EQ(cfg.get<run_config>().max_iterations, 1000U);
}

}  // namespace
}  // namespace pairperf
