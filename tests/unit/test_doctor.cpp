// doctor's plan (which interface pairs to probe) and analysis (ranking, findings) on
// synthetic inventories and results: no network needed.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "diagnose/doctor.h"

namespace pairperf {
namespace {

interface_info iface(const std::string& name, std::vector<std::pair<std::string, unsigned>> addrs,
                     bool loopback = false) {
  interface_info i;
  i.name = name;
  i.up = i.running = true;
  i.loopback = loopback;
  for (const auto& [a, len] : addrs)
    i.addresses.push_back({a.find(':') != std::string::npos ? AF_INET6 : AF_INET, a, len});
  return i;
}

const std::vector<interface_info> client_ifaces{
    iface("lo", {{"127.0.0.1", 8}, {"::1", 128}}, true),
    iface("bond0.118", {{"10.118.0.1", 24}, {"fe80::1", 64}}),
    iface("enp141s0", {{"172.16.0.5", 24}})};
const std::vector<interface_info> server_ifaces{
    iface("lo", {{"127.0.0.1", 8}}, true), iface("eth0", {{"10.118.0.2", 24}, {"fe80::2", 64}})};

TEST(DoctorPlan, EveryLocalInterfaceAgainstEveryServerAddress) {
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  ASSERT_EQ(plan.size(), 2U);  // loopback and link-local left out
  EXPECT_EQ(plan[0].local_iface, "bond0.118");
  EXPECT_EQ(plan[0].peer_address, "10.118.0.2");
  EXPECT_EQ(plan[0].peer_iface, "eth0");
  EXPECT_TRUE(plan[0].on_subnet);
  EXPECT_EQ(plan[1].local_iface, "enp141s0");
  EXPECT_FALSE(plan[1].on_subnet);
}

TEST(DoctorPlan, LoopbackControlProbesLoopbackOnly) {
  const auto plan = plan_matrix(client_ifaces, client_ifaces, "127.0.0.1", "", {});
  ASSERT_EQ(plan.size(), 2U);
  EXPECT_EQ(plan[0].peer_address, "127.0.0.1");
  EXPECT_EQ(plan[1].peer_address, "::1");
  // A server listening on 127.0.0.1 only is not probed on ::1.
  EXPECT_EQ(plan_matrix(client_ifaces, client_ifaces, "127.0.0.1", "127.0.0.1", {}).size(), 1U);
}

TEST(DoctorPlan, IfaceFilterAndListenAddress) {
  auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {"enp141s0"});
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0].local_iface, "enp141s0");
  EXPECT_TRUE(plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "10.9.9.9", {}).empty());
  EXPECT_EQ(plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "0.0.0.0", {}).size(), 2U);
}

case_result tcp_ok(double Bps) {
  case_result r;
  r.test.transport = "tcp";
  r.test.test = "tcp_bw";
  r.test.pattern = pattern_kind::stream_uni;
  r.test.size_bytes = 1 << 20;
  r.bandwidth_Bps = bandwidth{Bps, Bps};
  return r;
}

case_result unreachable(const std::string& code) {
  case_result r = tcp_ok(0);
  r.bandwidth_Bps.reset();
  r.status = case_status::unreachable;
  r.error_code = code;
  r.message = "data connect failed: " + code;
  return r;
}

nlohmann::json context_for(const nlohmann::json& client_env, const nlohmann::json& server_env) {
  const auto host = [](const std::vector<interface_info>& ifs, const std::string& boot,
                       const std::string& addr) {
    return nlohmann::json{
        {"hostname", boot},
        {"interfaces", ifs},
        {"rdma_devices", nlohmann::json::array()},
        {"hostname_addresses", {addr}},
        {"process", {{"boot_id", boot}, {"namespaces", {{"ipc", "ipc:[1]"}, {"pid", "pid:[1]"}}}}}};
  };
  return {{"client", host(client_ifaces, "node-a", "10.118.0.1")},
          {"server", host(server_ifaces, "node-b", "10.118.0.2")},
          {"env", {{"client", client_env}, {"server", server_env}}}};
}

TEST(DoctorAnalyze, AsymmetricPairRecommendsTheReachingNic) {
  doctor_report r;
  r.reach_transport = "tcp";  // as run_doctor names the cells: by the probe's transport
  r.context = context_for(nlohmann::json::object(), nlohmann::json::object());
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  r.reach = {{plan[0], tcp_ok(9e9)}, {plan[1], unreachable("EHOSTUNREACH")}};
  analyze(r);
  EXPECT_EQ(r.client.ranked, std::vector<std::string>{"bond0.118"});
  EXPECT_EQ(r.server.ranked, std::vector<std::string>{"eth0"});
  bool ucx_fix = false;
  for (const auto& f : r.findings)
    ucx_fix = ucx_fix || (f.subject == "UCX_NET_DEVICES" && f.side == "client" &&
                          f.fix == "on the client: UCX_NET_DEVICES=bond0.118" &&
                          f.problem.find("enp141s0") != std::string::npos);
  EXPECT_TRUE(ucx_fix) << nlohmann::json(r.findings).dump(1);
  EXPECT_FALSE(r.pair.same_host);
  EXPECT_EQ(exit_code(r), 3);
  const nlohmann::json j = r;
  EXPECT_EQ(j["client"]["recommended"]["UCX_NET_DEVICES"], "bond0.118");
  EXPECT_EQ(j["server"]["recommended"]["GLOO_SOCKET_IFNAME"], "eth0");
  EXPECT_EQ(j["tcp"][1]["result"]["error_code"], "EHOSTUNREACH");
  EXPECT_FALSE(j["tcp"][1]["reachable"].get<bool>());
}

TEST(DoctorAnalyze, ConfiguredPairHasNoFindingAndExitsZero) {
  const nlohmann::json client_env{{"UCX_NET_DEVICES", "bond0.118"},
                                  {"NCCL_SOCKET_IFNAME", "bond0.118"},
                                  {"GLOO_SOCKET_IFNAME", "bond0.118"}};
  const nlohmann::json server_env{
      {"UCX_NET_DEVICES", "eth0"}, {"NCCL_SOCKET_IFNAME", "eth0"}, {"GLOO_SOCKET_IFNAME", "eth0"}};
  doctor_report r;
  r.context = context_for(client_env, server_env);
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  r.reach = {{plan[0], tcp_ok(9e9)}, {plan[1], unreachable("EHOSTUNREACH")}};
  analyze(r);
  EXPECT_TRUE(r.findings.empty()) << nlohmann::json(r.findings).dump(1);
  EXPECT_EQ(exit_code(r), 0);
}

TEST(DoctorAnalyze, NothingReachesIsAFinding) {
  doctor_report r;
  r.context = context_for(nlohmann::json::object(), nlohmann::json::object());
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  r.reach = {{plan[0], unreachable("ETIMEDOUT")}, {plan[1], unreachable("EHOSTUNREACH")}};
  analyze(r);
  bool found = false;
  for (const auto& f : r.findings) found = found || f.subject == "interfaces";
  EXPECT_TRUE(found);
  EXPECT_TRUE(r.client.ranked.empty());
}

TEST(DoctorAnalyze, RanksByMeasuredBandwidth) {
  std::vector<interface_info> two{iface("eth0", {{"10.0.0.1", 24}}),
                                  iface("eth1", {{"10.0.1.1", 24}})};
  std::vector<interface_info> peer{iface("p0", {{"10.0.0.2", 24}}),
                                   iface("p1", {{"10.0.1.2", 24}})};
  const auto plan = plan_matrix(two, peer, "10.0.0.2", "", {});
  ASSERT_EQ(plan.size(), 4U);
  doctor_report r;
  r.reach = {{plan[0], tcp_ok(2e9)},
             {plan[1], unreachable("EHOSTUNREACH")},
             {plan[2], unreachable("EHOSTUNREACH")},
             {plan[3], tcp_ok(5e9)}};
  analyze(r);
  EXPECT_EQ(r.client.ranked, (std::vector<std::string>{"eth1", "eth0"}));
  EXPECT_EQ(r.server.ranked, (std::vector<std::string>{"p1", "p0"}));
}

}  // namespace
}  // namespace pairperf

namespace pairperf {
namespace {

TEST(DoctorAnalyze, GpuFallbackBetweenContainersIsAFinding) {
  doctor_report r;
  nlohmann::json ctx = context_for(nlohmann::json::object(), nlohmann::json::object());
  // One host, two containers, each seeing only its own GPU.
  for (const char* side : {"client", "server"}) ctx[side]["process"]["boot_id"] = "same-boot";
  const auto one_gpu = [](const char* uuid, const char* bus) {
    nlohmann::json g{{"index", 0}, {"uuid", uuid}, {"bus_id", bus}};
    return nlohmann::json{{"available", true}, {"gpus", nlohmann::json::array({g})}};
  };
  ctx["client"]["gpus"] = one_gpu("GPU-aaaa", "0000:18:00.0");
  ctx["server"]["gpus"] = one_gpu("GPU-bbbb", "0000:2a:00.0");
  r.context = ctx;
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  r.reach = {{plan[0], tcp_ok(9e9)}};
  case_result gpu = tcp_ok(0.365e9);
  gpu.test.transport = "ucx";
  gpu.test.client_memory = gpu.test.server_memory = memory_type::cuda;
  gpu.gpu_path = "fallback";
  gpu.gpu_path_why = "GPU data went over tcp/eth0: no cuda_ipc between these GPUs";
  r.path = {tcp_ok(9e9), gpu};
  analyze(r);
  ASSERT_TRUE(r.gpus.has_value());
  EXPECT_EQ(r.gpus->expected, "cuda_ipc impossible");
  bool found = false;
  for (const auto& f : r.findings) {
    if (f.subject != "GPU path") continue;
    found = true;
    EXPECT_NE(f.problem.find("each side sees only its own GPUs"), std::string::npos) << f.problem;
    EXPECT_NE(f.fix.find("NVIDIA_VISIBLE_DEVICES=all"), std::string::npos) << f.fix;
  }
  EXPECT_TRUE(found) << nlohmann::json(r.findings).dump(1);
}

// As the H100 run saw it: both sides' NVML list the one GPU, the client's CUDA_VISIBLE_DEVICES
// names another, so CUDA there sees none and the GPU row is skipped: the fix names the variable.
TEST(DoctorAnalyze, GpuRowWithoutADeviceNamesCudaVisibleDevices) {
  doctor_report r;
  nlohmann::json ctx = context_for(nlohmann::json{{"CUDA_VISIBLE_DEVICES", "GPU-ffffffff"}},
                                   nlohmann::json::object());
  for (const char* side : {"client", "server"}) {
    ctx[side]["process"]["boot_id"] = "same-boot";
    nlohmann::json g{{"index", 0}, {"uuid", "GPU-0aa2e1eb"}, {"bus_id", "0000:00:06.0"}};
    ctx[side]["gpus"] = {{"available", true}, {"gpus", nlohmann::json::array({g})}};
  }
  r.context = ctx;
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  r.reach = {{plan[0], tcp_ok(9e9)}};
  case_result gpu;
  gpu.test.transport = "ucx";
  gpu.test.client_memory = gpu.test.server_memory = memory_type::cuda;
  gpu.status = case_status::skipped;
  gpu.message = "cuda memory: no usable CUDA device: no CUDA-capable device is detected";
  r.path = {tcp_ok(9e9), gpu};
  analyze(r);
  std::vector<std::string> fixes;
  for (const auto& f : r.findings) {
    if (f.subject == "GPU path") fixes.push_back(f.fix);
  }
  ASSERT_EQ(fixes.size(), 1U) << nlohmann::json(r.findings).dump(1);
  EXPECT_NE(fixes[0].find("CUDA_VISIBLE_DEVICES=GPU-ffffffff on the client"), std::string::npos)
      << fixes[0];
  // Without the variable the cause is the driver or the UCX build, as before.
  r.context["env"]["client"] = nlohmann::json::object();
  r.findings.clear();
  analyze(r);
  fixes.clear();
  for (const auto& f : r.findings) {
    if (f.subject == "GPU path") fixes.push_back(f.fix);
  }
  ASSERT_EQ(fixes.size(), 1U) << nlohmann::json(r.findings).dump(1);
  EXPECT_NE(fixes[0].find("scripts/build-ucx-cuda"), std::string::npos) << fixes[0];
}

#if PAIRPERF_HAVE_UCX
TEST(DoctorAnalyze, TransportSelectionVariablesAreJudgedByTheirTransport) {
  // The server's UCX has no CUDA; both sides set UCX_TLS with cuda_ipc: the UCX transport, through
  // the registry, says the server's library lacks it (the client's hello says nothing of its UCX).
  const nlohmann::json env{{"UCX_TLS", "sm,cuda_ipc"}};
  doctor_report r;
  r.context = context_for(env, env);
  r.context["server_tool"] = {
      {"libraries", {{"ucx", {{"transports", {"tcp", "sysv", "posix", "cma", "self"}}}}}}};
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  r.reach = {{plan[0], tcp_ok(9e9)}};
  analyze(r);
  bool server = false, client = false;
  for (const auto& f : r.findings) {
    if (f.subject != "UCX_TLS") continue;
    server =
        server || (f.side == "server" && f.problem.find("names cuda_ipc") != std::string::npos);
    client = client || f.side == "client";
  }
  EXPECT_TRUE(server) << nlohmann::json(r.findings).dump(1);
  EXPECT_FALSE(client) << nlohmann::json(r.findings).dump(1);
}

TEST(DoctorAnalyze, TwoUcxVersionsAreTheFindingAndItsFailedProbesTheEvidence) {
  // The client on Debian's UCX 1.13.1, the server on the 1.22.0 wheel (as measured end to end in
  // loopback.ucx): UCX's probes fail, and no UCX_NET_DEVICES setting would fix that.
  doctor_report r;
  r.context = context_for(nlohmann::json::object(), nlohmann::json::object());
  r.context["tool"] = {
      {"libraries", {{"ucx", {{"version", "1.13.1"}, {"library", "/usr/lib/libucp.so.0"}}}}}};
  r.context["server_tool"] = {
      {"libraries", {{"ucx", {{"version", "1.22.0"}, {"library", "/opt/ucx/lib/libucp.so.0"}}}}}};
  const auto plan = plan_matrix(client_ifaces, server_ifaces, "10.118.0.2", "", {});
  r.reach = {{plan[0], tcp_ok(9e9)}};
  r.library_transport = "ucx";
  case_result failed = unreachable("");
  failed.message = "peer reported: server side: ucp_ep_rkey_unpack: Unsupported operation";
  failed.status = case_status::error;
  r.applications = {{"UCX_NET_DEVICES", failed}};
  analyze(r);
  std::vector<finding> versions;
  for (const auto& f : r.findings) {
    EXPECT_NE(f.subject, "UCX_NET_DEVICES") << nlohmann::json(r.findings).dump(1);
    if (f.subject == "ucx version") versions.push_back(f);
  }
  ASSERT_EQ(versions.size(), 1U) << nlohmann::json(r.findings).dump(1);
  EXPECT_EQ(versions[0].severity, severity::fails);
  EXPECT_NE(versions[0].problem.find("UCX 1.13.1 (/usr/lib/libucp.so.0)"), std::string::npos);
  EXPECT_NE(versions[0].problem.find("UCX 1.22.0 (/opt/ucx/lib/libucp.so.0)"), std::string::npos);
  EXPECT_NE(versions[0].problem.find("Unsupported operation"), std::string::npos);
  EXPECT_EQ(exit_code(r), 3);
  // One minor version (1.22.0 and 1.22.1) is no finding; the failure is then UCX_NET_DEVICES's.
  r.context["tool"]["libraries"]["ucx"]["version"] = "1.22.1";
  analyze(r);
  for (const auto& f : r.findings) EXPECT_NE(f.subject, "ucx version");
  bool blamed = false;
  for (const auto& f : r.findings) blamed = blamed || f.subject == "UCX_NET_DEVICES";
  EXPECT_TRUE(blamed) << nlohmann::json(r.findings).dump(1);
}
#endif

}  // namespace
}  // namespace pairperf
