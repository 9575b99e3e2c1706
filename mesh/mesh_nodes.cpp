// The nodes' facts compared (mesh.h compare_nodes): interfaces some nodes lack, MTUs that differ
// within a subnet, and the libraries' variables that differ or name an interface a node lacks.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "core/interfaces.h"
#include "core/units.h"
#include "host/netvars.h"
#include "mesh/mesh.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

using node_interfaces = std::vector<std::vector<interface_info>>;

// The variables that must agree between nodes: the libraries' own (the registry's: UCX_TLS,
// UCX_NET_DEVICES), then NCCL's and Gloo's interfaces and NCCL's RDMA devices.
std::vector<std::string> mesh_variables() {
  auto out = transport_registry::instance().library_variables();
  for (const char* v : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA"})
    out.emplace_back(v);
  return out;
}

std::string value_or_unset(const nlohmann::json& env, const std::string& var) {
  const auto it = env.find(var);
  return it != env.end() && it->is_string() ? it->get<std::string>() : "(unset)";
}

// Each node's interfaces that are up, have an address and are not loopback.
node_interfaces usable_interfaces_of(std::size_t n, const std::vector<nlohmann::json>& hosts) {
  node_interfaces ifaces(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i >= hosts.size() || !hosts[i].contains("interfaces")) continue;
    for (const auto& j : hosts[i].at("interfaces")) {
      interface_info info = j.get<interface_info>();
      if (info.up && !info.loopback && !info.addresses.empty())
        ifaces[i].push_back(std::move(info));
    }
  }
  return ifaces;
}

// An interface name some nodes have and others lack: advice. Nodes may name their NICs
// differently and work; what breaks is a variable naming one a node lacks (variable_findings).
void interface_findings(const std::vector<std::string>& names, const node_interfaces& ifaces,
                        std::vector<finding>& out) {
  std::map<std::string, std::vector<std::string>> where;  // interface name -> nodes that have it
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (const auto& f : ifaces[i]) where[f.name].push_back(names[i]);
  }
  for (const auto& [iface, have] : where) {
    if (have.size() == names.size()) continue;
    std::vector<std::string> lack;
    for (const auto& name : names) {
      if (std::find(have.begin(), have.end(), name) == have.end()) lack.push_back(name);
    }
    out.push_back(finding{fmt::format("{}", fmt::join(lack, ",")), "interfaces",
                          fmt::format("interface {} exists on {} but not on {}", iface,
                                      fmt::join(have, ","), fmt::join(lack, ",")),
                          "configure the same interface names on every node, or set each node's "
                          "NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME / UCX_NET_DEVICES to its own",
                          severity::advice});
  }
}

// MTUs that differ within one IPv4 subnet.
void mtu_findings(const std::vector<std::string>& names, const node_interfaces& ifaces,
                  std::vector<finding>& out) {
  std::map<std::string, std::map<unsigned, std::vector<std::string>>>
      mtus;  // subnet -> mtu -> nodes
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (const auto& f : ifaces[i]) {
      for (const auto& a : f.addresses) {
        if (a.family != 2 /* AF_INET */) continue;
        unsigned b[4] = {};
        if (std::sscanf(a.address.c_str(), "%u.%u.%u.%u", &b[0], &b[1], &b[2], &b[3]) != 4)
          continue;
        const std::uint32_t ip = (b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
        const std::uint32_t mask = a.prefix_len == 0 ? 0 : ~std::uint32_t{0} << (32 - a.prefix_len);
        const std::uint32_t net = ip & mask;
        const std::string subnet = fmt::format("{}.{}.{}.{}/{}", net >> 24, (net >> 16) & 255,
                                               (net >> 8) & 255, net & 255, a.prefix_len);
        mtus[subnet][f.mtu].push_back(fmt::format("{}:{}", names[i], f.name));
      }
    }
  }
  for (const auto& [subnet, by_mtu] : mtus) {
    if (by_mtu.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [mtu, who] : by_mtu)
      parts.push_back(fmt::format("{} on {}", mtu, fmt::join(who, ",")));
    out.push_back(finding{"pair", "MTU",
                          fmt::format("MTU differs within {}: {}", subnet, fmt::join(parts, "; ")),
                          "set one MTU on every interface of the subnet"});
  }
}

// The interfaces a socket variable's value selects among `names_here`, as its library reads it:
// gloo's comma list of names, NCCL's prefix filter.
std::vector<std::string> selected_by(const std::string& var, const std::string& value,
                                     const std::vector<std::string>& names_here) {
  if (var != "GLOO_SOCKET_IFNAME") return nccl_select(parse_nccl_filter(value), names_here);
  std::vector<std::string> hit;
  for (const auto& x : split_list(value)) {
    if (std::find(names_here.begin(), names_here.end(), x) != names_here.end()) hit.push_back(x);
  }
  return hit;
}

// Variables that differ between nodes (advice: each value may be right for its node; which
// pairs fail is said by the findings on what each value selects, and gloo's by its rule), and
// socket variables that name no interface of a node (fails).
void variable_findings(const std::vector<std::string>& names, const node_interfaces& ifaces,
                       const std::vector<nlohmann::json>& envs, std::vector<finding>& out) {
  const std::size_t n = names.size();
  for (const auto& var : mesh_variables()) {
    std::map<std::string, std::vector<std::string>> values;
    for (std::size_t i = 0; i < n; ++i) {
      values[value_or_unset(i < envs.size() ? envs[i] : nlohmann::json::object(), var)].push_back(
          names[i]);
    }
    if (values.size() > 1) {
      std::vector<std::string> parts;
      for (const auto& [v, who] : values)
        parts.push_back(fmt::format("{}={} on {}", var, v, fmt::join(who, ",")));
      out.push_back(finding{
          "pair", var, fmt::format("{} differs between nodes: {}", var, fmt::join(parts, "; ")),
          "set it to each node's reaching interface on every node (pairperf doctor "
          "between two nodes names it)",
          severity::advice});
    }
    if (var != "NCCL_SOCKET_IFNAME" && var != "GLOO_SOCKET_IFNAME") continue;
    for (std::size_t i = 0; i < n && i < envs.size(); ++i) {
      const std::string v = value_or_unset(envs[i], var);
      if (v == "(unset)") continue;
      std::vector<std::string> names_here;
      names_here.reserve(ifaces[i].size());
      for (const auto& f : ifaces[i]) names_here.push_back(f.name);
      if (!selected_by(var, v, names_here).empty()) continue;
      out.push_back(finding{
          names[i], var,
          fmt::format("{}={} names no interface of {} (it has {})", var, v, names[i],
                      names_here.empty() ? std::string("none")
                                         : fmt::format("{}", fmt::join(names_here, ","))),
          fmt::format("on {}: set {} to the interface that reaches the others", names[i], var)});
    }
  }
}

// A node's interfaces from its host facts (none for a node that never answered: null facts).
std::vector<interface_info> interfaces_in(const nlohmann::json& host) {
  if (!host.is_object() || !host.contains("interfaces")) return {};
  return host.at("interfaces").get<std::vector<interface_info>>();
}

// Whether every node that answered runs in one network namespace of one host (boot id and the
// namespace's id alike): loopback then reaches them all.
bool one_network(const std::vector<nlohmann::json>& hosts) {
  std::set<std::string> places;
  for (const auto& h : hosts) {
    if (!h.is_object()) continue;
    const auto process = h.value("process", nlohmann::json::object());
    places.insert(process.value("boot_id", "?") + "/" +
                  process.value("namespaces", nlohmann::json::object()).value("net", "?"));
  }
  return places.size() == 1 && places.count("?/?") == 0;
}

// Whether `address` lies in a subnet of one of `node`'s interfaces.
bool on_a_subnet_of(const std::vector<interface_info>& node, const std::string& address) {
  return std::any_of(node.begin(), node.end(), [&](const interface_info& i) {
    return std::any_of(i.addresses.begin(), i.addresses.end(), [&](const iface_address& a) {
      return !is_link_local(a.address) && in_subnet(a, address);
    });
  });
}

// One node's NCCL answer judged against the others: an interface no other node can reach
// (loopback, down, link-local, or on a subnet where no other node has an address) and a library
// that finds no interface at all. NCCL's versions that differ between nodes are advice.
void nccl_findings(const std::vector<std::string>& names, const std::vector<nlohmann::json>& hosts,
                   std::vector<finding>& out) {
  std::map<std::string, std::vector<std::string>> versions;  // version -> nodes
  for (std::size_t i = 0; i < names.size() && i < hosts.size(); ++i) {
    if (!hosts[i].is_object() || !hosts[i].contains("nccl")) continue;
    const nccl_side side = nccl_side_from(hosts[i].at("nccl"));
    const auto mine = interfaces_in(hosts[i]);
    for (const auto& a : side.answers) {
      if (!a.ran) continue;
      versions[a.version].push_back(names[i]);
      const std::string who = fmt::format("NCCL {} ({})", a.version, a.library);
      const std::string fix = fmt::format(
          "on {}: NCCL_SOCKET_IFNAME=<the interface on the network the other nodes share>",
          names[i]);
      if (!a.ok) {
        const std::string said =
            fmt::format("{} finds no interface for its bootstrap: {}", who, a.error);
        // The variable's own finding (it names no interface here) gets NCCL's word as evidence.
        const auto named = std::find_if(out.begin(), out.end(), [&](const finding& f) {
          return f.side == names[i] && f.subject == "NCCL_SOCKET_IFNAME" &&
                 f.severity == severity::fails;
        });
        if (named != out.end()) {
          named->problem += fmt::format("; {} confirms it: {}", who, a.error);
        } else {
          out.push_back(finding{names[i], "NCCL_SOCKET_IFNAME",
                                fmt::format("on {}, {}", names[i], said), fix});
        }
        continue;
      }
      const auto info = std::find_if(mine.begin(), mine.end(),
                                     [&](const interface_info& x) { return x.name == a.iface; });
      std::string why;
      severity how = severity::fails;
      if (is_loopback(a.address) || (info != mine.end() && info->loopback)) {
        if (one_network(hosts)) continue;  // every node in this network namespace
        why = "loopback: no other node reaches it";
      } else if (info != mine.end() && (!info->up || !info->running)) {
        why = "the interface is down or has no carrier";
      } else if (is_link_local(a.address)) {
        why = "an IPv6 link-local address, which names no route to another node";
      } else {
        std::vector<std::string> apart;
        for (std::size_t k = 0; k < names.size() && k < hosts.size(); ++k) {
          if (k == i || !hosts[k].is_object()) continue;  // itself; a node that never answered
          if (!on_a_subnet_of(interfaces_in(hosts[k]), a.address)) apart.push_back(names[k]);
        }
        if (apart.empty()) continue;
        why = fmt::format("no interface of {} is on its subnet (reachable only through a router)",
                          fmt::join(apart, ","));
        how = severity::fragile;
      }
      out.push_back(finding{names[i], "NCCL_SOCKET_IFNAME",
                            fmt::format("on {}, {} takes {}:{} for its bootstrap: {}", names[i],
                                        who, a.iface, a.address, why),
                            fix, how});
    }
  }
  if (versions.size() > 1) {
    std::vector<std::string> parts;
    parts.reserve(versions.size());
    for (const auto& [v, who] : versions)
      parts.push_back(fmt::format("{} on {}", v, fmt::join(who, ",")));
    out.push_back(
        finding{"pair", "NCCL version",
                fmt::format("the nodes load different NCCL versions: {}", fmt::join(parts, "; ")),
                "run one NCCL version on every node (a job's ranks must match)", severity::advice});
  }
}

}  // namespace

std::vector<finding> compare_nodes(const std::vector<std::string>& names,
                                   const std::vector<nlohmann::json>& hosts,
                                   const std::vector<nlohmann::json>& envs) {
  std::vector<finding> out;
  const node_interfaces ifaces = usable_interfaces_of(names.size(), hosts);
  interface_findings(names, ifaces, out);
  mtu_findings(names, ifaces, out);
  variable_findings(names, ifaces, envs, out);
  nccl_findings(names, hosts, out);
  return out;
}

}  // namespace pairperf
