// doctor's outputs: the human report and the JSON document.
#include <fmt/format.h>

#include "core/self_probe.h"
#include "diagnose/doctor.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

double best_rate(const case_result& r) {
  return r.status == case_status::ok ? headline_of(r, headline::bandwidth).value_or(0) : 0;
}

std::string cell_text(const case_result& r, rate_unit unit, std::chrono::nanoseconds timeout) {
  switch (r.status) {
    case case_status::ok:
      return format_rate(best_rate(r), unit);
    case case_status::skipped:
      return "skipped";
    default:
      break;
  }
  if (r.error_code == "ETIMEDOUT")
    return fmt::format("timeout ({})", format_seconds(static_cast<double>(timeout.count()) * 1e-9));
  if (!r.error_code.empty()) return r.error_code;
  // UCX reports a status string, not an errno: show the last part of the first clause
  // ("...: UCX operation failed: Endpoint timeout; UCX's lanes ..." -> "Endpoint timeout").
  const std::string first = r.message.substr(0, r.message.find("; "));
  const auto colon = first.rfind(": ");
  std::string tail = colon == std::string::npos ? first : first.substr(colon + 2);
  if (tail.size() > 40) tail = tail.substr(0, 37) + "...";
  return fmt::format("{} ({})", to_string(r.status), tail);
}

// The variables that pin an application to an interface: the libraries' device variables (from
// the registry: UCX_NET_DEVICES), then the collective libraries' socket interfaces.
std::vector<std::string> interface_variables() {
  auto out = transport_registry::instance().device_variables();
  out.insert(out.end(), {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"});
  return out;
}

// Every variable the report shows for both sides: the libraries' (registry), NCCL's and Gloo's
// interfaces, NCCL's RDMA devices and the GPU lists.
std::vector<std::string> shown_variables() {
  auto out = transport_registry::instance().library_variables();
  for (const char* v : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA",
                        "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"})
    out.emplace_back(v);
  return out;
}

std::string env_value(const side_view& s, const std::string& name) {
  const auto it = s.env.find(name);
  return it != s.env.end() && it->is_string() ? it->get<std::string>() : "(unset)";
}

// Each library's own connection by its transport: {"gloo": {"variable", "result"}, ...}.
nlohmann::json applications_json(const doctor_report& r) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& a : r.applications)
    out[a.result.test.transport] = {{"variable", a.variable}, {"result", a.result}};
  return out;
}

}  // namespace

void to_json(nlohmann::json& j, const doctor_report& r) {
  const auto cells = [](const std::vector<probe_result>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : list) {
      nlohmann::json cell{{"local_iface", c.target.local_iface}, {"result", c.result}};
      if (!c.target.peer_address.empty()) {
        cell["peer_iface"] = c.target.peer_iface;
        cell["peer_address"] = c.target.peer_address;
        cell["on_subnet"] = c.target.on_subnet;
      }
      cell["reachable"] = c.result.status == case_status::ok;
      out.push_back(std::move(cell));
    }
    return out;
  };
  const auto side = [](const side_view& s) {
    nlohmann::json recommended;  // null: nothing to recommend
    if (!s.recommendable.empty()) {
      for (const auto& v : interface_variables()) recommended[v] = s.recommendable.front();
    }
    nlohmann::json vars = nlohmann::json::object();
    for (const auto& v : shown_variables())
      vars[v] = s.env.contains(v) ? s.env.at(v) : nlohmann::json();
    // NCCL's rule on this side, whatever its libraries answered (the fallback, shown to be
    // checked).
    const auto rule = nccl_rule_bootstrap(s.interfaces, s.env);
    const nlohmann::json nccl_rule{{"version", nccl_rule_version},
                                   {"iface", rule ? rule->iface : ""},
                                   {"address", rule ? rule->address : ""}};
    return nlohmann::json{{"interfaces", s.ifaces},
                          {"nccl_rule", nccl_rule},
                          {"reaching", s.ranked},
                          {"variables", vars},
                          {"recommended", recommended},
                          {"hostname_address", s.hostname_address},
                          {"hostname_iface", s.hostname_iface}};
  };
  j = {{"schema", "pairperf.doctor"},
       {"schema_version", "1.6.0"},
       {"context", r.context},
       {r.reach_transport, cells(r.reach)},
       {"path", r.path},
       {"path_iface", r.path_iface},
       {"pair", r.pair},
       {"verdict", r.verdict ? nlohmann::json(*r.verdict) : nlohmann::json()},
       {"gpus", r.gpus ? nlohmann::json{{"expected", r.gpus->expected}, {"why", r.gpus->why}}
                       : nlohmann::json()},
       {"client", side(r.client)},
       {"server", side(r.server)},
       {"findings", r.findings},
       {"nccl", r.nccl},
       {"bound_s", static_cast<double>(r.bound.count()) * 1e-9},
       {"elapsed_s", r.elapsed_s},
       {"scope", r.this_host_only ? "this host" : "pair"},
       {"path_noisy", r.path_noisy.empty() ? nlohmann::json() : nlohmann::json(r.path_noisy)},
       {"path_retried", r.path_retried},
       {"applications", applications_json(r)},
       {"strict", r.strict},
       {"exit_code", exit_code(r)}};
  // The library's cells under its transport's name (empty where its probes are off); none where
  // no transport has the library role in this build.
  if (!r.library_transport.empty()) j[r.library_transport] = cells(r.library);
  if (r.interrupted != 0) {
    j["interrupted"] = {{"signal", signal_name(r.interrupted)}, {"during", r.interrupted_during}};
  }
  if (!r.server_unreachable.empty()) j["server_unreachable"] = r.server_unreachable;
}

namespace {

void print_heading(std::FILE* out, const doctor_report& r) {
  const auto& ctx = r.context;
  const std::string server_host =
      ctx.contains("server") ? ctx.at("server").value("hostname", std::string("?")) : "?";
  const std::string client_host =
      ctx.contains("client") ? ctx.at("client").value("hostname", std::string("?")) : "?";
  if (r.this_host_only) {
    fmt::print(out,
               "\npairperf doctor: this host only ({}, against a local server on {}), {:.1f} s\n"
               "  No peer was given: the network between nodes is not checked. To check it, run "
               "`pairperf server` on another node and `pairperf doctor NODE` here.\n",
               client_host, ctx.value("server_address", std::string("?")), r.elapsed_s);
  } else {
    fmt::print(out, "\npairperf doctor: {} -> {} ({}), {:.1f} s\n", client_host,
               ctx.value("server_address", std::string("?")), server_host, r.elapsed_s);
  }
}

// Each local interface against each server address, with the library's cell per interface.
void print_matrix(std::FILE* out, const doctor_report& r, rate_unit unit) {
  const auto timeout = r.probe_timeout;
  const std::string library_title = r.library.empty() ? "" : "UCX (UCX_TLS=tcp)";
  fmt::print(out,
             "\nInterface matrix: TCP connect and a {} stream from each local interface to each "
             "server address{}\n",
             format_size(r.reach.empty() ? 0 : r.reach.front().result.test.size_bytes),
             r.library.empty() ? "" : "; UCX over tcp with UCX_NET_DEVICES=<local interface>");
  fmt::print(out, "  {:<12} {:<40} {:<28} {}\n", "LOCAL", "SERVER ADDRESS (INTERFACE)", "TCP",
             library_title);
  std::string last;
  for (const auto& c : r.reach) {
    std::string library_cell;
    if (c.target.local_iface != last) {
      for (const auto& u : r.library) {
        if (u.target.local_iface == c.target.local_iface)
          library_cell = cell_text(u.result, unit, timeout);
      }
    }
    fmt::print(
        out, "  {:<12} {:<40} {:<28} {}\n",
        c.target.local_iface == last ? "" : c.target.local_iface,
        fmt::format("{} ({})", c.target.peer_address, c.target.peer_iface),
        cell_text(c.result, unit, timeout) +
            (c.result.status != case_status::ok && !c.target.on_subnet ? " (off-subnet)" : ""),
        library_cell);
    last = c.target.local_iface;
  }
  if (r.reach.empty()) fmt::print(out, "  (no interface pair to probe)\n");
}

void print_recommendation(std::FILE* out, const doctor_report& r) {
  fmt::print(out, "\nRecommendation (interfaces that reach, fastest first):\n");
  for (const side_view* s : {&r.client, &r.server}) {
    if (r.this_host_only && s == &r.server) break;  // the same host: said once
    const std::string who = r.this_host_only ? "this host" : s->name;
    if (s->ranked.empty()) {
      fmt::print(out, "  {}: none reaches\n", who);
      continue;
    }
    fmt::print(out, "  {}: {}\n", who, fmt::join(s->ranked, ", "));
    const auto names = interface_variables();
    if (s->recommendable.empty()) {
      fmt::print(out, "    no interface to name in {} or {}: loopback reaches only this host{}\n",
                 fmt::join(names.begin(), names.end() - 1, ", "), names.back(),
                 r.this_host_only ? " (run doctor against a server on another node)" : "");
      continue;
    }
    std::vector<std::string> exports;
    for (const auto& v : names) exports.push_back(v + "=" + s->recommendable.front());
    fmt::print(out, "    export {}\n", fmt::join(exports, " "));
  }
}

// The pair's facts and the host-memory path verdict.
void print_pair_and_path(std::FILE* out, const doctor_report& r, rate_unit unit) {
  const auto yes = [](bool b) { return b ? "yes" : "no"; };
  if (r.pair.known) {
    fmt::print(out, "\nPair: {}", r.pair.same_host ? "one host (same boot id)" : "two hosts");
    if (r.pair.same_host) {
      fmt::print(out, "; IPC namespace shared: {}; PID namespace shared: {}; /dev/shm shared: {}",
                 yes(r.pair.same_ipc), yes(r.pair.same_pid), yes(r.pair.same_shm));
      if (r.pair.client_shm_bytes)
        fmt::print(out, " ({:.1f} GiB on the client)",
                   static_cast<double>(*r.pair.client_shm_bytes) / (1024.0 * 1024 * 1024));
    }
    fmt::print(out, "\n");
  }
  if (!r.verdict) return;
  const auto& v = *r.verdict;
  std::string rates;
  if (!r.path.empty() && r.path.front().status == case_status::ok)
    rates = fmt::format(", {}", format_rate(best_rate(r.path.front()), unit));
  if (r.path.size() > 1 && r.path[1].status == case_status::ok && r.path[1].latency_s)
    rates += fmt::format(", {} one-way at 8 B", format_seconds(r.path[1].latency_s->p50));
  fmt::print(out, "Path (UCX's default transports{}): expected {}; seen {}{} -> {}\n",
             r.path_iface.empty() ? "" : ", UCX_NET_DEVICES=" + r.path_iface, v.expected, v.seen,
             rates,
             v.verdict + (r.path_noisy.empty() ? "" : " (not clean: not a verdict to trust)"));
  if (!r.path_noisy.empty())
    fmt::print(out,
               "  not clean: this verdict rests on probes that waited for a CPU{} ({}); measure "
               "again on a quiet host with a CPU for each side, or pin with `pairperf run --cpu`\n",
               r.path_retried ? ", twice" : "", r.path_noisy);
  if (!v.cause.empty()) fmt::print(out, "  cause: {}\n", v.cause);
  if (!v.fix.empty()) fmt::print(out, "  fix: {}\n", v.fix);
}

void print_gpus(std::FILE* out, const doctor_report& r) {
  for (const side_view* s : {&r.client, &r.server}) {
    if (!s->gpus) continue;
    std::vector<std::string> list;
    for (const auto& g : *s->gpus)
      list.push_back(
          fmt::format("{} {} ({}, {} NVLinks)", g.index, g.uuid, g.bus_id, g.nvlink_peers.size()));
    fmt::print(out, "GPUs on the {}: {}\n", s->name,
               list.empty() ? std::string("none") : fmt::format("{}", fmt::join(list, "; ")));
  }
  if (r.gpus && !r.gpus->expected.empty())
    fmt::print(out, "GPU path: expected {} ({})\n", r.gpus->expected, r.gpus->why);
  for (const auto& c : r.path) {
    if (c.test.client_memory != memory_type::cuda) continue;
    fmt::print(out, "GPU buffers (UCX's default transports): {}{}\n",
               c.gpu_path.empty() ? to_string(c.status) : "seen " + c.gpu_path,
               c.gpu_path_why.empty() ? (c.message.empty() ? "" : ": " + c.message)
                                      : ": " + c.gpu_path_why);
  }
}

// "NCCL on the client: NCCL 2.28.9 (/usr/lib/libnccl.so.2) takes eth0:10.0.0.1 for its
// bootstrap: eth0 reaches the peer".
void print_nccl(std::FILE* out, const doctor_report& r) {
  if (r.nccl.empty()) return;
  fmt::print(out, "\nNCCL's bootstrap interface (asked of each side's libnccl.so.2):\n");
  for (const auto& v : r.nccl) {
    const std::string who =
        v.source == "rule"
            ? fmt::format("no libnccl answered; NCCL {}'s rule", v.version)
            : fmt::format("NCCL {} ({})", v.version.empty() ? "?" : v.version, v.library);
    const std::string takes =
        v.iface.empty() ? std::string("no interface") : fmt::format("{}:{}", v.iface, v.address);
    fmt::print(out, "  {:<7} {}: {}: {} ({})\n", v.side, who, takes, v.outcome, v.why);
  }
}

void print_outcome(std::FILE* out, const doctor_report& r) {
  print_nccl(out, r);
  for (const auto& [variable, a] : r.applications) {
    fmt::print(out, "\n{}'s own connection (each side's environment, judging {}): {}\n",
               a.test.transport, variable,
               a.status == case_status::ok ? std::string("works")
                                           : fmt::format("{}: {}", to_string(a.status), a.message));
  }
  if (r.findings.empty()) {
    if (!r.path_noisy.empty()) {
      fmt::print(out,
                 "\nNo findings, but inconclusive: the path verdict rests on probes that waited "
                 "for a CPU.\n");
    } else if (r.this_host_only) {
      fmt::print(out,
                 "\nNo findings on this host. The path to other nodes was not checked: run "
                 "`pairperf server` on a peer and `pairperf doctor PEER` here.\n");
    } else {
      fmt::print(out, "\nNo findings.\n");
    }
    return;
  }
  print_findings(out, r.findings);
}

}  // namespace

void print_report(std::FILE* out, const doctor_report& r, rate_unit unit) {
  print_heading(out, r);
  // Stopped in the hello: no probe ran, so there is no matrix to show.
  if (r.interrupted == 0 || !r.reach.empty()) print_matrix(out, r, unit);
  if (r.interrupted != 0) {
    // Probes that did not run say nothing about the network: no recommendation, no verdict.
    fmt::print(out, "\nInterrupted by {} during {}: what ran is above; no verdict.\n",
               signal_name(r.interrupted), r.interrupted_during);
    if (!r.findings.empty()) print_findings(out, r.findings);
    return;
  }
  print_recommendation(out, r);
  fmt::print(out, "\nVariables:\n  {:<24} {:<24} {}\n", "", "CLIENT", "SERVER");
  for (const auto& v : shown_variables())
    fmt::print(out, "  {:<24} {:<24} {}\n", v, env_value(r.client, v), env_value(r.server, v));
  print_pair_and_path(out, r, unit);
  print_gpus(out, r);
  print_outcome(out, r);
}

}  // namespace pairperf
