// gloo between every pair of a mesh's nodes. gloo's rule (libgloo 0.5.0, gloo/transport/tcp/
// pair.cc, Pair::connect): of each pair, the node whose gloo address sorts lower listens and the
// other connects to it. A node whose gloo address its peers cannot reach fails with exactly the
// peers that sort above it; with the others it connects out and works.
#include <fmt/format.h>

#include <array>
#include <map>
#include <optional>

#include "core/interfaces.h"
#include "host/pair.h"
#include "mesh/mesh.h"

namespace pairperf {
namespace {

// The first device's address (the one torch's first context, and its store-based barrier, use).
std::string address_of(const gloo_side& g) {
  return g.known && !g.devices.empty() ? g.devices.front().address : std::string();
}

// The mesh's figures between two nodes, either direction: true when some case between them
// worked, false when every one failed, nullopt when none ran.
std::optional<bool> pair_worked(const std::vector<pair_result>& pairs, int a, int b) {
  std::optional<bool> out;
  for (const auto& p : pairs) {
    if (!((p.pair.client == a && p.pair.server == b) || (p.pair.client == b && p.pair.server == a)))
      continue;
    for (const auto& r : p.retest.empty() ? p.results : p.retest) {
      if (r.status == case_status::skipped) continue;
      const bool ok = r.status == case_status::ok || r.status == case_status::fail;
      out = out.value_or(false) || ok;
    }
  }
  return out;
}

// The interface of a node that holds `address` ("" if none), from its host facts: for the address
// its peers reached its mesh server at, the interface to name in GLOO_SOCKET_IFNAME.
std::string iface_holding(const nlohmann::json& host, const std::string& address) {
  if (!host.is_object()) return {};
  for (const auto& i : host.value("interfaces", nlohmann::json::array())) {
    for (const auto& a : i.value("addresses", nlohmann::json::array())) {
      if (a.value("address", std::string()) == address) return i.value("name", std::string());
    }
  }
  return {};
}

// Who connects to whom under gloo's rule, and how each such connection went.
struct gloo_outcomes {
  std::map<int, std::vector<std::string>> failing;       // listener -> peers that fail to reach it
  std::map<int, std::vector<std::string>> connects_out;  // connector -> listeners it reaches
  std::map<int, bool> by_rule;  // listeners judged by the rule alone (gloo was not run)
};

// Every pair of nodes with comparable gloo addresses: the lower listens, the other connects
// (measured when the mesh ran gloo; else certain only where a loopback listener is on another
// host).
gloo_outcomes pair_outcomes(const std::vector<std::string>& names,
                            const std::vector<nlohmann::json>& hosts,
                            const std::vector<gloo_side>& sides,
                            const std::vector<pair_result>& pairs, bool measured) {
  gloo_outcomes o;
  const auto n = static_cast<int>(sides.size());
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const std::string ai = address_of(sides[static_cast<std::size_t>(i)]);
      const std::string aj = address_of(sides[static_cast<std::size_t>(j)]);
      const auto ki = gloo_order_key(ai);
      const auto kj = gloo_order_key(aj);
      if (!ki || !kj || ki == kj || ki->front() != kj->front()) continue;
      const int listener = *ki < *kj ? i : j;
      const int connector = listener == i ? j : i;
      const auto& la = listener == i ? ai : aj;
      std::optional<bool> works;
      if (measured) works = pair_worked(pairs, i, j);
      if (!works && !measured && is_loopback(la)) {
        // Certain by the rule: the connector reaches its own loopback, not the listener's.
        const bool one_net = compare_hosts(hosts[static_cast<std::size_t>(listener)],
                                           hosts[static_cast<std::size_t>(connector)])
                                 .same_net;
        if (!one_net) {
          works = false;
          o.by_rule[listener] = true;
        }
      }
      const bool loopback_connector =
          is_loopback(address_of(sides[static_cast<std::size_t>(connector)]));
      if (works == false) {
        o.failing[listener].push_back(names[static_cast<std::size_t>(connector)]);
      } else if (works == true || (!measured && loopback_connector)) {
        o.connects_out[connector].push_back(names[static_cast<std::size_t>(listener)]);
      }
    }
  }
  return o;
}

// The `fails` finding of a listener its peers cannot reach, with the interface to name.
finding unreached_listener(const std::vector<std::string>& names,
                           const std::vector<nlohmann::json>& hosts,
                           const std::vector<std::string>& reached_at,
                           const std::vector<gloo_side>& sides, gloo_outcomes& o, int node,
                           const std::vector<std::string>& peers) {
  const auto k = static_cast<std::size_t>(node);
  const std::string address = address_of(sides[k]);
  const std::string iface = iface_holding(hosts[k], address);
  const auto& out_to = o.connects_out[node];
  const std::string fix_iface = iface_holding(hosts[k], reached_at[k]);
  return finding{
      names[k], "GLOO_SOCKET_IFNAME",
      fmt::format("{}'s gloo address {} ({}; from {}) is not reached by {}: their gloo addresses "
                  "sort above it, so they must connect to it (gloo's rule: the lower address "
                  "listens, gloo/transport/tcp/pair.cc Pair::connect){}{}",
                  names[k], address, iface.empty() ? "loopback" : iface, sides[k].source,
                  fmt::join(peers, ", "),
                  out_to.empty() ? std::string()
                                 : fmt::format("; with {} it works only because their addresses "
                                               "sort below it and {} connects to them",
                                               fmt::join(out_to, ", "), names[k]),
                  o.by_rule.count(node) > 0
                      ? " (by gloo's rule; gloo's own connection was not run: "
                        "pairperf mesh --transport gloo runs it)"
                      : " (measured: gloo's own connection between the pairs)"),
      fix_iface.empty()
          ? fmt::format("on {}: set GLOO_SOCKET_IFNAME to the interface its peers reach", names[k])
          : fmt::format("on {}: GLOO_SOCKET_IFNAME={}", names[k], fix_iface),
      severity::fails};
}

}  // namespace

std::vector<finding> judge_gloo(const std::vector<std::string>& names,
                                const std::vector<nlohmann::json>& hosts,
                                const std::vector<std::string>& reached_at,
                                const std::vector<gloo_side>& sides,
                                const std::vector<pair_result>& pairs, bool measured) {
  gloo_outcomes o = pair_outcomes(names, hosts, sides, pairs, measured);
  std::vector<finding> out;
  for (const auto& [node, peers] : o.failing)
    out.push_back(unreached_listener(names, hosts, reached_at, sides, o, node, peers));
  // A loopback address that no peer had to connect to yet: the next node that sorts above it will.
  const auto n = static_cast<int>(sides.size());
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const std::string address = address_of(sides[k]);
    if (!is_loopback(address) || o.failing.count(i) > 0 || n < 2) continue;
    out.push_back(finding{
        names[k], "GLOO_SOCKET_IFNAME",
        fmt::format("{}'s gloo address is {} (from {}): every peer here sorts below it, so {} "
                    "connects to them; a node whose address sorts above it must connect to {} "
                    "and fails",
                    names[k], address, sides[k].source, names[k], address),
        fmt::format("on {}: set GLOO_SOCKET_IFNAME to the interface its peers reach", names[k]),
        severity::fragile});
  }
  return out;
}

}  // namespace pairperf
