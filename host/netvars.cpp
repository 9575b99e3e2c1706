#include "host/netvars.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "host/netvars_common.h"

namespace pairperf {
namespace {

using namespace netvars_detail;  // NOLINT: the checks' shared helpers

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return std::isspace(c) == 0; };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// The interfaces a value names that this side has.
std::vector<std::string> existing(const side_view& s, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (contains(s.ifaces, n)) out.push_back(n);
  }
  return out;
}

std::vector<std::string> unreaching(const side_view& s, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (s.tested.count(n) > 0 && s.reaching.count(n) == 0) out.push_back(n);
  }
  return out;
}

class checker {
 public:
  checker(const side_view& client, const side_view& server, const measured_connections& measured)
      : m_c(client),
        m_s(server),
        m_gloo(outcome(measured, "GLOO_SOCKET_IFNAME")),
        m_ucx(outcome(measured, "UCX_NET_DEVICES")) {}

  std::vector<finding> run() {
    // gloo's own devices known on both sides: gloo's checks read them (and its measured
    // connection); else its variables are judged by gloo's rules alone.
    const bool gloo_known = m_c.gloo.known && m_s.gloo.known;
    for (const side_view* side : {&m_c, &m_s}) {
      for (auto& f : check_nccl(*side)) m_out.push_back(std::move(f));
      if (!gloo_known) socket_ifname(*side, "GLOO_SOCKET_IFNAME");
      ucx_net_devices(*side);
      nccl_ib_hca(*side);
      axis_names(*side);
      if (!gloo_known) gloo_default(*side);
      gpus(*side);
    }
    ucx_failed_unexplained();
    one_sided("NCCL_SOCKET_IFNAME");
    if (gloo_known) {
      for (auto& f : check_gloo(m_c, m_s, m_gloo)) m_out.push_back(std::move(f));
    } else {
      one_sided("GLOO_SOCKET_IFNAME");
    }
    axis_differs();
    return std::move(m_out);
  }

 private:
  void add(const side_view& s, std::string subject, std::string problem, std::string fix,
           severity how = severity::fails) {
    m_out.push_back(finding{s.name, std::move(subject), std::move(problem), std::move(fix), how});
  }

  // The interfaces a variable selects on this side, as its library reads it.
  std::vector<std::string> selected(const side_view& s, const char* var, const std::string& value) {
    if (std::string(var) == "GLOO_SOCKET_IFNAME") return existing(s, split_list(value));
    return nccl_select(parse_nccl_filter(value), s.ifaces);
  }

  // gloo's variable by gloo's rules, where gloo's devices are not known (no libgloo here).
  void socket_ifname(const side_view& s, const char* var) {
    const auto value = get(s, var);
    if (!value) return;
    const auto chosen = selected(s, var, *value);
    if (chosen.empty()) {
      add(s, var,
          fmt::format("{}={} names no interface of the {} (it has {})", var, *value, s.name,
                      joined(s.ifaces)),
          fix_line(s, var));
      return;
    }
    const auto bad = unreaching(s, chosen);
    if (!bad.empty() && bad.size() == chosen.size()) {
      add(s, var,
          fmt::format("{}={} selects {} on the {}, which does not reach the peer", var, *value,
                      joined(bad), s.name),
          fix_line(s, var));
    } else if (!bad.empty()) {
      add(s, var,
          fmt::format("{}={} selects {} on the {}; {} of them do not reach the peer", var, *value,
                      joined(chosen), s.name, joined(bad)),
          fix_line(s, var),
          // gloo connects every listed device; NCCL's sockets spread over those it found.
          std::string(var) == "GLOO_SOCKET_IFNAME" ? severity::fails : severity::fragile);
    }
  }

  // gloo (torch.distributed, vLLM, SGLang) without GLOO_SOCKET_IFNAME binds the address its
  // hostname resolves to.
  void gloo_default(const side_view& s) {
    if (get(s, "GLOO_SOCKET_IFNAME")) return;
    const bool loopback = s.hostname_address.rfind("127.", 0) == 0 || s.hostname_address == "::1";
    std::string problem;
    severity how = severity::fragile;  // by the address order, it fails only with some peers
    if (s.hostname_address.empty()) {
      problem = fmt::format(
          "GLOO_SOCKET_IFNAME is unset on the {} and its hostname does not resolve: torch falls "
          "back to 127.0.0.1, which peers on other hosts cannot reach",
          s.name);
    } else if (loopback && !s.loopback_reaches_peer) {
      problem = fmt::format(
          "GLOO_SOCKET_IFNAME is unset on the {} and its hostname resolves to {} (loopback): gloo "
          "would listen where the peer cannot reach (\"Gloo connectFullMesh failed\")",
          s.name, s.hostname_address);
    } else if (!s.hostname_iface.empty() && s.tested.count(s.hostname_iface) > 0 &&
               s.reaching.count(s.hostname_iface) == 0) {
      problem = fmt::format(
          "GLOO_SOCKET_IFNAME is unset on the {}: gloo binds the hostname's address {} on {}, "
          "which does not reach the peer",
          s.name, s.hostname_address, s.hostname_iface);
    } else if (const auto nccl = get(s, "NCCL_SOCKET_IFNAME"); nccl && !loopback) {
      // The vLLM case: NCCL was pointed at the right interface, gloo was left to the hostname.
      const auto chosen = selected(s, "NCCL_SOCKET_IFNAME", *nccl);
      if (!s.hostname_iface.empty() && !chosen.empty() && !contains(chosen, s.hostname_iface)) {
        problem = fmt::format(
            "NCCL_SOCKET_IFNAME={} is set on the {} but GLOO_SOCKET_IFNAME is not: gloo binds the "
            "hostname's address {} on {}, another interface than NCCL's",
            *nccl, s.name, s.hostname_address, s.hostname_iface);
        how = severity::advice;
      }
    }
    if (!problem.empty())
      add(s, "GLOO_SOCKET_IFNAME", problem, fix_line(s, "GLOO_SOCKET_IFNAME"), how);
  }

  // What UCX's own connection with each side's UCX_* environment said, for the problem's text.
  [[nodiscard]] std::string ucx_measured() const {
    if (!m_ucx.ran) return " (by UCX's rule: it uses every listed device; not run)";
    return m_ucx.ok ? " (measured: UCX's own connection with each side's UCX_* worked)"
                    : fmt::format(
                          " (measured: UCX's own connection with each side's UCX_* "
                          "failed: {})",
                          m_ucx.message);
  }
  // A selected device that does not reach: the connection fails unless UCX was measured to work
  // (then it chose another device, by its own ranking: fragile).
  [[nodiscard]] severity ucx_unreaching() const {
    return m_ucx.ran && m_ucx.ok ? severity::fragile : severity::fails;
  }

  void ucx_net_devices(const side_view& s) {
    const auto value = get(s, "UCX_NET_DEVICES");
    // "all" is UCX's default (ucp_context.c, UCX_NET_DEVICES "all"): every device, as if unset.
    if (!value || trim(*value) == "all") {
      std::vector<std::string> bad;
      for (const auto& n : s.ifaces) {
        if (n != "lo" && s.loopback.count(n) == 0 && s.tested.count(n) > 0 &&
            s.reaching.count(n) == 0)
          bad.push_back(n);
      }
      if (!bad.empty()) {
        add(s, "UCX_NET_DEVICES",
            fmt::format("UCX_NET_DEVICES is {} on the {}: UCX may use {}, which does not "
                        "reach the peer (\"Network is unreachable\"){}",
                        value ? "all (UCX's default)" : "unset", s.name, joined(bad),
                        ucx_measured()),
            fix_line(s, "UCX_NET_DEVICES"), ucx_unreaching());
      }
      return;
    }
    std::vector<std::string> nets;
    std::vector<std::string> missing;
    const auto listed = split_list(*value);
    for (const auto& d : listed) {
      const std::string dev = d.substr(0, d.find(':'));
      if (contains(s.ifaces, d)) {
        nets.push_back(d);
      } else if (!contains(s.rdma, dev)) {
        missing.push_back(d);
      }
    }
    if (!missing.empty()) {
      // UCX skips a device it lacks; with none left it has no usable transport.
      const bool none_left = missing.size() == listed.size();
      add(s, "UCX_NET_DEVICES",
          fmt::format(
              "UCX_NET_DEVICES={} names {}, which the {} does not have (interfaces {}, "
              "RDMA devices {}){}{}",
              *value, joined(missing), s.name, joined(s.ifaces), joined(s.rdma),
              none_left ? ": UCX has no usable device (\"no usable transports/devices\")" : "",
              ucx_measured()),
          fix_line(s, "UCX_NET_DEVICES"),
          none_left && !(m_ucx.ran && m_ucx.ok) ? severity::fails : severity::advice);
    }
    const auto bad = unreaching(s, nets);
    if (!bad.empty()) {
      add(s, "UCX_NET_DEVICES",
          fmt::format("UCX_NET_DEVICES={} on the {}: {} does not reach the peer{}", *value, s.name,
                      joined(bad), ucx_measured()),
          fix_line(s, "UCX_NET_DEVICES"), ucx_unreaching());
    }
  }

  // UCX measured to fail while no rule named a side: the pair's finding, with UCX's own error.
  void ucx_failed_unexplained() {
    if (!m_ucx.ran || m_ucx.ok) return;
    for (const auto& f : m_out) {
      if (f.subject == "UCX_NET_DEVICES" && f.severity == severity::fails) return;
    }
    m_out.push_back(
        finding{"pair", "UCX_NET_DEVICES",
                fmt::format("UCX's own connection with each side's UCX_* environment fails: {}",
                            m_ucx.message),
                fmt::format("pin UCX to interfaces that reach each other ({}; {})",
                            fix_line(m_c, "UCX_NET_DEVICES"), fix_line(m_s, "UCX_NET_DEVICES")),
                severity::fails, "ucx"});
  }

  void nccl_ib_hca(const side_view& s) {
    const auto value = get(s, "NCCL_IB_HCA");
    if (!value) return;
    if (!nccl_select(parse_nccl_filter(*value), s.rdma).empty()) return;
    add(s, "NCCL_IB_HCA",
        fmt::format("NCCL_IB_HCA={} matches no RDMA device of the {} (it has {}): NCCL falls back "
                    "to sockets",
                    *value, s.name, joined(s.rdma)),
        s.rdma.empty() ? fmt::format("the {} has no RDMA device: unset NCCL_IB_HCA, or expose the "
                                     "HCA to this container",
                                     s.name)
                       : fmt::format("on the {}: NCCL_IB_HCA={}", s.name, joined(s.rdma)),
        severity::advice);
  }

  // A transport-selection variable naming transports this side's library lacks.
  void axis_names(const side_view& s) {
    for (const auto& a : s.axis_variables) {
      const auto value = get(s, a.variable.c_str());
      if (!value || a.missing.empty()) continue;
      // None of the names left: the library has nothing to use (UCX "no usable transports",
      // libfabric's fi_getinfo finds no provider). Some left: it uses those.
      const bool none_left = a.missing.size() >= split_list(*value).size();
      add(s, a.variable,
          fmt::format("{}={} names {}, which the {}'s {} does not have (it has {}){}", a.variable,
                      *value, joined(a.missing), s.name, a.transport, joined(a.available),
                      none_left ? ": it has nothing left to use" : ""),
          fmt::format("on the {}: drop {} from {}, or install a {} built with it", s.name,
                      joined(a.missing), a.variable, a.transport),
          none_left ? severity::fails : severity::advice);
    }
  }

  void gpus(const side_view& s) {
    if (!s.gpus) return;
    const auto& list = *s.gpus;
    if (const auto cvd = get(s, "CUDA_VISIBLE_DEVICES")) {
      std::vector<std::string> missing;
      for (const auto& e : split_list(*cvd)) {
        const bool index = !e.empty() && std::all_of(e.begin(), e.end(), [](unsigned char ch) {
          return std::isdigit(ch) != 0;
        });
        // An index past any count (even one too long for an integer) names no GPU.
        const bool found = index ? e.size() < 10 && std::stoul(e) < list.size()
                                 : std::any_of(list.begin(), list.end(), [&](const gpu_info& g) {
                                     return g.uuid.rfind(e, 0) == 0;
                                   });
        if (!found) missing.push_back(e);
      }
      if (!missing.empty()) {
        add(s, "CUDA_VISIBLE_DEVICES",
            fmt::format("CUDA_VISIBLE_DEVICES={} names {}, but the {} sees {} GPU(s){}", *cvd,
                        joined(missing), s.name, list.size(), gpu_list(list)),
            fmt::format("on the {}: name GPUs by an index below {} or by a UUID it sees", s.name,
                        list.size()));
      }
    }
    if (const auto nvd = get(s, "NVIDIA_VISIBLE_DEVICES")) {
      const std::string v = trim(*nvd);
      if ((v == "none" || v == "void") && !list.empty()) return;
      if (v != "all" && v != "none" && v != "void" && list.empty()) {
        add(s, "NVIDIA_VISIBLE_DEVICES",
            fmt::format("NVIDIA_VISIBLE_DEVICES={} on the {}, but it sees no GPU", v, s.name),
            "check that the container runtime is the NVIDIA one and the GPUs exist");
      }
    }
  }

  static std::string gpu_list(const std::vector<gpu_info>& list) {
    std::vector<std::string> u;
    for (const auto& g : list) u.push_back(g.uuid);
    return u.empty() ? std::string() : fmt::format(" ({})", fmt::join(u, ", "));
  }

  // A socket variable set on one side only: the side without it picks its own interface.
  void one_sided(const char* var) {
    const auto c = get(m_c, var);
    const auto s = get(m_s, var);
    if (c.has_value() == s.has_value()) return;
    const side_view& unset = c ? m_s : m_c;
    const side_view& set = c ? m_c : m_s;
    m_out.push_back(finding{
        "pair", var,
        fmt::format("{} is set on the {} ({}) but not on the {}: the variable did not reach "
                    "every process, and the {} picks an interface by itself",
                    var, set.name, c ? *c : *s, unset.name, unset.name),
        fix_line(unset, var), severity::advice});
  }

  // A transport-selection variable that differs between the sides.
  void axis_differs() {
    std::set<std::string> variables;
    for (const side_view* side : {&m_c, &m_s}) {
      for (const auto& a : side->axis_variables) variables.insert(a.variable);
    }
    for (const auto& var : variables) {
      const auto c = get(m_c, var.c_str());
      const auto s = get(m_s, var.c_str());
      if (!c && !s) continue;
      if (c && s && split_list(*c) == split_list(*s)) continue;
      m_out.push_back(finding{
          "pair", var,
          fmt::format("{} differs: client {}, server {}; a transport enabled on one side only "
                      "cannot carry the pair",
                      var, c ? *c : "(unset)", s ? *s : "(unset)"),
          fmt::format("set the same {} on both sides", var), severity::advice});
    }
  }

  static application_outcome outcome(const measured_connections& m, const char* variable) {
    const auto it = m.find(variable);
    return it == m.end() ? application_outcome{} : it->second;
  }

  const side_view& m_c;
  const side_view& m_s;
  application_outcome m_gloo, m_ucx;
  std::vector<finding> m_out;
};

}  // namespace

nccl_filter parse_nccl_filter(const std::string& value) {
  nccl_filter f;
  std::string v = trim(value);
  if (!v.empty() && v.front() == '^') {
    f.exclude = true;
    v.erase(0, 1);
  }
  if (!v.empty() && v.front() == '=') {
    f.exact = true;
    v.erase(0, 1);
  }
  f.entries = split_list(v);
  return f;
}

bool nccl_matches(const nccl_filter& f, const std::string& name) {
  // NCCL's matchIfList: an empty list matches every name (so "^=" excludes them all).
  if (f.entries.empty()) return !f.exclude;
  bool hit = false;
  for (const auto& e : f.entries) {
    const std::string want = e.substr(0, e.find(':'));
    hit = hit || (f.exact ? name == want : name.rfind(want, 0) == 0);
  }
  return hit != f.exclude;
}

std::vector<std::string> nccl_select(const nccl_filter& f, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (nccl_matches(f, n)) out.push_back(n);
  }
  return out;
}

void to_json(nlohmann::json& j, const gpu_info& g) {
  j = {{"index", g.index},
       {"uuid", g.uuid},
       {"bus_id", g.bus_id},
       {"name", g.name},
       {"nvlink_peers", g.nvlink_peers}};
}

void from_json(const nlohmann::json& j, gpu_info& g) {
  g.index = j.value("index", 0U);
  g.uuid = j.value("uuid", std::string());
  g.bus_id = j.value("bus_id", std::string());
  g.name = j.value("name", std::string());
  g.nvlink_peers = j.value("nvlink_peers", std::vector<std::string>());
}

const char* to_string(severity s) noexcept {
  switch (s) {
    case severity::fails:
      return "fails";
    case severity::fragile:
      return "fragile";
    case severity::advice:
      return "advice";
  }
  return "fails";
}

void to_json(nlohmann::json& j, const finding& f) {
  j = {{"side", f.side},
       {"subject", f.subject},
       {"problem", f.problem},
       {"fix", f.fix},
       {"severity", to_string(f.severity)}};
}

std::vector<finding> check_variables(const side_view& client, const side_view& server,
                                     const measured_connections& measured) {
  return checker(client, server, measured).run();
}

void print_findings(std::FILE* out, const std::vector<finding>& findings) {
  if (findings.empty()) return;
  std::array<std::size_t, 3> count{};
  for (const auto& f : findings) ++count[static_cast<std::size_t>(f.severity)];
  fmt::print(out, "\nFindings ({}: {} fails, {} fragile, {} advice):\n", findings.size(), count[0],
             count[1], count[2]);
  std::size_t n = 0;
  for (const auto& f : findings) {
    fmt::print(out, "  {}. {:<7} [{}] {}: {}\n     fix: {}\n", ++n, to_string(f.severity), f.side,
               f.subject, f.problem, f.fix);
  }
}

gloo_side gloo_side_from(const nlohmann::json& description) {
  gloo_side g;
  if (!description.is_object() || !description.contains("devices") ||
      !description.at("devices").is_object())
    return g;
  const auto& d = description.at("devices");
  g.known = true;
  g.source = d.value("source", std::string());
  g.loopback_fallback = d.value("loopback_fallback", false);
  g.ignored_ifname = d.value("ignored_GLOO_SOCKET_IFNAME", std::string());
  for (const auto& dev : d.value("devices", nlohmann::json::array())) {
    if (!dev.is_object()) continue;
    g.devices.push_back(
        gloo_device_fact{dev.value("iface", std::string()), dev.value("hostname", std::string()),
                         dev.value("address", std::string()), dev.value("error", std::string())});
  }
  return g;
}

}  // namespace pairperf
