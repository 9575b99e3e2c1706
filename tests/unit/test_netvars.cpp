// The interface variables of UCX, NCCL and gloo, read as each library reads them, and the
// findings doctor draws from them on both sides of a pair.
#include <gtest/gtest.h>

#include <algorithm>

#include "host/netvars.h"
#include "tests/unit/netvars_fixture.h"

namespace pairperf {
namespace {

using namespace netvars_test;  // NOLINT: the shared pair and helpers

TEST(NcclFilter, PrefixExactAndExclude) {
  const names ifaces{"lo", "eth0", "eth1", "ib0", "docker0", "bond0.118"};
  EXPECT_EQ(nccl_select(parse_nccl_filter("eth"), ifaces), (names{"eth0", "eth1"}));
  EXPECT_EQ(nccl_select(parse_nccl_filter("=eth"), ifaces), names{});
  EXPECT_EQ(nccl_select(parse_nccl_filter("=eth1"), ifaces), names{"eth1"});
  EXPECT_EQ(nccl_select(parse_nccl_filter("^docker,lo"), ifaces),
            (names{"eth0", "eth1", "ib0", "bond0.118"}));
  EXPECT_EQ(nccl_select(parse_nccl_filter("bond0.118"), ifaces), names{"bond0.118"});
  // NCCL_IB_HCA entries carry ports.
  EXPECT_EQ(
      nccl_select(parse_nccl_filter("mlx5_0:1,mlx5_3:1"), names{"mlx5_0", "mlx5_1", "mlx5_3"}),
      (names{"mlx5_0", "mlx5_3"}));
  EXPECT_EQ(nccl_select(parse_nccl_filter("=mlx5_1"), names{"mlx5_1", "mlx5_10"}), names{"mlx5_1"});
}

TEST(SplitList, TrimsAndDropsEmpties) {
  EXPECT_EQ(split_list(" a, b ,,c "), (names{"a", "b", "c"}));
  EXPECT_EQ(split_list(""), names{});
}

TEST(CheckVariables, HealthyPairHasNoFinding) {
  pair_fixture p;
  p.healthy();
  const auto f = check_variables(p.client, p.server);
  EXPECT_TRUE(f.empty()) << dump(f);
}

TEST(CheckVariables, UcxUnsetOnMultiNicNodeRecommendsTheReachingNic) {
  pair_fixture p;
  p.healthy();
  p.client.env.erase("UCX_NET_DEVICES");
  const auto f = check_variables(p.client, p.server);
  ASSERT_TRUE(has(f, "client", "UCX_NET_DEVICES", "enp141s0")) << dump(f);
  EXPECT_TRUE(has(f, "client", "UCX_NET_DEVICES", "UCX_NET_DEVICES=bond0.118")) << dump(f);
  EXPECT_FALSE(has(f, "server", "UCX_NET_DEVICES")) << dump(f);
}

TEST(CheckVariables, UcxNetDevicesNamingAMissingOrUnreachingDevice) {
  pair_fixture p;
  p.healthy();
  p.client.env["UCX_NET_DEVICES"] = "enp141s0";
  EXPECT_TRUE(
      has(check_variables(p.client, p.server), "client", "UCX_NET_DEVICES", "does not reach"));
  p.client.env["UCX_NET_DEVICES"] = "eth7";
  EXPECT_TRUE(
      has(check_variables(p.client, p.server), "client", "UCX_NET_DEVICES", "does not have"));
  // RDMA devices are named with a port and are not netdevs.
  p.client.rdma = {"mlx5_0"};
  p.client.env["UCX_NET_DEVICES"] = "mlx5_0:1,bond0.118";
  EXPECT_FALSE(has(check_variables(p.client, p.server), "client", "UCX_NET_DEVICES"));
  p.client.env["UCX_NET_DEVICES"] = "mlx5_4:1";
  EXPECT_TRUE(has(check_variables(p.client, p.server), "client", "UCX_NET_DEVICES", "mlx5_4:1"));
}

TEST(CheckVariables, GlooNamingAnInterfaceOnOneSideOnly) {
  pair_fixture p;
  p.healthy();
  p.server.env["GLOO_SOCKET_IFNAME"] = "bond0.118";  // copied from the client's manifest
  const auto f = check_variables(p.client, p.server);
  ASSERT_TRUE(has(f, "server", "GLOO_SOCKET_IFNAME", "names no interface of the server"))
      << dump(f);
  EXPECT_TRUE(has(f, "server", "GLOO_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME=eth0")) << dump(f);
  EXPECT_FALSE(has(f, "client", "GLOO_SOCKET_IFNAME")) << dump(f);
}

TEST(CheckVariables, NcclSetButGlooLeftToTheHostname) {
  // The vLLM case: NCCL pointed at the RDMA-side interface, gloo binds the hostname's address.
  pair_fixture p;
  p.healthy();
  p.client.env.erase("GLOO_SOCKET_IFNAME");
  p.server.env.erase("GLOO_SOCKET_IFNAME");
  p.client.hostname_address = "172.16.0.5";
  p.client.hostname_iface = "enp141s0";
  const auto f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "client", "GLOO_SOCKET_IFNAME", "does not reach")) << dump(f);
  EXPECT_TRUE(has(f, "client", "GLOO_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME=bond0.118")) << dump(f);
  // The server's hostname is on the NCCL interface: nothing to say there.
  EXPECT_FALSE(has(f, "server", "GLOO_SOCKET_IFNAME")) << dump(f);
  // An untested interface is not evidence, but an interface other than NCCL's still is.
  p.client.tested.erase("enp141s0");
  EXPECT_TRUE(has(check_variables(p.client, p.server), "client", "GLOO_SOCKET_IFNAME",
                  "another interface than NCCL's"));
}

TEST(CheckVariables, HostnameOnLoopbackAcrossNamespacesIsAFinding) {
  pair_fixture p;
  p.healthy();
  p.client.env.erase("GLOO_SOCKET_IFNAME");
  p.server.env.erase("GLOO_SOCKET_IFNAME");
  p.client.hostname_address = "127.0.1.1";
  p.client.hostname_iface = "lo";
  EXPECT_TRUE(has(check_variables(p.client, p.server), "client", "GLOO_SOCKET_IFNAME", "loopback"));
  p.client.loopback_reaches_peer = true;  // one network namespace: 127.0.1.1 reaches the peer
  EXPECT_FALSE(has(check_variables(p.client, p.server), "client", "GLOO_SOCKET_IFNAME"));
}

TEST(CheckVariables, SocketVariableSetOnOneSideOnly) {
  pair_fixture p;
  p.healthy();
  p.server.env.erase("NCCL_SOCKET_IFNAME");
  const auto f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "pair", "NCCL_SOCKET_IFNAME", "set on the client")) << dump(f);
  EXPECT_TRUE(has(f, "pair", "NCCL_SOCKET_IFNAME", "on the server: NCCL_SOCKET_IFNAME=eth0"))
      << dump(f);
}

TEST(CheckVariables, NcclUnsetMayPickTheWrongNic) {
  pair_fixture p;
  p.healthy();
  p.client.env.erase("NCCL_SOCKET_IFNAME");
  p.server.env.erase("NCCL_SOCKET_IFNAME");
  const auto f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME", "enp141s0")) << dump(f);
  EXPECT_FALSE(has(f, "server", "NCCL_SOCKET_IFNAME")) << dump(f);
}

TEST(CheckVariables, IbHcaMatchingNoDevice) {
  pair_fixture p;
  p.healthy();
  p.client.rdma = {"mlx5_0", "mlx5_1"};
  p.client.env["NCCL_IB_HCA"] = "mlx5_1:1";
  EXPECT_FALSE(has(check_variables(p.client, p.server), "client", "NCCL_IB_HCA"));
  p.client.env["NCCL_IB_HCA"] = "=mlx5_3";
  EXPECT_TRUE(has(check_variables(p.client, p.server), "client", "NCCL_IB_HCA", "falls back"));
  p.server.env["NCCL_IB_HCA"] = "mlx5";  // the server has no RDMA device at all
  EXPECT_TRUE(has(check_variables(p.client, p.server), "server", "NCCL_IB_HCA", "no RDMA device"));
}

TEST(CheckVariables, ATransportSelectionVariableUnknownHereAndDifferentBetweenSides) {
  pair_fixture p;
  p.healthy();
  // As the UCX transport judged UCX_TLS=sm,cuda_ipc against a UCX without CUDA (registry.h).
  const side_view::axis_variable judged{
      "ucx", "UCX_TLS", {"cuda_ipc"}, {"tcp", "sysv", "posix", "cma", "self"}};
  p.client.axis_variables = p.server.axis_variables = {judged};
  p.client.env["UCX_TLS"] = "sm,cuda_ipc";
  p.server.env["UCX_TLS"] = "sm,cuda_ipc";
  auto f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "client", "UCX_TLS", "names cuda_ipc, which the client's ucx")) << dump(f);
  EXPECT_FALSE(has(f, "pair", "UCX_TLS")) << dump(f);
  p.server.env["UCX_TLS"] = "tcp";
  p.server.axis_variables[0].missing.clear();
  f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "pair", "UCX_TLS", "differs")) << dump(f);
  EXPECT_FALSE(has(f, "server", "UCX_TLS")) << dump(f);
  // Set on neither side: nothing to say, whatever the library lacks.
  p.client.env.erase("UCX_TLS");
  p.server.env.erase("UCX_TLS");
  EXPECT_FALSE(has(check_variables(p.client, p.server), "pair", "UCX_TLS"));
  EXPECT_FALSE(has(check_variables(p.client, p.server), "client", "UCX_TLS"));
}

TEST(CheckVariables, CudaVisibleDevicesAgainstTheGpusSeen) {
  pair_fixture p;
  p.healthy();
  p.client.gpus = std::vector<gpu_info>{{0, "GPU-4650fca3-1111", "00000000:18:00.0", "H20", {}},
                                        {1, "GPU-77aa0000-2222", "00000000:2A:00.0", "H20", {}}};
  p.client.env["CUDA_VISIBLE_DEVICES"] = "1,GPU-4650";
  EXPECT_FALSE(has(check_variables(p.client, p.server), "client", "CUDA_VISIBLE_DEVICES"));
  p.client.env["CUDA_VISIBLE_DEVICES"] = "2";
  EXPECT_TRUE(
      has(check_variables(p.client, p.server), "client", "CUDA_VISIBLE_DEVICES", "sees 2 GPU"));
  p.client.env["CUDA_VISIBLE_DEVICES"] = "GPU-ffff";
  EXPECT_TRUE(
      has(check_variables(p.client, p.server), "client", "CUDA_VISIBLE_DEVICES", "GPU-ffff"));
  // An index too long for any integer is a GPU it does not see, not a crash.
  p.client.env["CUDA_VISIBLE_DEVICES"] = "99999999999999999999999";
  EXPECT_TRUE(
      has(check_variables(p.client, p.server), "client", "CUDA_VISIBLE_DEVICES", "sees 2 GPU"));
  // Unknown GPUs (no NVML on that side): nothing is claimed.
  p.server.env["CUDA_VISIBLE_DEVICES"] = "7";
  EXPECT_FALSE(has(check_variables(p.client, p.server), "server", "CUDA_VISIBLE_DEVICES"));
}

// Loopback may reach (two processes on one host) but a fix never names it: pasted into a
// multi-node job, "lo" breaks it.
TEST(CheckVariables, AFixNeverNamesLoopback) {
  pair_fixture p;
  auto& client = p.client;
  auto& server = p.server;
  server.ranked = {"lo"};
  server.recommendable.clear();
  server.loopback = {"lo"};
  client.env["NCCL_SOCKET_IFNAME"] = "bond0.118";
  const auto f = check_variables(client, server);
  for (const auto& x : f) EXPECT_EQ(x.fix.find("=lo"), std::string::npos) << x.fix;
  EXPECT_TRUE(
      has(f, "pair", "NCCL_SOCKET_IFNAME", "only loopback reached the peer from the server"));
}

}  // namespace
}  // namespace pairperf

namespace pairperf {
namespace {

using namespace netvars_test;  // NOLINT: the shared pair and helpers

TEST(Severity, UcxsOwnConnectionDecidesWhetherAnUnreachingDeviceFails) {
  pair_fixture p;
  p.healthy();
  p.client.env["UCX_NET_DEVICES"] = "all";  // UCX's default: as unset
  // By rule (not measured): a device UCX may use does not reach: fails.
  EXPECT_EQ(worst(check_variables(p.client, p.server), "UCX_NET_DEVICES"), severity::fails);
  // Measured to work: UCX chose the reaching one by its own ranking: fragile.
  const measured_connections ok{{"UCX_NET_DEVICES", {true, true, ""}}};
  auto f = check_variables(p.client, p.server, ok);
  EXPECT_EQ(worst(f, "UCX_NET_DEVICES"), severity::fragile);
  EXPECT_TRUE(has(f, "client", "UCX_NET_DEVICES", "all (UCX's default)")) << dump(f);
  // Measured to fail: fails, with UCX's own error in the problem.
  const measured_connections failed{{"UCX_NET_DEVICES", {true, false, "Connection refused"}}};
  f = check_variables(p.client, p.server, failed);
  EXPECT_EQ(worst(f, "UCX_NET_DEVICES"), severity::fails);
  EXPECT_TRUE(has(f, "client", "UCX_NET_DEVICES", "Connection refused")) << dump(f);
}

TEST(Severity, UcxFailingWithoutARuleIsThePairsFinding) {
  pair_fixture p;
  p.healthy();
  const measured_connections failed{{"UCX_NET_DEVICES", {true, false, "Endpoint timeout"}}};
  const auto f = check_variables(p.client, p.server, failed);
  ASSERT_TRUE(has(f, "pair", "UCX_NET_DEVICES", "Endpoint timeout")) << dump(f);
  EXPECT_EQ(worst(f, "UCX_NET_DEVICES"), severity::fails);
}

TEST(Severity, AMissingDeviceFailsOnlyWhenNoneIsLeft) {
  pair_fixture p;
  p.healthy();
  p.client.env["UCX_NET_DEVICES"] = "eth7";
  EXPECT_EQ(worst(check_variables(p.client, p.server), "UCX_NET_DEVICES"), severity::fails);
  p.client.env["UCX_NET_DEVICES"] = "eth7,bond0.118";
  EXPECT_EQ(worst(check_variables(p.client, p.server), "UCX_NET_DEVICES"), severity::advice);
}

TEST(Severity, OneSidedVariablesAreAdvice) {
  pair_fixture p;
  p.healthy();
  p.server.env.erase("NCCL_SOCKET_IFNAME");
  EXPECT_EQ(worst(check_variables(p.client, p.server), "NCCL_SOCKET_IFNAME"), severity::advice);
}

// gloo's devices known on both sides: the address order decides who must reach whom.
pair_fixture gloo_pair(const std::string& client_address) {
  pair_fixture p;
  p.healthy();
  p.client.env.erase("GLOO_SOCKET_IFNAME");
  p.client.addresses = {{"10.118.0.1", "bond0.118"}, {"10.200.0.1", "enp141s0"}};
  p.server.addresses = {{"10.118.0.2", "eth0"}};
  p.client.gloo =
      gloo_side{true, "the hostname nodea", false, "", {{"", "nodea", client_address, ""}}};
  p.server.gloo =
      gloo_side{true, "GLOO_SOCKET_IFNAME=eth0", false, "", {{"eth0", "", "10.118.0.2", ""}}};
  return p;
}

TEST(Severity, GloosUnreachableAddressFailsOnlyWhenItListens) {
  // 10.200.0.1 sorts above the server's 10.118.0.2: the client connects, the pair works.
  auto p = gloo_pair("10.200.0.1");
  auto f = check_variables(p.client, p.server);
  EXPECT_EQ(worst(f, "GLOO_SOCKET_IFNAME"), severity::fragile) << dump(f);
  EXPECT_TRUE(has(f, "client", "GLOO_SOCKET_IFNAME", "sorts above 10.200.0.1")) << dump(f);
  // The same address sorting below the server's: the server must connect to it: fails, and the
  // fix names the client.
  p.server.addresses = {{"10.250.0.2", "eth0"}};
  p.server.gloo.devices[0].address = "10.250.0.2";
  f = check_variables(p.client, p.server);
  EXPECT_EQ(worst(f, "GLOO_SOCKET_IFNAME"), severity::fails) << dump(f);
  EXPECT_TRUE(has(f, "client", "GLOO_SOCKET_IFNAME", "on the client: GLOO_SOCKET_IFNAME=bond0.118"))
      << dump(f);
  // Measured: gloo's own outcome is the verdict.
  const measured_connections ok{{"GLOO_SOCKET_IFNAME", {true, true, ""}}};
  EXPECT_EQ(worst(check_variables(p.client, p.server, ok), "GLOO_SOCKET_IFNAME"),
            severity::fragile);
}

TEST(Severity, GloosLoopbackFallbackIsFragileAcrossHosts) {
  auto p = gloo_pair("127.0.0.1");
  p.client.gloo.loopback_fallback = true;
  const auto f = check_variables(p.client, p.server);
  EXPECT_EQ(worst(f, "GLOO_SOCKET_IFNAME"), severity::fragile) << dump(f);
  p.client.loopback_reaches_peer = p.server.loopback_reaches_peer = true;  // one namespace
  EXPECT_FALSE(has(check_variables(p.client, p.server), "client", "GLOO_SOCKET_IFNAME"));
}

}  // namespace
}  // namespace pairperf

namespace pairperf {
namespace {

using namespace netvars_test;  // NOLINT: the shared pair and helpers

TEST(Severity, ASelectionVariableFailsOnlyWhenNothingItNamesExists) {
  pair_fixture p;
  p.healthy();
  const side_view::axis_variable judged{"ofi", "FI_PROVIDER", {"efa"}, {"tcp;ofi_rxm", "shm"}};
  p.client.axis_variables = p.server.axis_variables = {judged};
  p.client.env["FI_PROVIDER"] = p.server.env["FI_PROVIDER"] = "efa";
  EXPECT_EQ(worst(check_variables(p.client, p.server), "FI_PROVIDER"), severity::fails);
  p.client.env["FI_PROVIDER"] = p.server.env["FI_PROVIDER"] = "efa,shm";
  EXPECT_EQ(worst(check_variables(p.client, p.server), "FI_PROVIDER"), severity::advice);
}

}  // namespace
}  // namespace pairperf
