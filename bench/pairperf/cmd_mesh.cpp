// `pairperf mesh`: under mpirun/srun (cmd_mesh_mpi.cpp), or with --hosts against pairperf servers
// that something else started (a Kubernetes DaemonSet, a systemd unit): this process drives the
// schedule, asking each round's client servers to measure towards their partners (the `drive`
// control message), all pairs of a round at once.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/mesh_common.h"
#include "bench/pairperf/private_files.h"
#include "harness/client.h"
#include "harness/control.h"
#include "harness/errors.h"
#include "harness/interfaces.h"
#include "harness/output.h"

namespace pairperf::cli {
std::vector<std::string> hosts_from_name(const std::string& name_port) {
  const endpoint ep = parse_endpoint(name_port, default_control_port);
  std::vector<std::string> v4, v6;
  for (auto& address : name_addresses(ep.host))
    (address.find(':') == std::string::npos ? v4 : v6).push_back(std::move(address));
  std::vector<std::string>& chosen = v4.empty() ? v6 : v4;
  if (chosen.empty())
    throw usage_error(fmt::format("--hosts-from {}: the name resolves to no address", ep.host));
  std::sort(chosen.begin(), chosen.end());
  std::vector<std::string> hosts;
  for (const auto& address : chosen) hosts.push_back(endpoint{address, ep.port}.to_string());
  return hosts;
}

int mesh_hosts(const mesh_args& a, const std::vector<std::string>& argv) {
  const auto start = std::chrono::steady_clock::now();
  const int n = static_cast<int>(a.hosts.size());
  if (n < 2) throw usage_error("--hosts needs at least two servers");
  const mesh_plan plan = make_plan(a, n);
  if (!a.json.empty()) check_output(a.json);  // before the rounds, not after them
  const std::string token = a.token.resolve();
  std::vector<endpoint> servers;
  for (const auto& h : a.hosts) servers.push_back(parse_endpoint(h, default_control_port));
  // Each server's facts from its hello; one that does not answer keeps its pairs unreachable.
  std::vector<mesh_node> nodes(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto& node = nodes[static_cast<std::size_t>(i)];
    node.name = a.hosts[static_cast<std::size_t>(i)];
    client_options o;
    o.server = servers[static_cast<std::size_t>(i)];
    o.config = plan.config;
    o.token = token;
    collecting_reporter ctx;
    try {
      run_client(o, ctx);
      node.host = ctx.context.value("server", nlohmann::json::object());
      node.env = ctx.context.value("env", nlohmann::json::object())
                     .value("server", nlohmann::json::object());
      node.name = node.host.value("hostname", node.name);
      node.address = ctx.context.value("server_ip", o.server.host);
      node.port = o.server.port;
    } catch (const step_error& e) {
      node.note = e.what();
    }
  }
  name_nodes(nodes);
  const auto wait = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(plan.pair_bound_s + 10));
  const auto run_pair = [&](const node_pair& p) {
    const auto& client = nodes[static_cast<std::size_t>(p.client)];
    const auto& server = nodes[static_cast<std::size_t>(p.server)];
    if (!client.note.empty())
      return unreachable_pair(p, plan.cases, fmt::format("{}: {}", client.name, client.note), "");
    if (!server.note.empty())
      return unreachable_pair(p, plan.cases, fmt::format("{}: {}", server.name, server.note), "");
    client_options o;
    o.config = plan.config;
    o.cases = plan.cases;
    o.token = token;
    try {
      pair_result out{
          p,
          drive_remote(servers[static_cast<std::size_t>(p.client)],
                       servers[static_cast<std::size_t>(p.server)].to_string(), o, wait),
          {},
          "ok"};
      judge(out);
      return out;
    } catch (const step_error& e) {
      return unreachable_pair(p, plan.cases, e.what(),
                              e.sys_errno() != 0 ? errno_name(e.sys_errno()) : "");
    }
  };
  std::vector<pair_result> pairs;
  std::vector<double> round_seconds;
  for (const auto& round : plan.schedule) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<pair_result> got(round.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < round.size(); ++i)
      threads.emplace_back([&, i] { got[i] = run_pair(round[i]); });
    for (auto& t : threads) t.join();
    pairs.insert(pairs.end(), got.begin(), got.end());
    round_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<pair_result> retests;
  double retest_seconds = 0;
  if (!a.no_retest) {
    for (const auto idx : find_retests(pairs, outlier_rule{a.retest_bw, a.retest_lat})) {
      const auto t0 = std::chrono::steady_clock::now();
      retests.push_back(run_pair(pairs[idx].pair));
      retest_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  return finish_mesh(a, argv, plan, nodes, pairs, retests, round_seconds, retest_seconds, start);
}

command add_mesh(CLI::App& root, const std::vector<std::string>& argv) {
  auto a = std::make_shared<mesh_args>();
  CLI::App* app = root.add_subcommand(
      "mesh",
      "All pairs of many nodes: under mpirun/srun (`mpirun -np N pairperf mesh`), or --hosts "
      "against pairperf servers already running. n x n bandwidth and latency matrices, outliers "
      "retested alone, interface and variable differences between nodes");
  CLI::Option* hosts =
      app->add_option("--hosts", a->hosts, "Servers host[:port] to mesh, instead of MPI ranks")
          ->delimiter(',');
  app->add_option("--hosts-from", a->hosts_from,
                  "NAME[:PORT]: every address NAME resolves to is a server (a Kubernetes headless "
                  "Service in front of the pairperf-server DaemonSet)")
      ->excludes(hosts);
  app->add_option("-t,--transport", a->transport, "Transport for every pair")
      ->capture_default_str();
  app->add_option("--test", a->tests,
                  "Tests (default: the transport's bandwidth and latency tests)")
      ->delimiter(',');
  app->add_option("-s,--sizes", a->sizes,
                  "Message sizes (default: 1M for bandwidth, 8 for latency)");
  app->add_option(
      "-i,--iface", a->iface,
      "The data interface on every node (MPI: its address serves; every pair binds to it)");
  app->add_option("--pattern", a->pattern, "all-pairs, ring or one-to-all")->capture_default_str();
  app->add_option("-d,--duration", a->duration, "Time budget per case")->capture_default_str();
  app->add_flag("--no-retest", a->no_retest, "Do not rerun outliers alone");
  app->add_flag("--one-way", a->one_way,
                "Measure each pair in one direction only (half the rounds; an asymmetric link, "
                "one direction degraded, then goes unseen)");
  app->add_option("--retest-bw", a->retest_bw,
                  "Outlier: bandwidth below this fraction of the median")
      ->capture_default_str();
  app->add_option("--retest-lat", a->retest_lat,
                  "Outlier: latency above this multiple of the minimum")
      ->capture_default_str();
  app->add_option("--expect", a->expect, "Check every pair's cases (as for run)");
  app->add_option("--json", a->json, "Results file (schema pairperf.mesh)");
  app->add_option("--timeout-connect", a->t_connect, "Bound on each connection attempt")
      ->capture_default_str();
  app->add_option("--timeout-case", a->t_case, "Bound on each phase of a case")
      ->capture_default_str();
  app->add_option("--deadline", a->deadline,
                  "MPI: abort the whole job after this long (default: from the timeouts)");
  a->token.add(app, "--hosts: the token the servers require");
  return command{app, [a, argv] {
                   if (!a->hosts_from.empty()) a->hosts = hosts_from_name(a->hosts_from);
                   if (!a->hosts.empty()) return mesh_hosts(*a, argv);
#if PAIRPERF_HAVE_MPI
                   return mesh_mpi(*a, argv);
#else
                   // The MPI mesh is its own binary (package pairperf-mpi): hand over to it.
                   if (const std::string mpi = find_private_file("pairperf-mpi"); !mpi.empty()) {
                     std::vector<std::string> args = argv;
                     args.at(0) = mpi;
                     exec_program(std::move(args));
                     throw std::runtime_error(fmt::format("cannot run {}: {}", mpi,
                                                          std::strerror(errno)));
                   }
                   throw usage_error(
                       "this pairperf has no MPI mesh: install pairperf-mpi (Debian package) or "
                       "build with -DPAIRPERF_WITH_MPI=ON, or give --hosts (servers already "
                       "running)");
#endif
                 }};
}

}  // namespace pairperf::cli
