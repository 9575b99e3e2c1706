// Two processes' host facts -> one host or two, shared namespaces, the expected path, and the
// verdict on what UCX really used.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/context.h"
#include "harness/expect.h"
#include "host/gpus.h"
#include "host/pair.h"

namespace pairperf {
namespace {

nlohmann::json host(const std::string& boot, const std::string& ipc, const std::string& pid,
                    const std::string& shm_inode = "1") {
  return {{"hostname", "h"},
          {"process",
           {{"pid", 1},
            {"boot_id", boot},
            {"namespaces", {{"ipc", ipc}, {"pid", pid}, {"net", "net:[1]"}}},
            {"dev_shm",
             {{"device", "0:25"}, {"inode", std::stoull(shm_inode)}, {"size_bytes", 1 << 30}}}}}};
}

constexpr auto shm = lane_kind::shared_memory;
constexpr auto net = lane_kind::network;

// `bulk`: the lanes the transport says carried the payload (empty: all of them).
case_result measured(std::vector<lane> lanes, const std::string& protocol,
                     std::vector<lane> bulk = {}) {
  case_result r;
  r.test.transport = "ucx";
  r.test.test = "tag_bw";
  r.test.pattern = pattern_kind::stream_uni;
  r.test.size_bytes = 1 << 20;
  r.bandwidth_Bps = bandwidth{4e9, 4e9};
  r.provenance = provenance{std::move(lanes), protocol, {}, {}, std::move(bulk), ""};
  return r;
}

TEST(Pair, ThisProcessAgainstItselfSharesEverything) {
  const nlohmann::json me = host_context();
  const pair_facts f = compare_hosts(me, me);
  EXPECT_TRUE(f.known);
  EXPECT_TRUE(f.same_host && f.same_ipc && f.same_pid && f.same_net && f.same_shm);
  EXPECT_FALSE(shared_memory_blocked(f).has_value());
  EXPECT_EQ(expect_host_path(f).kind, "shared memory");
}

TEST(Pair, DifferentBootIdsAreTwoHosts) {
  const pair_facts f =
      compare_hosts(host("a", "ipc:[1]", "pid:[1]"), host("b", "ipc:[1]", "pid:[1]"));
  EXPECT_TRUE(f.known);
  EXPECT_FALSE(f.same_host);
  EXPECT_FALSE(f.same_ipc);  // namespace ids mean nothing across hosts
  EXPECT_EQ(expect_host_path(f).kind, "network");
  EXPECT_FALSE(shared_memory_blocked(f).has_value());
  EXPECT_EQ(judge_host_path(f, measured({{"tcp", "eth0"}}, "tag rndv rts")).verdict, "network");
}

TEST(Pair, OlderPeerWithoutFactsIsUnknown) {
  const pair_facts f = compare_hosts(host("a", "x", "y"), nlohmann::json{{"hostname", "old"}});
  EXPECT_FALSE(f.known);
  EXPECT_EQ(expect_host_path(f).kind, "unknown");
}

TEST(Pair, IpcSplitIsAFallbackToTcpWithTheCause) {
  const pair_facts f =
      compare_hosts(host("a", "ipc:[1]", "pid:[1]"), host("a", "ipc:[2]", "pid:[1]"));
  ASSERT_TRUE(f.same_host);
  EXPECT_FALSE(f.same_ipc);
  const auto blocked = shared_memory_blocked(f);
  ASSERT_TRUE(blocked.has_value());
  EXPECT_NE(blocked->cause.find("different IPC namespaces"), std::string::npos);
  EXPECT_NE(blocked->fix.find("hostIPC"), std::string::npos);
  const path_verdict v = judge_host_path(f, measured({{"tcp", "lo", net}}, "tag rndv rts"));
  EXPECT_EQ(v.verdict, "fallback to tcp");
  EXPECT_EQ(v.expected, "shared memory");
  EXPECT_EQ(v.cause, blocked->cause);
}

TEST(Pair, PidSplitLosesZeroCopyForLargeMessages) {
  const pair_facts f =
      compare_hosts(host("a", "ipc:[1]", "pid:[1]"), host("a", "ipc:[1]", "pid:[9]"));
  // What UCX 1.13 does here: eager over sysv, the rendezvous' bulk over the tcp rma_bw lane.
  const path_verdict v = judge_host_path(f, measured({{"sysv", "memory", shm}, {"tcp", "lo", net}},
                                                     "tag rndv rts", {{"tcp", "lo", net}}));
  EXPECT_EQ(v.verdict, "fallback to tcp for large messages");
  EXPECT_NE(v.cause.find("PID namespaces"), std::string::npos);
  EXPECT_NE(v.seen.find("bulk: tcp/lo"), std::string::npos) << v.seen;
}

TEST(Pair, SharedMemoryBulkIsTheFastPath) {
  const pair_facts f =
      compare_hosts(host("a", "ipc:[1]", "pid:[1]"), host("a", "ipc:[1]", "pid:[1]"));
  EXPECT_EQ(judge_host_path(f, measured({{"sysv", "memory", shm}, {"cma", "memory", shm}},
                                        "tag rndv rts", {{"cma", "memory", shm}}))
                .verdict,
            "fast path");
  // Nothing forbids shared memory, yet UCX used tcp: UCX_TLS is the suspect.
  const path_verdict v = judge_host_path(f, measured({{"tcp", "lo", net}}, "tag egr/short"));
  EXPECT_EQ(v.verdict, "fallback to tcp");
  EXPECT_NE(v.cause.find("UCX_TLS"), std::string::npos);
}

TEST(Pair, TheVerdictJudgesKindsNotNames) {
  const pair_facts f =
      compare_hosts(host("a", "ipc:[1]", "pid:[1]"), host("a", "ipc:[1]", "pid:[1]"));
  // A transport the verdict has never heard of, classified by its transport.
  EXPECT_EQ(judge_host_path(f, measured({{"newshm", "memory", shm}}, "eager")).verdict,
            "fast path");
  EXPECT_EQ(judge_host_path(f, measured({{"sockets", "eth0", net}}, "eager")).verdict,
            "fallback to sockets");
  // A known name whose transport did not classify it is not taken for shared memory.
  EXPECT_EQ(judge_host_path(f, measured({{"cma", "memory"}}, "eager")).verdict, "fallback");
}

TEST(Pair, AFailedCaseIsAFailedVerdictWithTheBlockingCause) {
  const pair_facts f =
      compare_hosts(host("a", "ipc:[1]", "pid:[1]"), host("a", "ipc:[2]", "pid:[3]"));
  case_result r = measured({}, "");
  r.status = case_status::error;
  r.message = "ucx wireup failed";
  const path_verdict v = judge_host_path(f, r);
  EXPECT_EQ(v.verdict, "failed");
  EXPECT_NE(v.cause.find("IPC"), std::string::npos);
  EXPECT_NE(v.cause.find("PID"), std::string::npos);
}

TEST(Pair, MissedShmExpectationCarriesTheCause) {
  const std::optional<expectation_hint> hint =
      expectation_hint{"different IPC namespaces", "hostIPC: true"};
  case_result r = measured({{"tcp", "lo", net}}, "tag rndv rts");
  apply_expectations({parse_expectation("transport!=tcp")}, r, hint);
  EXPECT_EQ(r.status, case_status::fail);
  EXPECT_NE(r.message.find("cause: different IPC namespaces"), std::string::npos) << r.message;
  EXPECT_EQ(r.verdict["checks"][0]["fix"], "hostIPC: true");
  // An expectation about an RDMA transport is not explained by IPC namespaces.
  case_result r2 = measured({{"tcp", "eth0", net}}, "tag rndv rts");
  apply_expectations({parse_expectation("transport=rc_mlx5")}, r2, hint);
  EXPECT_EQ(r2.status, case_status::fail);
  EXPECT_EQ(r2.message.find("IPC"), std::string::npos) << r2.message;
#if PAIRPERF_HAVE_UCX
  // A shared-memory lane that did not show up: its kind comes from the case's transport (UCX
  // classifies cma), so the namespaces explain it.
  case_result r3 = measured({{"tcp", "lo", net}}, "tag rndv rts");
  apply_expectations({parse_expectation("transport=cma")}, r3, hint);
  EXPECT_EQ(r3.status, case_status::fail);
  EXPECT_NE(r3.message.find("cause: different IPC namespaces"), std::string::npos) << r3.message;
#endif
}

}  // namespace
}  // namespace pairperf

namespace pairperf {
namespace {

gpu_info gpu(unsigned index, const std::string& uuid, const std::string& bus,
             std::vector<std::string> nvlinks = {}) {
  return gpu_info{index, uuid, bus, "NVIDIA H20", std::move(nvlinks)};
}

// Eight H20s with NV18 between all pairs, as `nvidia-smi topo -m` shows them: each GPU's 18
// links, spread over the other seven.
std::vector<std::string> links_to(const std::vector<std::string>& others) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < 18; ++i) out.push_back(others[i % others.size()]);
  return out;
}

TEST(GpuPair, ContainersThatSeeOnlyTheirOwnGpusCannotUseCudaIpc) {
  // The prefill/decode case: two pods on one node, two GPUs each, NVLink between all four.
  const std::vector<std::string> bus{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                     "0000:5d:00.0"};
  const std::vector<gpu_info> prefill{
      gpu(0, "GPU-aaaa0000-0000", bus[0], links_to({bus[1], bus[2], bus[3]})),
      gpu(1, "GPU-aaaa1111-1111", bus[1], links_to({bus[0], bus[2], bus[3]}))};
  const std::vector<gpu_info> decode{
      gpu(0, "GPU-bbbb2222-2222", bus[2], links_to({bus[0], bus[1], bus[3]})),
      gpu(1, "GPU-bbbb3333-3333", bus[3], links_to({bus[0], bus[1], bus[2]}))};
  const gpu_pair p = judge_gpu_pair(true, prefill, decode);
  EXPECT_EQ(p.expected, "cuda_ipc impossible");
  EXPECT_NE(p.problem.find("each side sees only its own GPUs"), std::string::npos) << p.problem;
  EXPECT_NE(p.problem.find("NVLink"), std::string::npos) << p.problem;  // the link is there
  EXPECT_NE(p.fix.find("NVIDIA_VISIBLE_DEVICES=all"), std::string::npos);
}

TEST(GpuPair, SharedGpusWithNvlinkExpectCudaIpcOverNvlink) {
  const std::vector<std::string> bus{"0000:18:00.0", "0000:2a:00.0"};
  const std::vector<gpu_info> all{gpu(0, "GPU-1", bus[0], links_to({bus[1]})),
                                  gpu(1, "GPU-2", bus[1], links_to({bus[0]}))};
  const gpu_pair p = judge_gpu_pair(true, all, all);
  EXPECT_EQ(p.expected, "cuda_ipc over NVLink");
  EXPECT_NE(p.why.find("18 NVLink(s)"), std::string::npos) << p.why;
  EXPECT_TRUE(p.problem.empty());
}

TEST(GpuPair, PcieOnlySameGpuAndOtherHosts) {
  const std::vector<gpu_info> two{gpu(0, "GPU-1", "0000:18:00.0"), gpu(1, "GPU-2", "0000:2a:00.0")};
  EXPECT_EQ(judge_gpu_pair(true, two, two).expected, "cuda_ipc over PCIe");
  const std::vector<gpu_info> one{gpu(0, "GPU-1", "0000:18:00.0")};
  EXPECT_EQ(judge_gpu_pair(true, one, one).expected, "cuda_ipc within one GPU");
  EXPECT_EQ(judge_gpu_pair(false, two, two).expected, "network");
  EXPECT_EQ(judge_gpu_pair(true, two, {}).expected, "");  // no GPU on one side: nothing to say
}

}  // namespace
}  // namespace pairperf
