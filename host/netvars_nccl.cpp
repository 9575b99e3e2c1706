// NCCL's interface: the libraries' own answers on each side (host/nccl_probe.h), NCCL's rule where
// none answered, and what the doctor's reach probes say of the interface each takes.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <map>

#include "host/netvars.h"
#include "host/netvars_common.h"

namespace pairperf {
namespace {

using namespace netvars_detail;  // NOLINT: the checks' shared helpers

std::string env_text(const nlohmann::json& env, const char* name) {
  const auto it = env.find(name);
  return it != env.end() && it->is_string() ? it->get<std::string>() : std::string();
}

struct listed_address {
  const interface_info* iface;
  const iface_address* address;
};

// getifaddrs' order: every IPv4 address, interface by interface in ifindex order, then IPv6.
std::vector<listed_address> getifaddrs_order(const std::vector<interface_info>& sorted) {
  std::vector<listed_address> out;
  for (const int family : {AF_INET, AF_INET6}) {
    for (const auto& i : sorted) {
      for (const auto& a : i.addresses) {
        if (a.family == family) out.push_back({&i, &a});
      }
    }
  }
  return out;
}

std::vector<nccl_pick> find_interfaces(const std::vector<listed_address>& listed,
                                       const std::string& filter, int family, std::size_t max) {
  const nccl_filter f = parse_nccl_filter(filter);
  std::vector<nccl_pick> out;
  for (const auto& entry : listed) {
    const interface_info* iface = entry.iface;
    const iface_address* address = entry.address;
    if (out.size() >= max) break;
    if (!iface->running) continue;  // 2.28.3 on: IFF_RUNNING
    if (family != AF_UNSPEC && address->family != family) continue;
    if (address->family == AF_INET6 && address->address == "::1") continue;
    if (!nccl_matches(f, iface->name)) continue;
    const std::string& name = iface->name;
    const bool seen =
        std::any_of(out.begin(), out.end(), [&](const nccl_pick& p) { return p.iface == name; });
    if (!seen) out.push_back({iface->name, address->address});
  }
  return out;
}

// NCCL_COMM_ID's address ("10.0.0.1:5000", "[fd00::1]:5000"): its numeric host part, or "".
std::string comm_id_host(const std::string& comm_id) {
  std::string host = comm_id;
  if (!host.empty() && host.front() == '[') {
    host = host.substr(1, host.find(']') == std::string::npos ? host.npos : host.find(']') - 1);
  } else if (const auto colon = host.rfind(':'); colon != std::string::npos) {
    host.resize(colon);
  }
  std::array<unsigned char, 16> buf{};
  const bool numeric = inet_pton(AF_INET, host.c_str(), buf.data()) == 1 ||
                       inet_pton(AF_INET6, host.c_str(), buf.data()) == 1;
  return numeric ? host : std::string();
}

std::optional<nccl_pick> match_subnet(const std::vector<listed_address>& listed,
                                      const std::string& host) {
  if (host.empty()) return std::nullopt;
  for (const auto& [iface, address] : listed) {
    if (in_subnet(*address, host)) return nccl_pick{iface->name, address->address};
  }
  return std::nullopt;
}

std::vector<interface_info> by_index(std::vector<interface_info> v) {
  std::stable_sort(v.begin(), v.end(), [](const interface_info& a, const interface_info& b) {
    return a.index < b.index;
  });
  return v;
}

// Whether the peer reaches NCCL's interface on this side, by the doctor's probes.
std::pair<std::string, std::string> reach_of(const side_view& s, const std::string& iface,
                                             const std::string& address) {
  const bool loop = s.loopback.count(iface) > 0 || is_loopback(address);
  if (loop) {
    if (s.loopback_reaches_peer) return {"reaches", "the peer shares this host's network"};
    return {"fails",
            fmt::format("{} is the {}'s loopback: no other node reaches it", iface, s.name)};
  }
  const auto info = std::find_if(s.interfaces.begin(), s.interfaces.end(),
                                 [&](const interface_info& i) { return i.name == iface; });
  if (info != s.interfaces.end() && (!info->up || !info->running))
    return {"fails", fmt::format("{} is {}: nothing reaches it", iface,
                                 info->up ? "without carrier (NO-CARRIER)" : "down")};
  if (s.tested.count(iface) > 0) {
    if (s.reaching.count(iface) > 0) return {"reaches", fmt::format("{} reaches the peer", iface)};
    return {"fails", fmt::format("{} does not reach the peer (doctor's probes)", iface)};
  }
  if (s.loopback_reaches_peer) return {"reaches", "the peer is in this host's network namespace"};
  if (is_link_local(address))
    return {"fails", fmt::format("{} is an IPv6 link-local address: it names no route to "
                                 "another node (no global address on {})",
                                 address, iface)};
  return {"unknown", fmt::format("{} was not probed (doctor --iface, or no address the probes "
                                 "could use)",
                                 iface)};
}

std::string label(const nccl_verdict& v) {
  if (v.source == "rule")
    return fmt::format("NCCL's rule ({} source; no libnccl answered)", v.version);
  return fmt::format("NCCL {} ({})", v.version.empty() ? "?" : v.version, v.library);
}

}  // namespace

std::vector<nccl_pick> nccl_rule_interfaces(std::vector<interface_info> interfaces,
                                            const nlohmann::json& env, std::size_t max) {
  const auto sorted = by_index(std::move(interfaces));
  const auto listed = getifaddrs_order(sorted);
  const std::string family_text = env_text(env, "NCCL_SOCKET_FAMILY");
  const int family = family_text == "AF_INET"    ? AF_INET
                     : family_text == "AF_INET6" ? AF_INET6
                                                 : AF_UNSPEC;
  const std::string ifname = env_text(env, "NCCL_SOCKET_IFNAME");
  if (ifname.size() > 1) return find_interfaces(listed, ifname, family, max);
  auto picks = find_interfaces(listed, "ib", family, max);
  if (!picks.empty()) return picks;
  const std::string comm_id = env_text(env, "NCCL_COMM_ID");
  if (comm_id.size() > 1) {
    if (auto p = match_subnet(listed, comm_id_host(comm_id))) return {*p};
  }
  for (const char* filter : {"^docker,lo,virbr", "docker", "lo", "virbr"}) {
    picks = find_interfaces(listed, filter, family, max);
    if (!picks.empty()) return picks;
  }
  return {};
}

std::optional<nccl_pick> nccl_rule_bootstrap(const std::vector<interface_info>& interfaces,
                                             const nlohmann::json& env) {
  if (env.contains("NCCL_COMM_ID")) {
    const auto sorted = by_index(interfaces);
    return match_subnet(getifaddrs_order(sorted), comm_id_host(env_text(env, "NCCL_COMM_ID")));
  }
  const auto picks = nccl_rule_interfaces(interfaces, env, 1);
  if (picks.empty()) return std::nullopt;
  return picks.front();
}

nccl_side nccl_side_from(const nlohmann::json& description) {
  nccl_side s;
  if (!description.is_object()) return s;
  s.known = true;
  s.searched = description.value("searched", "");
  for (const auto& a : description.value("answers", nlohmann::json::array()))
    s.answers.push_back(a.get<nccl_answer>());
  return s;
}

void to_json(nlohmann::json& j, const nccl_verdict& v) {
  j = {{"side", v.side},   {"source", v.source},   {"library", v.library}, {"version", v.version},
       {"iface", v.iface}, {"address", v.address}, {"outcome", v.outcome}, {"why", v.why}};
}

std::vector<nccl_verdict> judge_nccl(const side_view& s) {
  std::vector<nccl_verdict> out;
  bool answered = false;
  for (const auto& a : s.nccl.answers) {
    nccl_verdict v{s.name, "library", a.library, a.version, a.iface, a.address, "", ""};
    if (!a.ran) {
      v.outcome = "unknown";
      v.why = fmt::format("no answer: {}", a.error);
    } else if (!a.ok) {
      answered = true;
      v.outcome = "fails";
      v.why = fmt::format("NCCL finds no interface for its bootstrap: {}", a.error);
    } else if (a.iface.empty()) {
      v.outcome = "unknown";
      v.why = "NCCL printed no \"Bootstrap: Using\" line";
    } else {
      answered = true;
      std::tie(v.outcome, v.why) = reach_of(s, a.iface, a.address);
    }
    out.push_back(std::move(v));
  }
  if (answered) return out;
  nccl_verdict v{s.name, "rule", "", nccl_rule_version, "", "", "", ""};
  if (const auto pick = nccl_rule_bootstrap(s.interfaces, s.env)) {
    v.iface = pick->iface;
    v.address = pick->address;
    std::tie(v.outcome, v.why) = reach_of(s, pick->iface, pick->address);
  } else {
    v.outcome = "fails";
    v.why = s.env.contains("NCCL_COMM_ID")
                ? "no interface on NCCL_COMM_ID's subnet (\"NET/Socket : No usable listening "
                  "interface found\")"
                : "NCCL finds no interface (\"Bootstrap : no socket interface found\")";
  }
  out.push_back(std::move(v));
  return out;
}

namespace netvars_detail {
namespace {

// NET/Socket, NCCL's data path without RDMA, runs the same search for up to 16 interfaces
// (src/transport/net_socket.cc ncclNetSocketInit, MAX_IFS); a library names only the first (its
// bootstrap's), so the rest follow the rule where its first agrees with what the library said.
void data_path(const side_view& s, const std::vector<nccl_verdict>& verdicts,
               std::vector<finding>& out) {
  if (verdicts.empty() || s.env.contains("NCCL_COMM_ID")) return;
  const auto first = std::find_if(verdicts.begin(), verdicts.end(),
                                  [](const nccl_verdict& v) { return v.outcome == "reaches"; });
  if (first == verdicts.end()) return;
  constexpr std::size_t max_ifs = 16;
  const auto picks = nccl_rule_interfaces(s.interfaces, s.env, max_ifs);
  if (picks.size() < 2 || picks.front().iface != first->iface) return;
  std::vector<std::string> bad;
  for (std::size_t i = 1; i < picks.size(); ++i) {
    if (reach_of(s, picks[i].iface, picks[i].address).first == "fails")
      bad.push_back(picks[i].iface);
  }
  if (bad.empty()) return;
  std::vector<std::string> names;
  names.reserve(picks.size());
  for (const auto& p : picks) names.push_back(p.iface);
  out.push_back(finding{
      s.name, "NCCL_SOCKET_IFNAME",
      fmt::format(
          "on the {}, NCCL's bootstrap takes {}, which reaches the peer, but NET/Socket (its "
          "data path without RDMA) spreads over {}, and {} {} not reach it (NCCL {}'s "
          "rule, src/transport/net_socket.cc, whose first interface is what the library "
          "answered)",
          s.name, first->iface, joined(names), joined(bad), bad.size() == 1 ? "does" : "do",
          nccl_rule_version),
      fix_line(s, "NCCL_SOCKET_IFNAME"), severity::fragile});
}

}  // namespace

std::vector<finding> check_nccl(const side_view& s) {
  std::vector<finding> out;
  const std::string ifname = get(s, "NCCL_SOCKET_IFNAME").value_or("");
  const bool comm_id = s.env.contains("NCCL_COMM_ID");
  if (get(s, "NCCL_SOCKET_IFNAME") && ifname.size() <= 1) {
    out.push_back(finding{s.name, "NCCL_SOCKET_IFNAME",
                          fmt::format("NCCL_SOCKET_IFNAME={} is one character on the {}: NCCL "
                                      "reads it only when it is longer, and picks by itself",
                                      ifname, s.name),
                          fix_line(s, "NCCL_SOCKET_IFNAME"), severity::advice});
  }
  const auto verdicts = judge_nccl(s);
  // One finding per outcome, naming every library (version) that gave it.
  std::map<std::string, std::vector<const nccl_verdict*>> groups;
  for (const auto& v : verdicts) {
    if (v.outcome != "reaches") groups[v.outcome + "|" + v.iface + "|" + v.why].push_back(&v);
  }
  for (const auto& [key, vs] : groups) {
    std::vector<std::string> who;
    for (const auto* v : vs) who.push_back(label(*v));
    const nccl_verdict& v = *vs.front();
    const std::string takes =
        v.iface.empty() ? std::string("finds no interface")
                        : fmt::format("takes {}:{} for its bootstrap", v.iface, v.address);
    std::string fix = fix_line(s, "NCCL_SOCKET_IFNAME");
    if (v.outcome != "fails") {
      fix = v.why.rfind("no answer", 0) == 0 || v.iface.empty()
                ? fmt::format(
                      "the verdict falls back to NCCL's rule; if the job loads another "
                      "libnccl.so.2, name it on the {} with PAIRPERF_NCCL_LIBRARY=PATH",
                      s.name)
                : fmt::format("run doctor without --iface so that {} is probed", v.iface);
    } else if (comm_id) {
      fix = fmt::format(
          "NCCL_COMM_ID is set on the {}: its bootstrap takes the interface on that "
          "address's subnet and ignores NCCL_SOCKET_IFNAME; give it an address of the "
          "root that the other nodes reach",
          s.name);
    } else if (is_link_local(v.address)) {
      fix += "; or NCCL_SOCKET_FAMILY=AF_INET";
    }
    out.push_back(
        finding{s.name, "NCCL_SOCKET_IFNAME",
                fmt::format("on the {}, {} {}: {}", s.name, fmt::join(who, " and "), takes, v.why),
                fix, v.outcome == "fails" ? severity::fails : severity::advice});
  }
  data_path(s, verdicts, out);
  return out;
}

}  // namespace netvars_detail
}  // namespace pairperf
