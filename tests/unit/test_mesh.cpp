// The mesh's schedule, outliers, matrices and node comparison, on synthetic data.
#include <gtest/gtest.h>

#include <set>

#include "mesh/mesh.h"

namespace pairperf {
namespace {

void expect_valid(const std::vector<mesh_round>& rounds, int nodes, std::size_t pairs_expected) {
  std::set<std::pair<int, int>> seen;
  for (const auto& round : rounds) {
    std::set<int> busy;
    for (const auto& p : round) {
      EXPECT_NE(p.client, p.server);
      EXPECT_TRUE(busy.insert(p.client).second) << "node " << p.client << " twice in a round";
      EXPECT_TRUE(busy.insert(p.server).second) << "node " << p.server << " twice in a round";
      EXPECT_TRUE(seen.insert({std::min(p.client, p.server), std::max(p.client, p.server)}).second);
      EXPECT_LT(p.client, nodes);
      EXPECT_LT(p.server, nodes);
    }
  }
  EXPECT_EQ(seen.size(), pairs_expected);
}

TEST(MeshSchedule, AllPairsByTheCircleMethod) {
  for (int n = 2; n <= 12; ++n) {
    const auto rounds = mesh_schedule(n, mesh_pattern::all_pairs);
    SCOPED_TRACE(n);
    expect_valid(rounds, n, static_cast<std::size_t>(n * (n - 1) / 2));
    if (n % 2 == 0) {
      EXPECT_EQ(rounds.size(), static_cast<std::size_t>(n - 1));
      for (const auto& r : rounds) EXPECT_EQ(r.size(), static_cast<std::size_t>(n / 2));
    } else {
      EXPECT_EQ(rounds.size(), static_cast<std::size_t>(n));  // one idle node a round
      for (const auto& r : rounds) EXPECT_EQ(r.size(), static_cast<std::size_t>((n - 1) / 2));
    }
  }
  EXPECT_TRUE(mesh_schedule(1, mesh_pattern::all_pairs).empty());
}

TEST(MeshSchedule, RingAndOneToAll) {
  expect_valid(mesh_schedule(6, mesh_pattern::ring), 6, 6);
  EXPECT_EQ(mesh_schedule(6, mesh_pattern::ring).size(), 2U);
  expect_valid(mesh_schedule(5, mesh_pattern::ring), 5, 5);
  EXPECT_EQ(mesh_schedule(5, mesh_pattern::ring).size(), 3U);
  expect_valid(mesh_schedule(2, mesh_pattern::ring), 2, 1);
  const auto star = mesh_schedule(5, mesh_pattern::one_to_all);
  expect_valid(star, 5, 4);
  EXPECT_EQ(star.size(), 4U);
  EXPECT_THROW(parse_mesh_pattern("star"), std::exception);
}

// Both directions: every ordered pair once, in twice the rounds, each round still disjoint.
TEST(MeshSchedule, BothDirectionsMeasureEveryOrderedPairOnce) {
  for (int n = 2; n <= 9; ++n) {
    SCOPED_TRACE(n);
    const auto one = mesh_schedule(n, mesh_pattern::all_pairs);
    const auto both = mesh_schedule(n, mesh_pattern::all_pairs, true);
    EXPECT_EQ(both.size(), 2 * one.size());
    std::set<std::pair<int, int>> ordered;
    for (const auto& round : both) {
      std::set<int> busy;
      for (const auto& p : round) {
        EXPECT_TRUE(busy.insert(p.client).second);
        EXPECT_TRUE(busy.insert(p.server).second);
        EXPECT_TRUE(ordered.insert({p.client, p.server}).second) << p.client << "->" << p.server;
      }
    }
    EXPECT_EQ(ordered.size(), static_cast<std::size_t>(n * (n - 1)));
  }
  // A ring of two already goes one way; both directions add the other once.
  EXPECT_EQ(mesh_schedule(2, mesh_pattern::ring, true).size(), 2U);
  EXPECT_EQ(mesh_schedule(5, mesh_pattern::one_to_all, true).size(), 8U);
}

case_result bw(double Bps, case_status s = case_status::ok) {
  case_result r;
  r.test.pattern = pattern_kind::stream_uni;
  r.status = s;
  if (s == case_status::ok) r.bandwidth_Bps = bandwidth{Bps, Bps};
  return r;
}

TEST(MeshOutliers, SlowAndFailedPairs) {
  std::vector<pair_result> pairs;
  for (int i = 0; i < 6; ++i) pairs.push_back(pair_result{{0, i + 1}, {bw(10e9)}, {}, "ok"});
  pairs[2].results = {bw(3e9)};                          // below half the median
  pairs[4].results = {bw(0, case_status::unreachable)};  // failed
  const auto out = find_outliers(pairs, {});
  EXPECT_EQ(out, (std::vector<std::size_t>{2, 4}));
  const nlohmann::json m = mesh_matrices(7, {"a", "b", "c", "d", "e", "f", "g"}, pairs);
  EXPECT_DOUBLE_EQ(m["bandwidth_Bps"][0][1].get<double>(), 10e9);
  EXPECT_TRUE(m["bandwidth_Bps"][0][5].is_null());  // unreachable: no figure
  EXPECT_TRUE(m["bandwidth_Bps"][1][0].is_null());  // not measured that way
}

// One direction of one link degraded: found once, naming the slow direction; symmetric links
// and a link measured one way only are not findings.
// A case whose processes waited for a CPU `waited` of the time (the noise meter's block).
case_result noisy_bw(double Bps, double waited) {
  case_result r = bw(Bps);
  r.host_noise = {{"noisy", true},
                  {"why", "the client was descheduled"},
                  {"client", {{"descheduled_share", waited}, {"steal_share", nullptr}}}};
  return r;
}

// The mesh on a busy host: a pair slow for want of a CPU is never a slow link. What its
// wait cannot explain still is.
TEST(MeshOutliers, APairThatWaitedForACpuIsNoisyNotSlow) {
  std::vector<pair_result> pairs;
  for (int i = 0; i < 6; ++i) pairs.push_back(pair_result{{0, i + 1}, {bw(10e9)}, {}, "ok"});
  pairs[2].results = {noisy_bw(1e9, 0.9)};  // an outlier in its round
  // Alone: 10x slower while waiting 90% of the time: the wait explains it.
  EXPECT_EQ(retest_verdict(pairs, 2, {noisy_bw(1e9, 0.9)}, {}), "noisy");
  // Alone: 10x slower but waiting only 20%: a slow link all the same.
  EXPECT_EQ(retest_verdict(pairs, 2, {noisy_bw(1e9, 0.2)}, {}), "slow link");
  // Alone and quiet: slow link; alone at full speed: contention.
  EXPECT_EQ(retest_verdict(pairs, 2, {bw(1e9)}, {}), "slow link");
  EXPECT_EQ(retest_verdict(pairs, 2, {noisy_bw(9e9, 0.5)}, {}), "contention");
  // A ping-pong outlier that waited at all: noisy (the wait inflates a round trip without bound).
  case_result lat;
  lat.test.pattern = pattern_kind::pingpong;
  lat.status = case_status::ok;
  sample_stats st;
  st.p50 = 5e-6;
  lat.latency_s = st;
  std::vector<pair_result> pp;
  for (int i = 0; i < 4; ++i) pp.push_back(pair_result{{0, i + 1}, {lat}, {}, "ok"});
  case_result slow_lat = lat;
  slow_lat.latency_s->p50 = 500e-6;
  slow_lat.host_noise = {{"noisy", true}, {"client", {{"descheduled_share", 0.06}}}};
  pp[1].results = {slow_lat};
  EXPECT_EQ(retest_verdict(pp, 1, {slow_lat}, {}), "noisy");
  const pair_noise n = noise_of({slow_lat});
  EXPECT_TRUE(n.noisy);
  EXPECT_DOUBLE_EQ(n.waited, 0.06);
  EXPECT_FALSE(noise_of({lat}).noisy);
}

// A direction that is slower only by what its processes waited for a CPU is not an asymmetric
// link; one that its wait cannot explain is.
TEST(MeshAsymmetry, ADirectionThatWaitedForACpuIsCreditedTheWait) {
  const std::vector<std::string> names{"a", "b"};
  std::vector<pair_result> pairs{{{0, 1}, {noisy_bw(0.3e9, 0.7)}, {}, "ok"},
                                 {{1, 0}, {bw(0.96e9)}, {}, "ok"}};
  EXPECT_TRUE(find_asymmetric(names, pairs, {}).empty());  // 0.3 / 0.3 = 1.0 GB/s credited
  pairs[0].results = {noisy_bw(0.1e9, 0.2)};               // 0.125 credited: still degraded
  EXPECT_EQ(find_asymmetric(names, pairs, {}).size(), 1U);
  // Starved (waited 80%, the other direction quiet): 24x slower and the credit (5x) would not cover
  // it, but a direction that waited most of its time measured the CPU. Both directions as busy:
  // the host explains no difference between them, and the link is judged.
  pairs[0].results = {noisy_bw(0.04e9, 0.8)};
  EXPECT_TRUE(find_asymmetric(names, pairs, {}).empty());
  pairs[1].results = {noisy_bw(0.96e9, 0.7)};
  EXPECT_EQ(find_asymmetric(names, pairs, {}).size(), 1U);
}

TEST(MeshOutliers, OversubscribedAndCpuLimitedNodesAreNamed) {
  const auto host = [](const char* name, unsigned cpus, nlohmann::json quota) {
    return nlohmann::json{{"hostname", name},
                          {"cpus", cpus},
                          {"process", {{"cpus_usable", cpus}, {"cpu_quota", quota}}}};
  };
  // Four ranks on a 2-core host.
  const std::string four = oversubscription(
      {"a:1", "a:2", "a:3", "a:4"},
      {host("a", 2, nullptr), host("a", 2, nullptr), host("a", 2, nullptr), host("a", 2, nullptr)});
  EXPECT_NE(four.find("a is oversubscribed: 4 nodes measure at once on 2 CPU(s)"),
            std::string::npos)
      << four;
  // One pod limited to 500m.
  const std::string pod =
      oversubscription({"n1", "n2"}, {host("n1", 8, nullptr), host("n2", 8, 0.5)});
  EXPECT_NE(pod.find("n2 is CPU-limited: its process may use 0.5 CPU"), std::string::npos) << pod;
  EXPECT_EQ(pod.find("n1 is"), std::string::npos) << pod;
  // Neither: says so.
  EXPECT_NE(oversubscription({"n1", "n2"}, {host("n1", 8, 2.0), host("n2", 8, nullptr)})
                .find("no node is CPU-limited"),
            std::string::npos);
}

TEST(MeshAsymmetry, OneDegradedDirectionIsAFinding) {
  std::vector<pair_result> pairs{{{0, 1}, {bw(0.02e9)}, {}, "slow link"},
                                 {{1, 0}, {bw(2.0e9)}, {}, "ok"},
                                 {{0, 2}, {bw(2.1e9)}, {}, "ok"},
                                 {{2, 0}, {bw(1.9e9)}, {}, "ok"},
                                 {{1, 2}, {bw(1.5e9)}, {}, "ok"}};
  const std::vector<std::string> names{"node1.cluster.example", "node2.cluster.example", "n3"};
  auto f = find_asymmetric(names, pairs, {});
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].side, "node1.cluster.example,node2.cluster.example");
  EXPECT_NE(f[0].problem.find("node1.cluster.example -> node2.cluster.example 0.020 GB/s"),
            std::string::npos)
      << f[0].problem;
  EXPECT_NE(f[0].fix.find("from node1.cluster.example to node2.cluster.example"),
            std::string::npos);
  // Both directions of the asymmetric link are measured again alone (and the slow outlier).
  EXPECT_EQ(find_retests(pairs, {}), (std::vector<std::size_t>{0, 1}));
  // The retest stands for the pair where there was one: fine alone, no finding.
  pairs[0].retest = {bw(1.95e9)};
  EXPECT_TRUE(find_asymmetric(names, pairs, {}).empty());
  // Latency: one direction 5x the other.
  case_result fast, slow;
  fast.test.pattern = slow.test.pattern = pattern_kind::pingpong;
  fast.latency_s = sample_stats{};
  fast.latency_s->p50 = 10e-6;
  slow.latency_s = sample_stats{};
  slow.latency_s->p50 = 50e-6;
  f = find_asymmetric(names, {{{1, 2}, {slow}, {}, "ok"}, {{2, 1}, {fast}, {}, "ok"}}, {});
  ASSERT_EQ(f.size(), 1U);
  EXPECT_NE(f[0].problem.find("latency"), std::string::npos);
  EXPECT_NE(f[0].fix.find("from node2.cluster.example to n3"), std::string::npos) << f[0].fix;
}

nlohmann::json host(std::vector<std::tuple<std::string, std::string, unsigned>> ifs) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, addr, mtu] : ifs) {
    list.push_back({{"name", name},
                    {"up", true},
                    {"running", true},
                    {"loopback", false},
                    {"mtu_bytes", mtu},
                    {"speed_Mbps", nullptr},
                    {"mac", ""},
                    {"addresses", {{{"family", "ipv4"}, {"address", addr}, {"prefix_len", 24}}}}});
  }
  return {{"interfaces", list}};
}

TEST(MeshNodes, TheSpareServerStandsOut) {
  const std::vector<std::string> names{"n1", "n2", "n3"};
  const std::vector<nlohmann::json> hosts{host({{"eth0", "10.90.0.1", 1500}}),
                                          host({{"eth1", "10.90.0.2", 9000}}),
                                          host({{"eth0", "10.90.0.3", 1500}})};
  const std::vector<nlohmann::json> envs{
      {{"NCCL_SOCKET_IFNAME", "eth0"}, {"GLOO_SOCKET_IFNAME", "eth0"}},
      {{"NCCL_SOCKET_IFNAME", "eth0"}},
      {{"NCCL_SOCKET_IFNAME", "eth0"}, {"GLOO_SOCKET_IFNAME", "eth0"}}};
  const auto f = compare_nodes(names, hosts, envs);
  const auto has = [&](const std::string& side, const std::string& subject,
                       const std::string& text) {
    return std::any_of(f.begin(), f.end(), [&](const finding& x) {
      return x.side == side && x.subject == subject && x.problem.find(text) != std::string::npos;
    });
  };
  EXPECT_TRUE(has("n2", "NCCL_SOCKET_IFNAME", "names no interface of n2"))
      << nlohmann::json(f).dump(1);
  EXPECT_TRUE(has("n2", "interfaces", "eth0 exists on n1,n3 but not on n2"));
  EXPECT_TRUE(has("pair", "GLOO_SOCKET_IFNAME", "(unset) on n2"));
  EXPECT_TRUE(has("pair", "MTU", "10.90.0.0/24"));
  EXPECT_FALSE(has("n1", "NCCL_SOCKET_IFNAME", ""));
}

// Each node's libnccl.so.2 answer (host facts' "nccl"): the node whose NCCL takes an interface on
// a network no other node is on, or loopback, stands out; so do versions that differ.
TEST(MeshNodes, NcclsOwnInterfaceOnEachNode) {
  const std::vector<std::string> names{"n1", "n2", "n3"};
  std::vector<nlohmann::json> hosts{host({{"eth0", "10.90.0.1", 1500}}),
                                    host({{"eth0", "10.90.0.2", 1500}, {"ib0", "10.87.0.2", 1500}}),
                                    host({{"eth0", "10.90.0.3", 1500}})};
  const auto answer = [](const std::string& version, const std::string& iface,
                         const std::string& address) {
    return nlohmann::json{{"answers",
                           {{{"library", "/usr/lib/libnccl.so.2"},
                             {"version", version},
                             {"ran", true},
                             {"ok", true},
                             {"iface", iface},
                             {"address", address}}}}};
  };
  hosts[0]["nccl"] = answer("2.28.9", "eth0", "10.90.0.1");
  hosts[1]["nccl"] = answer("2.28.9", "ib0", "10.87.0.2");
  hosts[2]["nccl"] = answer("2.18.3", "lo", "127.0.0.1");
  const std::vector<nlohmann::json> envs(3, nlohmann::json::object());
  const auto f = compare_nodes(names, hosts, envs);
  const auto find = [&](const std::string& side, const std::string& text) {
    return std::find_if(f.begin(), f.end(), [&](const finding& x) {
      return x.side == side && x.problem.find(text) != std::string::npos;
    });
  };
  ASSERT_NE(find("n2", "takes ib0:10.87.0.2"), f.end()) << nlohmann::json(f).dump(1);
  EXPECT_EQ(find("n2", "takes ib0")->severity, severity::fragile);
  EXPECT_NE(find("n2", "no interface of n1,n3 is on its subnet"), f.end());
  ASSERT_NE(find("n3", "NCCL 2.18.3 (/usr/lib/libnccl.so.2) takes lo:127.0.0.1"), f.end());
  EXPECT_EQ(find("n3", "takes lo")->severity, severity::fails);
  EXPECT_EQ(find("n1", "takes"), f.end());
  EXPECT_NE(find("pair", "2.18.3 on n3; 2.28.9 on n1,n2"), f.end());
}

}  // namespace
}  // namespace pairperf
