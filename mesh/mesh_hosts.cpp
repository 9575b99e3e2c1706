// `pairperf mesh --hosts`: against pairperf servers that something else started (a Kubernetes
// DaemonSet, a systemd unit), this process drives the schedule, asking each round's client servers
// to measure towards their partners (the `drive` control message), all pairs of a round at once.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <variant>

#include "core/control.h"
#include "core/errors.h"
#include "core/interfaces.h"
#include "core/output.h"
#include "core/self_probe.h"
#include "core/socket.h"
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
    // A signal stops the hellos too: the nodes not asked have no facts, and their pairs are
    // not measured (mesh_hosts' gap()).
    if (const int sig = a.interrupted != nullptr ? a.interrupted->load() : 0; sig != 0) {
      node.note = fmt::format("not asked: stopped by {}", signal_name(sig));
      continue;
    }
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
    } catch (const server_stayed_busy& e) {
      node.busy = true;  // its pairs are not measured; the others' are
      node.note = e.what();
    } catch (const step_error& e) {
      node.note = e.what();
    }
  }
  name_nodes(nodes);
  return nodes;
}

// Why a pair was not measured, and the node it was for: one whose server stayed busy past
// --wait-busy, one that stopped answering after its hello (its process died, or this host lost
// its path to it), or none (a signal stopped the mesh).
struct pair_gap {
  enum class cause { busy, gone, signal };
  std::string why;
  int node = -1;
  cause kind = cause::signal;
};

// The schedule driven from this process: each pair a `drive` of its client's server towards its
// partner's server, the pairs of a round on threads of their own.
class host_driver {
 public:
  host_driver(const mesh_args& a, const mesh_plan& plan, const std::vector<endpoint>& servers,
              std::vector<mesh_node>& nodes)
      : m_a(a),
        m_plan(plan),
        m_servers(servers),
        m_nodes(nodes),
        m_wait(std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::duration<double>(plan.pair_bound_s + 10))) {}

  [[nodiscard]] int stop_signal() const {
    return m_a.interrupted != nullptr ? m_a.interrupted->load() : 0;
  }

  // A pair's result, or why it was not measured. Called from a round's threads: reads the
  // nodes, never changes them.
  [[nodiscard]] std::variant<pair_result, pair_gap> run_pair(const node_pair& p) const {
    if (auto why = gap(p)) return *why;
    const auto& client = m_nodes[static_cast<std::size_t>(p.client)];
    const auto& server = m_nodes[static_cast<std::size_t>(p.server)];
    if (!client.note.empty())
      return unreachable_pair(p, m_plan.cases, fmt::format("{}: {}", client.name, client.note), "");
    if (!server.note.empty())
      return unreachable_pair(p, m_plan.cases, fmt::format("{}: {}", server.name, server.note), "");
    client_options o;
    o.config = m_plan.config;
    o.cases = m_plan.cases;
    o.token = m_a.token;
    o.wait_busy = m_a.wait_busy;
    o.interrupted = m_a.interrupted;
    try {
      pair_result out{
          p,
          drive_remote(m_servers[static_cast<std::size_t>(p.client)],
                       m_servers[static_cast<std::size_t>(p.server)].to_string(), o, m_wait),
          {},
          "ok"};
      judge(out);
      return out;
    } catch (const server_stayed_busy& e) {
      return pair_gap{fmt::format("{}: {}", client.name, e.what()), p.client,
                      pair_gap::cause::busy};
    } catch (const step_error& e) {
      if (const int sig = stop_signal(); sig != 0)
        return pair_gap{fmt::format("stopped by {} while measured", signal_name(sig))};
      if (auto gone = stopped_answering(p, e)) return *gone;
      return unreachable_pair(p, m_plan.cases, e.what(),
                              e.sys_errno() != 0 ? errno_name(e.sys_errno()) : "");
    }
  }

  // One round, all its pairs at once: each measured pair to `pairs`, each not measured to
  // `gaps`. A node whose server stayed busy past the bound, or stopped answering, is marked so:
  // its later pairs are not waited for.
  void run_round(const mesh_round& round, std::vector<pair_result>& pairs, mesh_gaps& gaps) {
    std::vector<std::variant<pair_result, pair_gap>> got(round.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < round.size(); ++i)
      threads.emplace_back([&, i] { got[i] = run_pair(round[i]); });
    for (auto& t : threads) t.join();
    for (std::size_t i = 0; i < round.size(); ++i) {
      if (auto* measured = std::get_if<pair_result>(&got[i])) {
        pairs.push_back(std::move(*measured));
        continue;
      }
      const pair_gap& g = std::get<pair_gap>(got[i]);
      const bool gone = g.kind == pair_gap::cause::gone;
      gaps.pairs.push_back({round[i], g.why, gone});
      if (g.node < 0 || stop_signal() != 0) continue;
      auto& node = m_nodes[static_cast<std::size_t>(g.node)];
      if (node.busy || node.gone) continue;
      (gone ? node.gone : node.busy) = true;
      node.note = g.why.substr(node.name.size() + 2);
      if (gone)
        fmt::print(stderr,
                   "pairperf mesh: {} stopped answering in round {}: its pairs from now on are not "
                   "measured\n",
                   node.name, m_round);
    }
    ++m_round;
  }

  // The outliers' retests (find_retests), one pair at a time; `seconds` adds up their time. A
  // retest cut short says nothing: the first measurement stands.
  std::vector<pair_result> retest(const std::vector<pair_result>& pairs, double& seconds) const {
    std::vector<pair_result> out;
    for (const auto idx : find_retests(pairs, outlier_rule{m_a.retest_bw, m_a.retest_lat})) {
      const auto t0 = std::chrono::steady_clock::now();
      auto again = run_pair(pairs[idx].pair);
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (auto* measured = std::get_if<pair_result>(&again)) out.push_back(std::move(*measured));
    }
    return out;
  }

 private:
  // Why a pair is not measured: one of its servers stayed busy or stopped answering, or a
  // signal stopped the mesh.
  [[nodiscard]] std::optional<pair_gap> gap(const node_pair& p) const {
    for (const int i : {p.client, p.server}) {
      const auto& node = m_nodes[static_cast<std::size_t>(i)];
      if (node.busy || node.gone)
        return pair_gap{fmt::format("{}: {}", node.name, node.note), i,
                        node.gone ? pair_gap::cause::gone : pair_gap::cause::busy};
    }
    if (const int sig = stop_signal(); sig != 0)
      return pair_gap{fmt::format("stopped by {}", signal_name(sig))};
    return std::nullopt;
  }

  // After a pair failed with `e`: whether one of its nodes, which answered its hello, no longer
  // takes a control connection from this host (its server died, or the path to it did). Then the
  // pair says nothing about the link between the two: not measured, naming the node; otherwise
  // the failure is the pair's own (unreachable).
  [[nodiscard]] std::optional<pair_gap> stopped_answering(const node_pair& p,
                                                          const step_error& e) const {
    for (const int i : {p.client, p.server}) {
      const auto& node = m_nodes[static_cast<std::size_t>(i)];
      connect_options o;
      o.timeout = std::chrono::seconds(2);
      try {
        (void)connect_tcp(m_servers[static_cast<std::size_t>(i)], o,
                          where{"control connect", node.name, ""});
      } catch (const step_error& probe) {
        return pair_gap{fmt::format("{}: stopped answering after its hello (a control connection "
                                    "from here: {}; the pair had failed with: {})",
                                    node.name,
                                    probe.sys_errno() != 0 ? errno_name(probe.sys_errno())
                                                           : std::string(probe.what()),
                                    e.what()),
                        i, pair_gap::cause::gone};
      }
    }
    return std::nullopt;
  }

  const mesh_args& m_a;
  const mesh_plan& m_plan;
  const std::vector<endpoint>& m_servers;
  std::vector<mesh_node>& m_nodes;
  std::chrono::nanoseconds m_wait;  // the most a pair's drive may take
  std::size_t m_round = 1;          // the round run_round() runs next
};

}  // namespace

int mesh_hosts(const mesh_args& a, const std::vector<std::string>& argv) {
  const auto start = std::chrono::steady_clock::now();
  const int n = static_cast<int>(a.hosts.size());
  if (n < 2) throw usage_error("--hosts needs at least two servers");
  const mesh_plan plan = make_plan(a, n);
  if (!a.json.empty()) check_output(a.json);  // before the rounds, not after them
  std::vector<endpoint> servers;
  for (const auto& h : a.hosts) servers.push_back(parse_endpoint(h, default_control_port));
  std::vector<mesh_node> nodes = hello_nodes(a, plan, servers);
  host_driver driver(a, plan, servers, nodes);
  mesh_gaps gaps;
  std::vector<pair_result> pairs;
  std::vector<double> round_seconds;
  for (const auto& round : plan.schedule) {
    const auto t0 = std::chrono::steady_clock::now();
    driver.run_round(round, pairs, gaps);
    round_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    // Progress on stderr (the tables come at the end): a long mesh shows where it is.
    fmt::print(stderr, "pairperf mesh: round {} of {}: {} pair(s) in {:.1f} s\n",
               round_seconds.size(), plan.schedule.size(), round.size(), round_seconds.back());
  }
  std::vector<pair_result> retests;
  double retest_seconds = 0;
  if (!a.no_retest && driver.stop_signal() == 0) retests = driver.retest(pairs, retest_seconds);
  gaps.interrupted = driver.stop_signal();
  return finish_mesh(a, argv, plan, nodes, pairs, retests, round_seconds, retest_seconds, start,
                     gaps);
}

}  // namespace pairperf::mesh
