#include "diagnose/explain_facts.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <regex>
#include <set>

#include "diagnose/explain_text.h"

namespace pairperf {
namespace {

using log_text::fill_text;
using log_text::interface_list;
using log_text::is_bridge;
using log_text::is_link_local;
using log_text::is_loopback;

std::string where_of(const explanation& e, std::size_t log, std::size_t line) {
  return fmt::format("{}:{}", e.logs[log], line);
}

// A fact that one line shows.
void line_fact(explanation& e, const log_match& m, std::string kind, std::string text,
               std::string subject = {}) {
  e.facts.push_back(
      {std::move(kind), std::move(text), {where_of(e, m.log, m.line)}, std::move(subject)});
}

// The interfaces a line names: a bridge, or a link-local address, reaches no other node.
void interface_facts(explanation& e, const log_match& m) {
  std::vector<std::pair<std::string, std::string>> named;
  if (const auto l = m.fields.find("ifaces"); l != m.fields.end())
    named = interface_list(l->second);
  if (const auto i = m.fields.find("iface"); i != m.fields.end()) {
    const auto a = m.fields.find("local_addr");
    named.emplace_back(i->second, a != m.fields.end() ? a->second : "");
  }
  for (const auto& [iface, addr] : named) {
    const std::string what = addr.empty() ? iface : fmt::format("{} ({})", iface, addr);
    if (is_bridge(iface))
      line_fact(e, m, "bridge_interface",
                fmt::format("{} uses {}, a bridge to this host's containers or VMs: other nodes "
                            "do not reach it",
                            e.logs[m.log], what));
    if (is_link_local(addr))
      line_fact(e, m, "link_local",
                fmt::format("{} uses {}, a link-local address no other node routes to",
                            e.logs[m.log], what));
  }
}

// NCCL prefixes its lines with `host:pid:tid [dev]`; a host named like a Docker container (its
// default hostname is the container ID's first 12 hex digits) ran inside one. One fact per log.
void container_facts(explanation& e) {
  static const std::regex nccl_prefix(R"(^([0-9a-f]{12}):\d+:\d+ \[\d+\] )");
  std::set<std::size_t> seen;
  for (const auto& m : e.matches) {
    std::smatch host;
    if (seen.count(m.log) != 0 || !std::regex_search(m.text, host, nccl_prefix)) continue;
    seen.insert(m.log);
    line_fact(e, m, "container_hostname",
              fmt::format("{} was written on host {}, Docker's default hostname for a container "
                          "(the first 12 hex digits of its ID)",
                          e.logs[m.log], host[1].str()),
              host[1].str());
  }
}

// A setting printed on some nodes only, or with different values.
void setting_facts(
    explanation& e,
    const std::map<std::string, std::map<std::size_t, std::pair<std::string, std::string>>>&
        settings) {
  if (e.logs.size() > 1) {
    for (const auto& [var, per_log] : settings) {
      std::set<std::string> values;
      for (const auto& [log, v] : per_log) values.insert(v.first);
      if (values.size() < 2 && per_log.size() == e.logs.size()) continue;
      std::vector<std::string> parts, where;
      for (std::size_t log = 0; log < e.logs.size(); ++log) {
        const auto it = per_log.find(log);
        parts.push_back(it == per_log.end()
                            ? fmt::format("not printed in {}", e.logs[log])
                            : fmt::format("{} in {}", it->second.first, e.logs[log]));
        if (it != per_log.end()) where.push_back(it->second.second);
      }
      e.facts.push_back(
          {"setting_differs",
           fmt::format("{} differs between the nodes: {}", var, fmt::join(parts, "; ")),
           where,
           {}});
    }
  }
}

// A line that says a host name did not resolve: its signature's class, or a cause of the
// name_resolution class whose field condition its fields meet (c10d's gai error -2 or -3).
bool says_unresolved(const log_match& m) {
  if (m.sig->cause_class == "name_resolution") return true;
  for (const auto& rule : m.sig->causes) {
    if (rule.cause_class != "name_resolution" || rule.when_field.empty()) continue;
    const auto v = m.fields.find(rule.when_field);
    if (v != m.fields.end() && std::regex_search(v->second, *rule.when_matches)) return true;
  }
  return false;
}

// NCCL's `NCCL_IB_* set by environment to V` lines: a job that names an HCA, a GID index, a
// traffic class, ... (or sets NCCL_IB_DISABLE=0) expects InfiniBand/RoCE between its nodes;
// NCCL_IB_DISABLE=1 asks for sockets. One fact per log.
void rdma_requested_facts(explanation& e) {
  std::set<std::size_t> seen;
  for (const auto& m : e.matches) {
    const auto var = m.fields.find("var");
    const auto value = m.fields.find("value");
    if (seen.count(m.log) != 0 || var == m.fields.end() || value == m.fields.end() ||
        var->second.rfind("NCCL_IB_", 0) != 0 ||
        (var->second == "NCCL_IB_DISABLE" && value->second != "0"))
      continue;
    seen.insert(m.log);
    line_fact(e, m, "rdma_requested",
              fmt::format("{}: {} is set to {}: the job expects InfiniBand/RoCE between nodes",
                          e.logs[m.log], var->second, value->second),
              var->second);
  }
}

}  // namespace

void find_facts(explanation& e) {
  // Settings per log (var -> log -> value and where), addresses each log advertises.
  std::map<std::string, std::map<std::size_t, std::pair<std::string, std::string>>> settings;
  std::map<std::string, std::vector<std::pair<std::size_t, std::string>>> advertised;  // addr ->
  for (const auto& m : e.matches) {
    if (!m.sig->implies.empty())
      line_fact(e, m, m.sig->implies,
                fmt::format("{}: {}", e.logs[m.log],
                            m.sig->meaning.empty() ? m.text : fill_text(m.sig->meaning, m.fields)));
    const auto var = m.fields.find("var");
    const auto value = m.fields.find("value");
    if (var != m.fields.end() && value != m.fields.end())
      settings[var->second].emplace(m.log,
                                    std::make_pair(value->second, where_of(e, m.log, m.line)));
    interface_facts(e, m);
    if (const auto h = m.fields.find("host"); h != m.fields.end() && says_unresolved(m))
      line_fact(e, m, "unresolved_name",
                fmt::format("{}: the lookup of {} failed", e.logs[m.log], h->second), h->second);
    if (const auto a = m.fields.find("local_addr"); a != m.fields.end()) {
      const auto iface = m.fields.find("iface");
      advertised[a->second].emplace_back(
          m.log,
          fmt::format("{}{}|{}", a->second, iface != m.fields.end() ? " on " + iface->second : "",
                      where_of(e, m.log, m.line)));
      if (is_loopback(a->second))
        line_fact(e, m, "loopback",
                  fmt::format("{} uses the loopback address {}, which no other node can reach",
                              e.logs[m.log], a->second));
    }
  }
  setting_facts(e, settings);
  container_facts(e);
  rdma_requested_facts(e);
  for (const auto& m : e.matches) {
    if (m.sig->kind == line_kind::context) continue;
    const auto addr = m.fields.find("addr");
    if (addr == m.fields.end()) continue;
    if (is_loopback(addr->second))
      line_fact(e, m, "loopback",
                fmt::format("{} tried to reach the loopback address {}: a peer advertised an "
                            "address only it can reach",
                            e.logs[m.log], addr->second));
    const auto adv = advertised.find(addr->second);
    if (adv == advertised.end()) continue;
    // One fact per failing line and advertising log, with every line that advertises it.
    std::map<std::size_t, std::pair<std::string, std::vector<std::string>>> by_log;
    for (const auto& [log, what] : adv->second) {
      if (log == m.log) continue;
      const auto bar = what.find('|');
      auto& [text, where] = by_log[log];
      text = what.substr(0, bar);
      where.push_back(what.substr(bar + 1));
    }
    for (auto& [log, fact] : by_log) {
      fact.second.push_back(where_of(e, m.log, m.line));
      e.facts.push_back({"advertised_elsewhere",
                         fmt::format("{} advertises {}; {} could not reach it", e.logs[log],
                                     fact.first, e.logs[m.log]),
                         fact.second,
                         {}});
    }
  }
}

}  // namespace pairperf
