// The interface variables of UCX, NCCL and gloo, read as each library reads them, and the
// findings doctor draws from them on both sides of a pair.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>

#include "host/netvars.h"

namespace pairperf {
namespace {

using names = std::vector<std::string>;

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

// An interface as the host facts carry it: index, carrier, addresses in getifaddrs' order.
interface_info nic(const std::string& name, unsigned index, std::vector<std::string> addresses,
                   bool running = true) {
  interface_info i;
  i.name = name;
  i.index = index;
  i.up = true;
  i.running = running;
  i.loopback = name == "lo";
  for (auto& a : addresses) {
    const bool v6 = a.find(':') != std::string::npos;
    i.addresses.push_back({v6 ? AF_INET6 : AF_INET, a, v6 ? 64U : 24U});
  }
  return i;
}

std::vector<std::string> rule(const std::vector<interface_info>& ifaces, const nlohmann::json& env,
                              std::size_t max = 16) {
  names out;
  for (const auto& p : nccl_rule_interfaces(ifaces, env, max)) out.push_back(p.iface);
  return out;
}

// NCCL 2.30.7's search (src/misc/socket.cc, src/os/linux.cc), each case one that real NCCL
// answered the same way in tests/scenarios/test_nccl_truth.py.
TEST(NcclRule, FollowsIfindexOrderAndSkipsDockerLoVirbr) {
  const std::vector<interface_info> host{
      nic("lo", 1, {"127.0.0.1", "::1"}), nic("virbr0", 2, {"192.168.122.1"}),
      nic("enp141s0", 3, {"10.85.0.1"}), nic("eth0", 4, {"10.88.0.1", "fd88::1"}),
      nic("docker0", 5, {"172.17.0.1"})};
  // Sorted by name, eth0 would come first: the kernel's order decides.
  EXPECT_EQ(rule(host, nlohmann::json::object()), (names{"enp141s0", "eth0"}));
  EXPECT_EQ(rule(host, nlohmann::json::object(), 1), names{"enp141s0"});
  auto with_ib = host;
  with_ib.push_back(nic("ib0", 6, {"10.87.0.1"}));
  EXPECT_EQ(rule(with_ib, nlohmann::json::object()), names{"ib0"});
  // "^eth": lo is not excluded by a user's list, and has the lowest index.
  EXPECT_EQ(rule(with_ib, {{"NCCL_SOCKET_IFNAME", "^eth"}}, 1), names{"lo"});
  // A list does not order: ifindex does.
  EXPECT_EQ(rule(with_ib, {{"NCCL_SOCKET_IFNAME", "ib0,eth0"}}), (names{"eth0", "ib0"}));
  EXPECT_EQ(rule(with_ib, {{"NCCL_SOCKET_IFNAME", "=eth"}}), names{});
  EXPECT_EQ(rule(with_ib, {{"NCCL_SOCKET_IFNAME", "^=eth0"}}, 1), names{"lo"});
  // One character: ignored.
  EXPECT_EQ(rule(with_ib, {{"NCCL_SOCKET_IFNAME", "e"}}, 1), names{"ib0"});
  // Only docker and lo left: docker before lo; then virbr last.
  EXPECT_EQ(rule({nic("lo", 1, {"127.0.0.1"}), nic("docker0", 2, {"172.17.0.1"})}, {}),
            names{"docker0"});
  EXPECT_EQ(rule({nic("lo", 1, {"127.0.0.1"})}, {}), names{"lo"});
}

TEST(NcclRule, CarrierFamilyAndCommId) {
  std::vector<interface_info> host{
      nic("lo", 1, {"127.0.0.1", "::1"}), nic("enp141s0", 2, {"10.85.0.1"}, false),
      nic("eth0", 3, {"10.88.0.1", "fd88::1"}), nic("ib0", 4, {"fe80::1"})};
  // enp141s0 has no carrier (skipped since 2.28.3); ib0 has only an IPv6 link-local address,
  // which NCCL takes (IPv6 comes after every IPv4 address, but "ib" matches nothing else).
  EXPECT_EQ(rule(host, {}), names{"ib0"});
  EXPECT_EQ(rule(host, {{"NCCL_SOCKET_FAMILY", "AF_INET"}}), names{"eth0"});
  EXPECT_EQ(rule(host, {{"NCCL_SOCKET_FAMILY", "AF_INET6"}, {"NCCL_SOCKET_IFNAME", "eth0"}}),
            names{"eth0"});
  EXPECT_EQ(nccl_rule_interfaces(
                host, {{"NCCL_SOCKET_FAMILY", "AF_INET6"}, {"NCCL_SOCKET_IFNAME", "eth0"}}, 1)
                .front()
                .address,
            "fd88::1");
  // NCCL_COMM_ID: the bootstrap takes the interface on its subnet, whatever else is set; no
  // carrier check there (ncclFindInterfaceMatchSubnet).
  const nlohmann::json comm{{"NCCL_COMM_ID", "10.85.0.9:29500"}, {"NCCL_SOCKET_IFNAME", "eth0"}};
  EXPECT_EQ(nccl_rule_bootstrap(host, comm)->iface, "enp141s0");
  EXPECT_FALSE(nccl_rule_bootstrap(host, {{"NCCL_COMM_ID", "10.99.0.1:29500"}}).has_value());
  EXPECT_EQ(nccl_rule_bootstrap(host, {{"NCCL_COMM_ID", "[fd88::7]:29500"}})->iface, "eth0");
}

TEST(NcclProbe, ReadsTheBootstrapLineOfEitherVersion) {
  const names ifaces{"eth0", "eth0:1", "ib0"};
  // NCCL 2.18.3 and 2.28.9 / 2.32.3 as they printed here.
  EXPECT_EQ(parse_bootstrap_line({"INFO Bootstrap : Using eth0:192.0.2.2<0>"}, ifaces),
            (std::pair<std::string, std::string>{"eth0", "192.0.2.2"}));
  EXPECT_EQ(parse_bootstrap_line({"INFO ENV/Plugin: Could not find: libnccl-env.so",
                                  "INFO Bootstrap: Using ib0:fe80::1%ib0<0>"},
                                 ifaces),
            (std::pair<std::string, std::string>{"ib0", "fe80::1"}));
  EXPECT_EQ(parse_bootstrap_line({"INFO Bootstrap: Using eth0:1:10.0.0.5<0>"}, ifaces).first,
            "eth0:1");
  EXPECT_EQ(parse_bootstrap_line({"WARN Bootstrap : no socket interface found"}, ifaces).first, "");
}

TEST(NcclProbe, FindsTheNamedLibrariesOnly) {
  const auto c = find_nccl_libraries(
      {"PAIRPERF_NCCL_LIBRARY=/a/libnccl.so.2:/b/libnccl.so.2", "PATH=/usr/bin"});
  ASSERT_EQ(c.size(), 2U);
  EXPECT_EQ(c[0].path, "/a/libnccl.so.2");
  EXPECT_EQ(c[1].found_by, "PAIRPERF_NCCL_LIBRARY");
  // Unnamed: the loader's search comes first.
  const auto d = find_nccl_libraries({"PATH=/nonexistent/bin"});
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d.front().path, "libnccl.so.2");
  EXPECT_EQ(d.front().found_by, "the dynamic loader");
}

TEST(SplitList, TrimsAndDropsEmpties) {
  EXPECT_EQ(split_list(" a, b ,,c "), (names{"a", "b", "c"}));
  EXPECT_EQ(split_list(""), names{});
}

// A pair like the issue's: client with a reaching and a non-reaching NIC, server with one.
struct pair_fixture {
  side_view client, server;
  pair_fixture() {
    client.name = "client";
    client.ifaces = {"lo", "bond0.118", "enp141s0"};
    client.tested = {"bond0.118", "enp141s0"};
    client.reaching = {"bond0.118"};
    client.ranked = client.recommendable = {"bond0.118"};
    client.hostname_address = "10.118.0.1";
    client.hostname_iface = "bond0.118";
    client.loopback = {"lo"};
    client.interfaces = {nic("lo", 1, {"127.0.0.1"}), nic("bond0.118", 2, {"10.118.0.1"}),
                         nic("enp141s0", 3, {"10.200.0.1"})};
    server.name = "server";
    server.ifaces = {"lo", "eth0"};
    server.tested = {"eth0"};
    server.reaching = {"eth0"};
    server.ranked = server.recommendable = {"eth0"};
    server.hostname_address = "10.118.0.2";
    server.hostname_iface = "eth0";
    server.loopback = {"lo"};
    server.interfaces = {nic("lo", 1, {"127.0.0.1"}), nic("eth0", 2, {"10.118.0.2"})};
  }
  // Both sides set every socket variable to what reaches: the healthy pair.
  void healthy() {
    client.env = {{"UCX_NET_DEVICES", "bond0.118"},
                  {"NCCL_SOCKET_IFNAME", "bond0.118"},
                  {"GLOO_SOCKET_IFNAME", "bond0.118"}};
    server.env = {{"UCX_NET_DEVICES", "eth0"},
                  {"NCCL_SOCKET_IFNAME", "eth0"},
                  {"GLOO_SOCKET_IFNAME", "eth0"}};
  }
};

bool has(const std::vector<finding>& f, const std::string& side, const std::string& subject,
         const std::string& text = "") {
  return std::any_of(f.begin(), f.end(), [&](const finding& x) {
    return x.side == side && x.subject == subject &&
           (x.problem.find(text) != std::string::npos || x.fix.find(text) != std::string::npos);
  });
}

std::string dump(const std::vector<finding>& f) {
  std::string out;
  for (const auto& x : f) out += x.side + " " + x.subject + ": " + x.problem + " | " + x.fix + "\n";
  return out;
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

severity worst(const std::vector<finding>& f, const std::string& subject) {
  severity w = severity::advice;
  bool any = false;
  for (const auto& x : f) {
    if (x.subject != subject) continue;
    if (!any || static_cast<int>(x.severity) < static_cast<int>(w)) w = x.severity;
    any = true;
  }
  EXPECT_TRUE(any) << "no " << subject << " finding:\n" << dump(f);
  return w;
}

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

TEST(Severity, NcclsRuleFailsWhenItsBootstrapInterfaceDoesNotReach) {
  pair_fixture p;
  p.healthy();
  // The client lists the reaching interface first: the bootstrap works, another does not reach.
  p.client.env["NCCL_SOCKET_IFNAME"] = "bond0.118,enp141s0";
  auto f = check_variables(p.client, p.server);
  EXPECT_EQ(worst(f, "NCCL_SOCKET_IFNAME"), severity::fragile);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME", "NET/Socket (its data path without RDMA)"))
      << dump(f);
  // Only the non-reaching one: the bootstrap takes it.
  p.client.env["NCCL_SOCKET_IFNAME"] = "enp";
  f = check_variables(p.client, p.server);
  EXPECT_EQ(worst(f, "NCCL_SOCKET_IFNAME"), severity::fails);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME",
                  "NCCL's rule (2.30.7 source; no libnccl "
                  "answered) takes enp141s0:10.200.0.1"))
      << dump(f);
  // One character: NCCL ignores it (and picks by itself).
  p.client.env["NCCL_SOCKET_IFNAME"] = "e";
  f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME", "is one character")) << dump(f);
}

}  // namespace
}  // namespace pairperf

namespace pairperf {
namespace {

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

namespace pairperf {
namespace {

nccl_answer answer(const std::string& version, const std::string& iface,
                   const std::string& address) {
  nccl_answer a;
  a.found_by = "PAIRPERF_NCCL_LIBRARY";
  a.library = "/opt/nccl-" + version + "/libnccl.so.2";
  a.version = version;
  a.ran = a.ok = true;
  a.iface = iface;
  a.address = address;
  return a;
}

// The library's answer decides over the rule, per version, and says which library answered.
TEST(NcclLibrary, TheAnswerDecidesAndNamesItsVersion) {
  pair_fixture p;
  p.healthy();
  p.client.env.erase("NCCL_SOCKET_IFNAME");
  p.client.nccl.known = true;
  p.client.nccl.answers = {answer("2.28.9", "bond0.118", "10.118.0.1")};
  auto f = check_variables(p.client, p.server);
  EXPECT_NE(worst(f, "NCCL_SOCKET_IFNAME"), severity::fails) << dump(f);
  const auto v = judge_nccl(p.client);
  ASSERT_EQ(v.size(), 1U);
  EXPECT_EQ(v[0].outcome, "reaches");
  EXPECT_EQ(v[0].source, "library");
  // Two versions that disagree (2.18 has no carrier check): one finding names the one that fails.
  p.client.nccl.answers.push_back(answer("2.18.3", "enp141s0", "10.200.0.1"));
  f = check_variables(p.client, p.server);
  EXPECT_EQ(worst(f, "NCCL_SOCKET_IFNAME"), severity::fails);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME",
                  "NCCL 2.18.3 (/opt/nccl-2.18.3/libnccl.so.2) takes enp141s0:10.200.0.1"))
      << dump(f);
  EXPECT_FALSE(has(f, "client", "NCCL_SOCKET_IFNAME", "NCCL 2.28.9")) << dump(f);
  EXPECT_TRUE(
      has(f, "client", "NCCL_SOCKET_IFNAME", "on the client: NCCL_SOCKET_IFNAME=bond0.118"));
}

TEST(NcclLibrary, LoopbackLinkLocalAndNoInterface) {
  pair_fixture p;
  p.healthy();
  p.client.nccl.known = true;
  p.client.nccl.answers = {answer("2.32.3", "lo", "127.0.0.1")};
  EXPECT_EQ(judge_nccl(p.client)[0].outcome, "fails");
  p.client.loopback_reaches_peer = true;  // one network namespace
  EXPECT_EQ(judge_nccl(p.client)[0].outcome, "reaches");
  p.client.loopback_reaches_peer = false;
  p.client.interfaces.push_back(nic("ib0", 4, {"fe80::1"}));
  p.client.nccl.answers = {answer("2.32.3", "ib0", "fe80::1")};
  auto f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME", "link-local")) << dump(f);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY=AF_INET")) << dump(f);
  EXPECT_EQ(worst(f, "NCCL_SOCKET_IFNAME"), severity::fails);
  nccl_answer none = answer("2.28.9", "", "");
  none.ok = false;
  none.error = "Bootstrap : no socket interface found; ncclGetUniqueId returned 5 (invalid usage)";
  p.client.nccl.answers = {none};
  f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME", "finds no interface")) << dump(f);
  EXPECT_EQ(worst(f, "NCCL_SOCKET_IFNAME"), severity::fails);
}

// A library that crashed or hung is no verdict: advice with the reason, and the rule decides.
TEST(NcclLibrary, NoAnswerFallsBackToTheRule) {
  pair_fixture p;
  p.healthy();
  p.client.env["NCCL_SOCKET_IFNAME"] = "enp";
  nccl_answer hung = answer("", "", "");
  hung.ran = hung.ok = false;
  hung.error = "NCCL's probe gave no answer within 10 s (killed)";
  p.client.nccl.known = true;
  p.client.nccl.answers = {hung};
  const auto v = judge_nccl(p.client);
  ASSERT_EQ(v.size(), 2U);
  EXPECT_EQ(v[0].outcome, "unknown");
  EXPECT_EQ(v[1].source, "rule");
  EXPECT_EQ(v[1].iface, "enp141s0");
  const auto f = check_variables(p.client, p.server);
  EXPECT_TRUE(has(f, "client", "NCCL_SOCKET_IFNAME", "gave no answer within 10 s")) << dump(f);
  EXPECT_EQ(worst(f, "NCCL_SOCKET_IFNAME"), severity::fails);  // the rule's enp141s0
}

}  // namespace
}  // namespace pairperf
