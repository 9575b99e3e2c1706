// NCCL's interface: its rule as NCCL 2.30.7's source has it, the probe's reading of NCCL's own
// line, and the verdicts doctor draws from each library's answer (host/netvars_nccl.cpp,
// host/nccl_probe.cpp).
#include <gtest/gtest.h>

#include "host/nccl_probe.h"
#include "host/netvars.h"
#include "tests/unit/netvars_fixture.h"

namespace pairperf {
namespace {

using namespace netvars_test;  // NOLINT: the shared pair and helpers

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
