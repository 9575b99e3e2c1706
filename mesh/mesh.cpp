#include "mesh/mesh.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "core/errors.h"
#include "core/stats.h"
#include "core/units.h"
#include "host/noise.h"

namespace pairperf {
namespace {

// Greedy rounds: each pair goes into the first round where neither node is busy.
std::vector<mesh_round> pack_rounds(const std::vector<node_pair>& pairs) {
  std::vector<mesh_round> rounds;
  std::vector<std::set<int>> busy;
  for (const auto& p : pairs) {
    std::size_t r = 0;
    while (r < rounds.size() && (busy[r].count(p.client) > 0 || busy[r].count(p.server) > 0)) ++r;
    if (r == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back();
    }
    rounds[r].push_back(p);
    busy[r].insert(p.client);
    busy[r].insert(p.server);
  }
  return rounds;
}

bool failed(const std::vector<case_result>& rs) {
  return rs.empty() || std::any_of(rs.begin(), rs.end(), [](const case_result& r) {
           return r.status == case_status::error || r.status == case_status::unreachable;
         });
}

}  // namespace

mesh_pattern parse_mesh_pattern(const std::string& text) {
  if (text == "all-pairs") return mesh_pattern::all_pairs;
  if (text == "ring") return mesh_pattern::ring;
  if (text == "one-to-all") return mesh_pattern::one_to_all;
  throw usage_error(fmt::format("unknown --pattern '{}' (all-pairs, ring, one-to-all)", text));
}

const char* to_string(mesh_pattern p) noexcept {
  switch (p) {
    case mesh_pattern::all_pairs:
      return "all-pairs";
    case mesh_pattern::ring:
      return "ring";
    case mesh_pattern::one_to_all:
      return "one-to-all";
  }
  return "?";
}

namespace {

std::vector<mesh_round> one_direction(int nodes, mesh_pattern pattern) {
  std::vector<mesh_round> rounds;
  if (nodes < 2) return rounds;
  if (pattern == mesh_pattern::all_pairs) {
    // The circle method: node 0 stays, the others rotate; an odd count gets an idle slot.
    const int n = nodes % 2 == 0 ? nodes : nodes + 1;
    std::vector<int> ring(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) ring[static_cast<std::size_t>(i)] = i;
    for (int r = 0; r < n - 1; ++r) {
      mesh_round round;
      for (int i = 0; i < n / 2; ++i) {
        const int a = ring[static_cast<std::size_t>(i)];
        const int b = ring[static_cast<std::size_t>(n - 1 - i)];
        if (a >= nodes || b >= nodes) continue;  // the idle slot
        round.push_back(node_pair{std::min(a, b), std::max(a, b)});
      }
      std::sort(round.begin(), round.end(),
                [](const node_pair& x, const node_pair& y) { return x.client < y.client; });
      rounds.push_back(std::move(round));
      std::rotate(ring.begin() + 1, ring.end() - 1, ring.end());
    }
    return rounds;
  }
  std::vector<node_pair> pairs;
  if (pattern == mesh_pattern::ring) {
    for (int i = 0; i < nodes; ++i) {
      const int j = (i + 1) % nodes;
      if (nodes == 2 && i == 1) break;  // two nodes: one pair
      pairs.push_back(node_pair{i, j});
    }
  } else {
    for (int j = 1; j < nodes; ++j) pairs.push_back(node_pair{0, j});
  }
  return pack_rounds(pairs);
}

}  // namespace

std::vector<mesh_round> mesh_schedule(int nodes, mesh_pattern pattern, bool both_directions) {
  std::vector<mesh_round> rounds = one_direction(nodes, pattern);
  if (!both_directions) return rounds;
  // The reverse of each round is itself a round of disjoint pairs; a pair the pattern already
  // measures both ways (a ring of two) is not measured twice.
  std::set<std::pair<int, int>> planned;
  for (const auto& r : rounds) {
    for (const auto& p : r) planned.emplace(p.client, p.server);
  }
  const std::size_t forward = rounds.size();
  for (std::size_t i = 0; i < forward; ++i) {
    mesh_round back;
    for (const auto& p : rounds[i]) {
      if (planned.count({p.server, p.client}) == 0) back.push_back(node_pair{p.server, p.client});
    }
    if (!back.empty()) rounds.push_back(std::move(back));
  }
  return rounds;
}

namespace {

// How the two directions of a link differ beyond the rule, in words ("" when they do not), and
// whether a -> b is the slow one. `final`: the retest where there was one, else the first figures.
struct asymmetry {
  std::vector<std::string> what;
  bool slow_out = false;
};

asymmetry asymmetry_of(const pair_result& there, const pair_result& back, const outlier_rule& rule,
                       bool final, const std::function<std::string(int)>& name) {
  const auto& rs_there = final && !there.retest.empty() ? there.retest : there.results;
  const auto& rs_back = final && !back.retest.empty() ? back.retest : back.results;
  const int a = there.pair.client;
  const int b = there.pair.server;
  asymmetry out;
  const auto bw1 = pair_bandwidth(rs_there);
  const auto bw2 = pair_bandwidth(rs_back);
  // The final figures judge: a direction whose processes waited for a CPU is credited that wait
  // (its bandwidth over 1 - the share), and a noisy ping-pong judges no latency.
  const pair_noise n1 = final ? noise_of(rs_there) : pair_noise{};
  const pair_noise n2 = final ? noise_of(rs_back) : pair_noise{};
  const auto credited = [](double bw, const pair_noise& n) {
    return n.noisy ? bw / (1 - std::min(n.waited, 0.95)) : bw;
  };
  const bool there_slower = bw1 && bw2 && *bw1 < *bw2;
  // A slower direction whose processes waited for a CPU most of the time, far more than the other
  // direction's did, measured the CPU, not the link (a cgroup-throttled process waits more than
  // its share shows): no verdict. A host busy for both directions alike starves neither.
  const pair_noise& slow_noise = there_slower ? n1 : n2;
  const pair_noise& fast_noise = there_slower ? n2 : n1;
  const bool starved = slow_noise.waited >= 0.5 && slow_noise.waited - fast_noise.waited >= 0.25;
  if (bw1 && bw2 && !starved &&
      (there_slower ? credited(*bw1, n1) < rule.bw_fraction * *bw2
                    : credited(*bw2, n2) < rule.bw_fraction * *bw1)) {
    out.what.push_back(fmt::format("bandwidth {} -> {} {}, {} -> {} {} ({:.1f}x)", name(a), name(b),
                                   format_rate(*bw1, rate_unit::gb), name(b), name(a),
                                   format_rate(*bw2, rate_unit::gb),
                                   std::max(*bw1, *bw2) / std::max(std::min(*bw1, *bw2), 1.0)));
  }
  const auto l1 = pair_latency(rs_there);
  const auto l2 = pair_latency(rs_back);
  if (l1 && l2 && !n1.noisy && !n2.noisy &&
      std::max(*l1, *l2) > rule.lat_multiple * std::min(*l1, *l2)) {
    out.what.push_back(fmt::format("latency {} -> {} {}, {} -> {} {}", name(a), name(b),
                                   format_seconds(*l1), name(b), name(a), format_seconds(*l2)));
  }
  out.slow_out = bw1 && bw2 ? *bw1 < *bw2 : (l1 && l2 && *l1 > *l2);
  return out;
}

// Each link measured both ways once, as (index of a -> b, index of b -> a) with a < b.
std::vector<std::pair<std::size_t, std::size_t>> links(const std::vector<pair_result>& pairs) {
  std::map<std::pair<int, int>, std::size_t> by_direction;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    by_direction[{pairs[i].pair.client, pairs[i].pair.server}] = i;
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (const auto& [key, i] : by_direction) {
    if (key.first > key.second) continue;
    const auto it = by_direction.find({key.second, key.first});
    if (it != by_direction.end()) out.emplace_back(i, it->second);
  }
  return out;
}

}  // namespace

std::vector<std::size_t> find_retests(const std::vector<pair_result>& pairs,
                                      const outlier_rule& rule) {
  std::vector<std::size_t> out = find_outliers(pairs, rule);
  const auto number = [](int i) { return std::to_string(i); };
  for (const auto& [there, back] : links(pairs)) {
    if (asymmetry_of(pairs[there], pairs[back], rule, false, number).what.empty()) continue;
    out.push_back(there);
    out.push_back(back);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<finding> find_asymmetric(const std::vector<std::string>& names,
                                     const std::vector<pair_result>& pairs,
                                     const outlier_rule& rule) {
  const auto name = [&](int i) {
    return i >= 0 && static_cast<std::size_t>(i) < names.size() ? names[static_cast<std::size_t>(i)]
                                                                : std::to_string(i);
  };
  std::vector<finding> out;
  for (const auto& [there, back] : links(pairs)) {
    const asymmetry d = asymmetry_of(pairs[there], pairs[back], rule, true, name);
    if (d.what.empty()) continue;
    const int a = pairs[there].pair.client;
    const int b = pairs[there].pair.server;
    const std::string slow_from = d.slow_out ? name(a) : name(b);
    const std::string slow_to = d.slow_out ? name(b) : name(a);
    out.push_back(finding{
        fmt::format("{},{}", name(a), name(b)), "asymmetric link",
        fmt::format("one direction of the link is degraded: {}", fmt::join(d.what, "; ")),
        fmt::format("check the path from {} to {}: its transmit side (NIC, cable, bond member, "
                    "switch port, shaping or a qdisc on {}) and {}'s receive side",
                    slow_from, slow_to, slow_from, slow_to)});
  }
  return out;
}

std::optional<double> pair_bandwidth(const std::vector<case_result>& results) {
  std::optional<double> best;
  for (const auto& r : results) {
    const auto v = headline_of(r, headline::bandwidth);
    if (v && (!best || *v > *best)) best = v;
  }
  return best;
}

std::optional<double> pair_latency(const std::vector<case_result>& results) {
  for (const auto& r : results) {
    if (const auto v = headline_of(r, headline::latency_p50)) return v;
  }
  return std::nullopt;
}

std::vector<std::size_t> find_outliers(const std::vector<pair_result>& pairs,
                                       const outlier_rule& rule) {
  std::vector<double> bws, lats;
  for (const auto& p : pairs) {
    if (auto b = pair_bandwidth(p.results)) bws.push_back(*b);
    if (auto l = pair_latency(p.results)) lats.push_back(*l);
  }
  const double bw_median = median_of(bws);
  const double lat_min = lats.empty() ? 0 : *std::min_element(lats.begin(), lats.end());
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto& p = pairs[i];
    if (failed(p.results)) {
      out.push_back(i);
      continue;
    }
    const auto b = pair_bandwidth(p.results);
    const auto l = pair_latency(p.results);
    if ((b && bws.size() > 1 && *b < rule.bw_fraction * bw_median) ||
        (l && lats.size() > 1 && *l > rule.lat_multiple * lat_min))
      out.push_back(i);
  }
  return out;
}

pair_noise noise_of(const std::vector<case_result>& results) {
  pair_noise out;
  std::vector<std::string> why;
  for (const auto& r : results) {
    if (!is_noisy(r.host_noise)) continue;
    out.noisy = true;
    out.waited = std::max(out.waited, exposure_of(r.host_noise, r.iterations).waited);
    why.push_back(fmt::format("{} {}: {}", r.test.test, format_size(r.test.size_bytes),
                              noise_reason(r.host_noise)));
  }
  out.why = fmt::format("{}", fmt::join(why, "; "));
  return out;
}

std::string retest_verdict(std::vector<pair_result> pairs, std::size_t idx,
                           const std::vector<case_result>& alone, const outlier_rule& rule) {
  pairs.at(idx).results = alone;
  const auto again = find_outliers(pairs, rule);
  if (std::find(again.begin(), again.end(), idx) == again.end()) return "contention";
  const pair_noise noise = noise_of(alone);
  if (!noise.noisy || failed(alone)) return "slow link";
  std::vector<double> bws, lats;
  for (const auto& p : pairs) {
    if (auto b = pair_bandwidth(p.results)) bws.push_back(*b);
    if (auto l = pair_latency(p.results)) lats.push_back(*l);
  }
  const auto l = pair_latency(alone);
  if (l && lats.size() > 1 && *l > rule.lat_multiple * *std::min_element(lats.begin(), lats.end()))
    return "noisy";
  const auto b = pair_bandwidth(alone);
  // At most 95% of the time waiting: a pair that never ran says nothing either way.
  const double credited = b ? *b / (1 - std::min(noise.waited, 0.95)) : 0;
  return credited < rule.bw_fraction * median_of(bws) ? "slow link" : "noisy";
}

std::string oversubscription(const std::vector<std::string>& names,
                             const std::vector<nlohmann::json>& hosts) {
  struct host_load {
    std::size_t nodes = 0;
    double cpus = 0;  // the fewest any of its nodes' processes may use (affinity)
  };
  std::map<std::string, host_load> by_host;
  std::vector<std::string> why;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const nlohmann::json& h = hosts[i];
    if (!h.is_object()) continue;
    host_load& l = by_host[h.value("hostname", std::string("?"))];
    ++l.nodes;
    double cpus = h.value("cpus", 0.0);
    if (const auto p = h.find("process"); p != h.end() && p->is_object()) {
      if (const double usable = p->value("cpus_usable", 0.0); usable > 0) cpus = usable;
      // A measuring thread busy-polls: a process allowed less than one CPU waits for it.
      if (const auto q = p->find("cpu_quota"); q != p->end() && q->is_number() && *q < 1.0)
        why.push_back(fmt::format(
            "{} is CPU-limited: its process may use {:.3g} CPU (a cgroup CPU limit, such as a "
            "pod's resources.limits.cpu below 1)",
            i < names.size() ? names[i] : h.value("hostname", std::string("?")), q->get<double>()));
    }
    if (cpus > 0 && (l.cpus == 0 || cpus < l.cpus)) l.cpus = cpus;
  }
  for (const auto& [name, l] : by_host) {
    if (l.cpus > 0 && static_cast<double>(l.nodes) > l.cpus)
      why.push_back(
          fmt::format("{} is oversubscribed: {} nodes measure at once on {:.3g} CPU(s) "
                      "(more busy ranks than cores)",
                      name, l.nodes, l.cpus));
  }
  if (why.empty())
    return "no node is CPU-limited and no host runs more nodes than CPUs: another load or the "
           "hypervisor (steal) took the CPU; see each pair's noise";
  return fmt::format(
      "{}; give each rank a whole core (mpirun --map-by ppr:N:node with N the "
      "free cores, a CPU limit of at least 1 per pod)",
      fmt::join(why, "; "));
}

nlohmann::json mesh_matrices(int nodes, const std::vector<std::string>& names,
                             const std::vector<pair_result>& pairs) {
  const auto n = static_cast<std::size_t>(nodes);
  nlohmann::json bw = nlohmann::json::array(), lat = nlohmann::json::array(),
                 status = nlohmann::json::array();
  for (std::size_t i = 0; i < n; ++i) {
    bw.push_back(std::vector<nlohmann::json>(n, nullptr));
    lat.push_back(std::vector<nlohmann::json>(n, nullptr));
    status.push_back(std::vector<nlohmann::json>(n, nullptr));
  }
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : pairs) {
    const auto c = static_cast<std::size_t>(p.pair.client);
    const auto s = static_cast<std::size_t>(p.pair.server);
    const auto& final_results = p.retest.empty() ? p.results : p.retest;
    if (auto b = pair_bandwidth(final_results)) bw[c][s] = *b;
    if (auto l = pair_latency(final_results)) lat[c][s] = *l;
    status[c][s] = p.verdict;
    nlohmann::json item{{"client", p.pair.client},    {"server", p.pair.server},
                        {"client_name", names.at(c)}, {"server_name", names.at(s)},
                        {"verdict", p.verdict},       {"results", p.results}};
    if (!p.retest.empty()) item["retest"] = p.retest;
    const pair_noise noise = noise_of(final_results);
    item["noise"] = {{"noisy", noise.noisy}, {"waited_share", noise.waited}, {"why", noise.why}};
    list.push_back(std::move(item));
  }
  return {{"nodes", names},
          {"bandwidth_Bps", bw},
          {"latency_p50_s", lat},
          {"verdict", status},
          {"pairs", list},
          {"layout", "row = client (measures towards), column = server; null = not measured"}};
}

void print_matrix(std::FILE* out, const std::vector<std::string>& names,
                  const std::vector<pair_result>& pairs, bool latency) {
  const std::size_t n = names.size();
  std::vector<std::vector<std::string>> cell(n, std::vector<std::string>(n, "."));
  for (std::size_t i = 0; i < n; ++i) cell[i][i] = "-";
  for (const auto& p : pairs) {
    const auto& rs = p.retest.empty() ? p.results : p.retest;
    std::string text;
    if (p.verdict == "unreachable" || p.verdict == "error") {
      text = p.verdict == "unreachable" ? "UNREACH" : "ERROR";
    } else if (latency) {
      const auto l = pair_latency(rs);
      text = l ? format_seconds(*l) : "?";
    } else {
      const auto b = pair_bandwidth(rs);
      text = b ? fmt::format("{:.2f}", *b / 1e9) : "?";
    }
    if (p.verdict == "slow link") text += "!";
    if (p.verdict == "noisy") text += "~";
    cell[static_cast<std::size_t>(p.pair.client)][static_cast<std::size_t>(p.pair.server)] = text;
  }
  fmt::print(out, "\n{} (row: client, column: server{})\n",
             latency ? "Latency p50, one-way" : "Bandwidth, GB/s",
             latency ? "; ~ = noisy alone too" : "; ! = slow alone too, ~ = noisy alone too");
  // Names in full, never cut: the columns are as wide as the longest name.
  std::size_t width = 10;
  for (const auto& name : names) width = std::max(width, name.size());
  fmt::print(out, "  {:>{}}", "", width);
  for (const auto& name : names) fmt::print(out, " {:>{}}", name, width);
  fmt::print(out, "\n");
  for (std::size_t i = 0; i < n; ++i) {
    fmt::print(out, "  {:>{}}", names[i], width);
    for (std::size_t j = 0; j < n; ++j) fmt::print(out, " {:>{}}", cell[i][j], width);
    fmt::print(out, "\n");
  }
}

}  // namespace pairperf
