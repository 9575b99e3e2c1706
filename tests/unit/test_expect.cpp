#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "harness/client.h"
#include "harness/expect.h"

namespace pairperf {
namespace {

case_result stream_result(std::uint64_t size, double receiver_Bps, std::vector<lane> lanes) {
  case_result r;
  r.test.transport = "ucx";
  r.test.test = "tag_bw";
  r.test.pattern = pattern_kind::stream_uni;
  r.test.size_bytes = size;
  r.iterations = 100;
  r.bandwidth_Bps = bandwidth{receiver_Bps, receiver_Bps};
  r.provenance = provenance{std::move(lanes), "tag rndv rts", {}, {}, {}, ""};
  return r;
}

TEST(Expect, ParsesTheForms) {
  auto e = parse_expectation("transport!=tcp");
  EXPECT_EQ(e.what, expectation::metric::transport);
  EXPECT_EQ(e.how, expectation::op::ne);
  EXPECT_EQ(e.name, "tcp");
  e = parse_expectation("bw>=8GB/s@1M");
  EXPECT_EQ(e.what, expectation::metric::bandwidth);
  EXPECT_EQ(e.how, expectation::op::ge);
  EXPECT_DOUBLE_EQ(e.value, 8e9);
  EXPECT_EQ(e.size, 1U << 20);
  e = parse_expectation("lat<=5us@8");
  EXPECT_DOUBLE_EQ(e.value, 5e-6);
  EXPECT_EQ(e.statistic, "p50");
  EXPECT_DOUBLE_EQ(parse_expectation("lat<=500ns").value, 5e-7);
  e = parse_expectation("lat.p99<20us");
  EXPECT_EQ(e.statistic, "p99");
  EXPECT_EQ(e.how, expectation::op::lt);
  EXPECT_FALSE(e.size.has_value());
  EXPECT_DOUBLE_EQ(parse_expectation("bw>=100Gb/s").value, 12.5e9);
  EXPECT_DOUBLE_EQ(parse_expectation("bw>1GiB/s").value, 1024.0 * 1024 * 1024);
}

TEST(Expect, RefusesWhatItCannotRead) {
  for (const char* bad : {"transport", "speed>=1GB/s", "bw>=fast", "bw>=8GB", "lat<=5",
                          "lat.p42<=1us", "transport>=tcp", "bw>=", "bw>=1GB/s@0", "=tcp"}) {
    EXPECT_THROW(parse_expectation(bad), usage_error) << bad;
  }
}

TEST(Expect, AppliesBySizeAndPattern) {
  test_case c;
  c.pattern = pattern_kind::pingpong;
  c.size_bytes = 8;
  EXPECT_TRUE(applies(parse_expectation("lat<=5us@8"), c));
  EXPECT_FALSE(applies(parse_expectation("lat<=5us@64"), c));
  EXPECT_FALSE(applies(parse_expectation("bw>=1GB/s"), c));
  EXPECT_TRUE(applies(parse_expectation("transport=cma"), c));
}

TEST(Expect, TransportIsCheckedAgainstTheLanesReallyUsed) {
  auto r = stream_result(1 << 20, 5e9, {{"tcp", "lo"}});
  apply_expectations({parse_expectation("transport!=tcp")}, r);
  EXPECT_EQ(r.status, case_status::fail);
  EXPECT_NE(r.message.find("tcp"), std::string::npos);
  EXPECT_FALSE(r.verdict.at("pass").get<bool>());
  EXPECT_EQ(r.verdict.at("checks")[0].at("seen"), "data lanes tcp/lo");

  auto shm = stream_result(1 << 20, 5e9, {{"sysv", "memory"}, {"cma", "memory"}});
  apply_expectations({parse_expectation("transport=cma"), parse_expectation("transport!=tcp")},
                     shm);
  EXPECT_EQ(shm.status, case_status::ok);
  EXPECT_TRUE(shm.verdict.at("pass").get<bool>());
  EXPECT_EQ(shm.verdict.at("checks").size(), 2U);
}

TEST(Expect, CudaIpcOnAHostToGpuRowCarriesNothing) {
  // The transport classified the lanes; carrying_lanes (gpus.h) drops GPU IPC by its kind.
  const std::vector<lane> lanes{{"cuda_ipc", "cuda", lane_kind::gpu_ipc},
                                {"sysv", "memory", lane_kind::shared_memory}};
  auto r = stream_result(1 << 20, 5e9, lanes);
  r.test.client_memory = memory_type::host;
  r.test.server_memory = memory_type::cuda;
  r.gpu_path = "host-GPU copy";
  r.gpu_path_why = "one side's buffer is in host memory";
  apply_expectations({parse_expectation("transport=cuda_ipc")}, r);
  EXPECT_EQ(r.status, case_status::fail);
  EXPECT_NE(r.verdict.at("checks")[0].at("why").get<std::string>().find("carries nothing here"),
            std::string::npos);
  // Between GPU buffers the same lane is the fast path.
  auto g = stream_result(1 << 20, 5e11, lanes);
  g.test.client_memory = g.test.server_memory = memory_type::cuda;
  g.gpu_path = "fast path";
  apply_expectations({parse_expectation("transport=cuda_ipc")}, g);
  EXPECT_EQ(g.status, case_status::ok);
}

TEST(Expect, BandwidthAndLatencyThresholds) {
  auto r = stream_result(1 << 20, 5e9, {{"tcp", "lo"}});
  apply_expectations({parse_expectation("bw>=8GB/s@1M"), parse_expectation("bw>=1GB/s@8")}, r);
  EXPECT_EQ(r.status, case_status::fail);
  EXPECT_EQ(r.verdict.at("checks").size(), 1U);  // the @8 check does not apply to 1M
  EXPECT_DOUBLE_EQ(r.verdict.at("checks")[0].at("seen_Bps").get<double>(), 5e9);

  case_result lat;
  lat.test.pattern = pattern_kind::pingpong;
  lat.test.size_bytes = 8;
  lat.latency_s = sample_stats{10, 1e-6, 2e-6, 2e-6, 3e-6, 9e-6, 1e-5, 1e-5, 1e-7};
  apply_expectations({parse_expectation("lat<=5us@8"), parse_expectation("lat.p99<=5us")}, lat);
  EXPECT_EQ(lat.status, case_status::fail);
  EXPECT_TRUE(lat.verdict.at("checks")[0].at("pass").get<bool>());
  EXPECT_FALSE(lat.verdict.at("checks")[1].at("pass").get<bool>());
}

TEST(Expect, OnlyOkResultsAreJudged) {
  auto r = stream_result(1 << 20, 5e9, {{"tcp", "lo"}});
  r.status = case_status::skipped;
  apply_expectations({parse_expectation("transport!=tcp")}, r);
  EXPECT_EQ(r.status, case_status::skipped);
  EXPECT_TRUE(r.verdict.is_null());
}

// A skipped case an expectation covers is not judged, and the run knows that expectation
// judged nothing (the cuda_ipc expectation on a host without a GPU that used to pass).
TEST(Expect, SkippedCasesAreNotJudged) {
  const std::vector<expectation> ex{parse_expectation("transport=cuda_ipc"),
                                    parse_expectation("bw>=1GB/s@1M")};
  expectation_tally tally(ex.size());
  case_result skipped = stream_result(1 << 20, 0, {});
  skipped.status = case_status::skipped;
  skipped.message = "cuda memory: no usable CUDA device";
  skipped.bandwidth_Bps.reset();
  skipped.test.index = 0;
  apply_expectations(ex, skipped, std::nullopt, &tally);
  EXPECT_EQ(skipped.status, case_status::skipped);
  EXPECT_TRUE(skipped.verdict.is_null());
  ASSERT_TRUE(skipped.unjudged.is_object());
  EXPECT_EQ(skipped.unjudged.at("expect").size(), 2U);
  EXPECT_NE(skipped.unjudged.at("why").get<std::string>().find("no usable CUDA device"),
            std::string::npos);
  case_result second = skipped;
  second.test.index = 1;
  apply_expectations(ex, second, std::nullopt, &tally);
  auto lines = tally.unjudged(ex);
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_NE(lines[0].find("--expect transport=cuda_ipc: judged no case: cases 1,2: skipped"),
            std::string::npos)
      << lines[0];
  // One judged case is enough for the bandwidth expectation; the transport one still judged none.
  case_result ran = stream_result(1 << 20, 5e9, {{"tcp", "lo"}});
  ran.test.index = 2;
  apply_expectations({ex[1]}, ran, std::nullopt, nullptr);
  expectation_tally t2(ex.size());
  apply_expectations(ex, ran, std::nullopt, &t2);
  EXPECT_EQ(t2.judged[1], 1U);
  EXPECT_EQ(t2.judged[0], 1U);  // judged (and missed: tcp is not cuda_ipc)
  EXPECT_EQ(ran.status, case_status::fail);
  EXPECT_TRUE(t2.unjudged(ex).empty());
}

// The exit-code contract of a run, one case per code.
TEST(Expect, RunOutcomeFollowsTheContract) {
  run_summary s;
  s.skipped = 3;
  EXPECT_EQ(s.outcome().status, exit_status::inconclusive);  // nothing measured
  s.ok = 1;
  EXPECT_EQ(s.outcome().status, exit_status::held);
  s.unjudged = {"--expect transport=cuda_ipc: judged no case"};
  EXPECT_EQ(s.outcome().status, exit_status::inconclusive);
  s.fail = 1;
  EXPECT_EQ(s.outcome().status, exit_status::missed);
  s.unreachable = 1;
  EXPECT_EQ(s.outcome().status, exit_status::failed);
  run_summary fatal;
  fatal.fatal = "control connect failed";
  const auto o = fatal.outcome();
  EXPECT_EQ(o.status, exit_status::failed);
  ASSERT_EQ(o.reasons.size(), 1U);  // not also "nothing was measured"
  const nlohmann::json j = to_json(fatal);
  EXPECT_EQ(j.at("exit_code"), 1);
  EXPECT_EQ(j.at("verdict"), "failed");
  EXPECT_EQ(worse(exit_status::inconclusive, exit_status::missed), exit_status::missed);
  EXPECT_EQ(worse(exit_status::held, exit_status::inconclusive), exit_status::inconclusive);
}

// A server busy past --wait-busy: nothing measured and nothing failed (4), said once.
TEST(Expect, ABusyServerIsInconclusiveNotAFailure) {
  run_summary busy;
  busy.planned = 3;
  busy.busy = "the server stayed busy for 2.00 min";
  const auto o = busy.outcome();
  EXPECT_EQ(o.status, exit_status::inconclusive);
  ASSERT_EQ(o.reasons.size(), 1U) << nlohmann::json(o.reasons).dump();
  EXPECT_EQ(o.reasons[0], busy.busy);
  EXPECT_EQ(busy.exit_code(), 4);
}

// The planned time a hello carries (the server's queue estimate): per case, the measured phases,
// half a phase of warm-up and pilot, 0.3 s of setup.
TEST(Expect, PlannedSecondsCountEveryCase) {
  client_options o;
  o.config.duration = std::chrono::milliseconds(200);
  o.cases.resize(3);
  EXPECT_NEAR(planned_seconds(o), 3 * (1.5 * 0.2 + 0.3), 1e-9);
  o.config.repeat = 5;
  EXPECT_NEAR(planned_seconds(o), 3 * (5.5 * 0.2 + 0.3), 1e-9);
  o.wait_busy = std::chrono::seconds(7);
  const hello_request h = hello_of(o);
  EXPECT_EQ(h.wait_busy, std::chrono::seconds(7));
  EXPECT_NEAR(h.budget_s, planned_seconds(o), 1e-9);
}

}  // namespace
}  // namespace pairperf
