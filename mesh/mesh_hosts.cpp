// `pairperf mesh --hosts`: against pairperf servers that something else started (a Kubernetes
// DaemonSet, a systemd unit), this process drives the schedule, asking each round's client servers
// to measure towards their partners (the `drive` control message), all pairs of a round at once.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <thread>

#include "core/control.h"
#include "core/errors.h"
#include "core/interfaces.h"
#include "core/output.h"
#include "harness/client.h"
#include "mesh/mesh_common.h"

namespace pairperf::mesh {

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

namespace {

// Each server's facts from its hello; one that does not answer keeps its pairs unreachable
// (its note says why).
std::vector<mesh_node> hello_nodes(const mesh_args& a, const mesh_plan& plan,
                                   const std::vector<endpoint>& servers) {
  std::vector<mesh_node> nodes(servers.size());
  for (std::size_t i = 0; i < servers.size(); ++i) {
    auto& node = nodes[i];
    node.name = a.hosts[i];
    client_options o;
    o.server = servers[i];
    o.config = plan.config;
    o.token = a.token;
    o.wait_busy = a.wait_busy;
    o.nccl_budget = std::chrono::seconds(5);  // each server asks its own libnccl.so.2
    collecting_reporter ctx;
    try {
      run_client(o, ctx);
      node.host = ctx.context.value("server", nlohmann::json::object());
      node.env = ctx.context.value("env", nlohmann::json::object())
                     .value("server", nlohmann::json::object());
      node.libraries = ctx.context.value("server_tool", nlohmann::json::object())
                           .value("libraries", nlohmann::json::object());
      node.name = node.host.value("hostname", node.name);
      node.address = ctx.context.value("server_ip", o.server.host);
      node.port = o.server.port;
    } catch (const server_stayed_busy&) {
      throw;  // the mesh cannot be judged: it ends, inconclusive
    } catch (const step_error& e) {
      node.note = e.what();
    }
  }
  name_nodes(nodes);
  return nodes;
}

}  // namespace

int mesh_hosts(const mesh_args& a, const std::vector<std::string>& argv) {
  const auto start = std::chrono::steady_clock::now();
  const int n = static_cast<int>(a.hosts.size());
  if (n < 2) throw usage_error("--hosts needs at least two servers");
  const mesh_plan plan = make_plan(a, n);
  if (!a.json.empty()) check_output(a.json);  // before the rounds, not after them
  const std::string& token = a.token;
  std::vector<endpoint> servers;
  for (const auto& h : a.hosts) servers.push_back(parse_endpoint(h, default_control_port));
  std::vector<mesh_node> nodes = hello_nodes(a, plan, servers);
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
    o.wait_busy = a.wait_busy;
    try {
      pair_result out{
          p,
          drive_remote(servers[static_cast<std::size_t>(p.client)],
                       servers[static_cast<std::size_t>(p.server)].to_string(), o, wait),
          {},
          "ok"};
      judge(out);
      return out;
    } catch (const server_stayed_busy&) {
      throw;
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
    std::vector<std::exception_ptr> busy(round.size());
    for (std::size_t i = 0; i < round.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          got[i] = run_pair(round[i]);
        } catch (const server_stayed_busy&) {
          busy[i] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& e : busy) {
      if (e) std::rethrow_exception(e);
    }
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

}  // namespace pairperf::mesh
