// The GPU pieces that need no GPU: --gpu selection, UUID text, the nvidia-smi topology parser,
// the fast-path/fallback classification of GPU rows, and UCX_TLS sets that cannot move GPU memory.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "host/gpus.h"
#include "transports/memory/gpu_select.h"

namespace pairperf {
namespace {

TEST(GpuSelect, IndexUuidAndBusId) {
  EXPECT_EQ(parse_gpu_selector("").how, gpu_selector::kind::index);
  EXPECT_EQ(parse_gpu_selector("3").index, 3);
  const auto u = parse_gpu_selector("GPU-4650FCA3");
  EXPECT_EQ(u.how, gpu_selector::kind::uuid);
  EXPECT_TRUE(gpu_matches(u, "GPU-4650fca3-1234-5678-9abc-def012345678", ""));
  EXPECT_FALSE(gpu_matches(u, "GPU-77aa0000-1234-5678-9abc-def012345678", ""));
  const auto b = parse_gpu_selector("00000000:18:00.0");
  EXPECT_EQ(b.how, gpu_selector::kind::bus_id);
  EXPECT_TRUE(gpu_matches(b, "", "0000:18:00.0"));  // CUDA's short form
  EXPECT_TRUE(gpu_matches(parse_gpu_selector("0000:2A:00.0"), "", "00000000:2a:00.0"));
  EXPECT_THROW(parse_gpu_selector("fast"), usage_error);
  EXPECT_THROW(parse_gpu_selector("-1"), usage_error);
}

TEST(GpuSelect, UuidLikeNvidiaSmi) {
  const std::array<unsigned char, 16> b{0x46, 0x50, 0xfc, 0xa3, 0x12, 0x34, 0x56, 0x78,
                                        0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78};
  EXPECT_EQ(format_gpu_uuid(b), "GPU-4650fca3-1234-5678-9abc-def012345678");
}

// `nvidia-smi topo -m` on 8 H20s with NV18 between all GPUs (the machine), as saved in
// tests/fixtures/topo/h20x8.txt (also what `pairperf info --topo-file` is tested on).
std::string h20_text() {
  std::ifstream in(std::string(PAIRPERF_SOURCE_DIR) + "/tests/fixtures/topo/h20x8.txt");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
const std::string h20 = h20_text();

TEST(GpuTopology, ParsesTheH20Matrix) {
  const gpu_topology t = parse_topo_matrix(h20);
  ASSERT_EQ(t.gpus.size(), 8U);
  ASSERT_EQ(t.nics.size(), 5U);
  EXPECT_EQ(t.links[0][0], "X");
  EXPECT_EQ(nvlinks_between(t, 0, 7), 18U);
  EXPECT_EQ(nvlinks_between(t, 3, 3), 0U);
  EXPECT_EQ(t.links[0][8], "PIX");   // GPU0 - NIC0
  EXPECT_EQ(t.links[4][10], "PIX");  // GPU4 - NIC2
  EXPECT_EQ(t.nic_devices.at("NIC4"), "rocep32s0f0");
  EXPECT_EQ(t.cpu_affinity[5], "48-95,144-191");
  EXPECT_THROW(parse_topo_matrix("No devices were found"), std::runtime_error);
}

TEST(GpuTopology, DescribesNvlinkPeersAndNearestNics) {
  const auto lines = describe_topology(parse_topo_matrix(h20));
  ASSERT_EQ(lines.size(), 8U);
  EXPECT_EQ(lines[0],
            "GPU0: NV18 to all 7 other GPUs; nearest NIC: NIC0 ibp14s0 (PIX); CPUs 0-47,96-143");
  EXPECT_NE(lines[2].find("nearest NIC: NIC4 rocep32s0f0 (PIX)"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("no NIC on its PCIe switch or host bridge"), std::string::npos);
  const auto pcie = describe_topology(
      parse_topo_matrix("\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\n"
                        "GPU0\t X \tNV4\tSYS\tPXB\t0-7\nGPU1\tNV4\t X \tSYS\tPHB\t0-7\n"
                        "GPU2\tSYS\tSYS\t X \tSYS\t8-15\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"));
  EXPECT_EQ(pcie[0], "GPU0: NV4 to GPU1; nearest NIC: NIC0 mlx5_0 (PXB); CPUs 0-7");
  EXPECT_EQ(pcie[2],
            "GPU2: no NVLink; no NIC on its PCIe switch or host bridge (NODE/SYS only); CPUs 8-15");
}

TEST(GpuTopology, TerminalColourCodesAreIgnored) {
  const gpu_topology t = parse_topo_matrix(
      "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\n\x1b[4mGPU0\x1b[0m\t X \tNV4\t0-7\n"
      "\x1b[4mGPU1\x1b[0m\tNV4\t X \t0-7\n");
  EXPECT_EQ(nvlinks_between(t, 1, 0), 4U);
}

TEST(GpuTopology, PcieOnlyPair) {
  const gpu_topology t = parse_topo_matrix(
      "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
      "GPU0\t X \tSYS\t0-15\t0\t\tN/A\nGPU1\tSYS\t X \t16-31\t1\t\tN/A\n");
  EXPECT_EQ(nvlinks_between(t, 0, 1), 0U);
  EXPECT_EQ(t.links[0][1], "SYS");
}

constexpr auto ipc = lane_kind::gpu_ipc;
constexpr auto copy = lane_kind::staged_copy;
constexpr auto net = lane_kind::network;
constexpr auto rdma = lane_kind::rdma;

// `bulk` and `staged` as the transport reports them (provenance.h).
case_result gpu_row(std::vector<lane> lanes, std::string protocol, std::vector<lane> bulk = {},
                    std::string staged = "") {
  case_result r;
  r.test.transport = "ucx";
  r.test.test = "tag_bw";
  r.test.client_memory = r.test.server_memory = memory_type::cuda;
  r.provenance =
      provenance{std::move(lanes), std::move(protocol), {}, {}, std::move(bulk), std::move(staged)};
  return r;
}

TEST(GpuPath, FastPathAndFallbacks) {
  EXPECT_EQ(classify_gpu_path(gpu_row({{"cuda_ipc", "cuda", ipc}}, "tag rndv rts")).verdict,
            "fast path");
  // GPU IPC that only the protocol (or the peer's request) named: the transport put it in bulk.
  EXPECT_EQ(
      classify_gpu_path(gpu_row({{"tcp", "eth0", net}}, "rndv", {{"cuda_ipc", "", ipc}})).verdict,
      "fast path");
  const auto tcp = classify_gpu_path(
      gpu_row({{"tcp", "eth0", net}, {"cuda_copy", "cuda", copy}}, "tag rndv rts"));
  EXPECT_EQ(tcp.verdict, "fallback");
  EXPECT_NE(tcp.why.find("tcp/eth0"), std::string::npos);
  // UCX's FAQ row: "(?) rendezvous pipeline cuda_copy, fenced write to remote, cuda |
  // rc_mlx5/mlx5_0:1": the transport reports the staging.
  const auto pipeline =
      classify_gpu_path(gpu_row({{"rc_mlx5", "mlx5_0:1", rdma}},
                                "rendezvous pipeline cuda_copy, fenced write to remote, cuda", {},
                                "rendezvous pipeline cuda_copy"));
  EXPECT_EQ(pipeline.verdict, "fallback");
  EXPECT_NE(pipeline.why.find("rendezvous pipeline cuda_copy"), std::string::npos);
  EXPECT_EQ(classify_gpu_path(
                gpu_row({{"rc_mlx5", "mlx5_0:1", rdma}}, "rendezvous zero-copy read from remote"))
                .verdict,
            "network (RDMA)");
  EXPECT_EQ(classify_gpu_path(gpu_row({}, "", {}, "software emulation")).verdict, "fallback");
  // Kinds, not names: a lane of a transport the verdict never heard of.
  EXPECT_EQ(classify_gpu_path(gpu_row({{"xe_link", "gpu0", ipc}}, "put")).verdict, "fast path");
  EXPECT_EQ(classify_gpu_path(gpu_row({{"cuda_ipc", "cuda"}}, "put")).verdict, "unknown");
  // host -> GPU: a GPU IPC lane on the endpoint does not carry it.
  case_result mixed = gpu_row(
      {{"cuda_ipc", "cuda", ipc}, {"sysv", "memory", lane_kind::shared_memory}}, "tag rndv rts");
  mixed.test.client_memory = memory_type::host;
  EXPECT_EQ(classify_gpu_path(mixed).verdict, "host-GPU copy");
  EXPECT_TRUE(carrying_lanes(mixed).size() == 1 && carrying_lanes(mixed)[0].transport == "sysv");
  case_result host = gpu_row({{"tcp", "eth0", net}}, "");
  host.test.client_memory = host.test.server_memory = memory_type::host;
  EXPECT_EQ(classify_gpu_path(host).verdict, "");  // not a GPU row
}

}  // namespace
}  // namespace pairperf
