// doctor's analysis (doctor.h's analyze): everything after the measurements. The two sides'
// views from the context and the reach probes, the variable checks, and the findings of the
// links, the library probes and the paths.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "diagnose/doctor.h"
#include "harness/context.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

// Every interface of a side's host facts, whatever its state.
std::vector<interface_info> all_interfaces_of(const nlohmann::json& host) {
  if (!host.is_object() || !host.contains("interfaces")) return {};
  return host.at("interfaces").get<std::vector<interface_info>>();
}

// Those that can carry a probe: up, with an address.
std::vector<interface_info> usable_of(std::vector<interface_info> all) {
  std::erase_if(all, [](const interface_info& i) { return !i.up || i.addresses.empty(); });
  return all;
}

std::vector<std::string> names_of(const std::vector<interface_info>& list) {
  std::vector<std::string> out;
  for (const auto& i : list) out.push_back(i.name);
  return out;
}

// The probe's data connection came up (the client described what carried it) and then the
// probe failed: the stream stalled past its bound or the peer closed it.
bool connected_then_failed(const case_result& r) {
  return r.status == case_status::error && r.provenance.has_value();
}

// Segments the client's TCP streams of a probe retransmitted (provenance: TCP_INFO), if known.
std::optional<std::uint64_t> retransmitted(const case_result& r) {
  if (!r.provenance || !r.provenance->client.is_object()) return std::nullopt;
  const auto streams = r.provenance->client.find("streams");
  if (streams == r.provenance->client.end() || !streams->is_array()) return std::nullopt;
  std::uint64_t total = 0;
  for (const auto& s : *streams) total += s.value("retransmits_total", std::uint64_t{0});
  return total;
}

// The side's view of the matrix: which of its interfaces were tried, which reached, fastest first.
void fill_reach(side_view& s, const std::vector<probe_result>& cells, bool local) {
  std::map<std::string, double> best;
  for (const auto& cell : cells) {
    const std::string& name = local ? cell.target.local_iface : cell.target.peer_iface;
    s.tested.insert(name);
    if (cell.result.status == case_status::ok) {
      s.reaching.insert(name);
      best[name] = std::max(best[name], headline_of(cell.result, headline::bandwidth).value_or(0));
    } else if (connected_then_failed(cell.result)) {
      s.reaching.insert(name);
      s.degraded.insert(name);
      best.try_emplace(name, 0.0);  // ranked after every interface that finished its probe
    }
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [name, rate] : best) order.emplace_back(rate, name);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (const auto& [rate, name] : order) {
    s.ranked.push_back(name);
    if (s.loopback.count(name) == 0) s.recommendable.push_back(name);
  }
}

side_view make_side(const std::string& name, const nlohmann::json& host, const nlohmann::json& env,
                    const nlohmann::json& tool) {
  side_view s;
  s.name = name;
  if (env.is_object()) s.env = env;
  s.interfaces = all_interfaces_of(host);
  const auto ifaces = usable_of(s.interfaces);
  s.ifaces = names_of(ifaces);
  if (host.is_object() && host.contains("nccl")) s.nccl = nccl_side_from(host.at("nccl"));
  for (const auto& i : ifaces) {
    if (i.loopback) s.loopback.insert(i.name);
  }
  if (host.is_object()) {
    for (const auto& d : host.value("rdma_devices", nlohmann::json::array()))
      s.rdma.push_back(d.value("name", std::string()));
    const auto addrs = host.value("hostname_addresses", std::vector<std::string>());
    // gloo takes the first address the name resolves to; prefer what getaddrinfo lists first.
    if (!addrs.empty()) s.hostname_address = addrs.front();
    for (const auto& i : ifaces) {
      for (const auto& a : i.addresses) {
        s.addresses[a.address] = i.name;
        if (a.address == s.hostname_address) s.hostname_iface = i.name;
      }
    }
    // {"available", "gpus", "reason"} from gpus.h; unknown (nullopt) where NVML was absent.
    if (host.contains("gpus") && host.at("gpus").is_object() &&
        host.at("gpus").value("available", false))
      s.gpus = host.at("gpus").value("gpus", std::vector<gpu_info>());
  }
  // Each transport-selection variable (UCX_TLS), judged by its transport against this side's
  // library as its hello describes it.
  const nlohmann::json none = nlohmann::json::object();
  const auto libraries = tool.is_object() ? tool.find("libraries") : tool.end();
  const bool described = tool.is_object() && libraries != tool.end() && libraries->is_object();
  for (const auto& e : transport_registry::instance().all()) {
    // The application library's devices as this side would make them (gloo's description).
    if (e.doctor && e.doctor->what == doctor_probe::role::application && described &&
        libraries->contains(e.name) && !s.gloo.known)
      s.gloo = gloo_side_from(libraries->at(e.name));
    if (!e.env_axis) continue;
    side_view::axis_variable a{e.name, e.env_axis->variable, {}, {}};
    const auto value = s.env.find(a.variable);
    const auto library = described ? libraries->find(e.name) : libraries;
    if (value != s.env.end() && value->is_string() && described && library != libraries->end())
      std::tie(a.missing, a.available) = e.env_axis->judge(value->get<std::string>(), *library);
    s.axis_variables.push_back(std::move(a));
  }
  return s;
}

// Each GPU row of the path (both sides have GPUs, else there is none): a fallback, or GPU buffers
// the library cannot move at all, is a finding.
void add_gpu_path_findings(doctor_report& r) {
  for (const auto& c : r.path) {
    // Both sides have GPUs (else there is no such row): a fallback, or GPU buffers UCX cannot move
    // at all (skipped: a UCX without cuda_copy; failed), is a finding.
    if (c.test.client_memory != memory_type::cuda) continue;
    if (c.gpu_path != "fallback" && c.status == case_status::ok) continue;
    if (c.status != case_status::ok) {
      // Not measured: UCX or CUDA cannot move GPU buffers here at all; the case says why. Where
      // CUDA found no device it may use (cudaErrorNoDevice's words, or none left by --gpu) and a
      // side chose its GPUs with CUDA_VISIBLE_DEVICES, that choice is the cause (seen on an H100:
      // NVML lists the GPU, CUDA under CUDA_VISIBLE_DEVICES=<a GPU it does not have> sees none).
      std::vector<std::string> chosen;
      for (const side_view* s : {&r.client, &r.server}) {
        const auto v = s->env.find("CUDA_VISIBLE_DEVICES");
        if (v != s->env.end() && v->is_string())
          chosen.push_back(fmt::format("{} on the {}", v->get<std::string>(), s->name));
      }
      const bool no_device = c.message.find("no CUDA-capable device") != std::string::npos ||
                             c.message.find("no CUDA device visible") != std::string::npos;
      r.findings.push_back(finding{
          "pair", "GPU path",
          fmt::format("GPU buffers could not go through UCX: {} ({})", to_string(c.status),
                      c.message),
          no_device && !chosen.empty()
              ? fmt::format("CUDA finds no GPU to use under CUDA_VISIBLE_DEVICES={}: name a GPU "
                            "that side has (`nvidia-smi -L` there lists them), or unset it",
                            fmt::join(chosen, ", "))
              : "GPU data needs the NVIDIA driver on both sides and a UCX built with CUDA "
                "(`pairperf info` says which is missing; scripts/build-ucx-cuda builds such a "
                "UCX)",
          severity::fails, r.library_transport});
      continue;
    }
    const std::string cause = r.gpus && !r.gpus->problem.empty() ? r.gpus->problem : c.gpu_path_why;
    r.findings.push_back(
        finding{"pair", "GPU path", fmt::format("GPU buffers: {} ({})", c.gpu_path, cause),
                r.gpus && !r.gpus->fix.empty()
                    ? r.gpus->fix
                    : "make cuda_ipc possible: both processes must see both GPUs, and "
                      "UCX_TLS must include cuda_copy and cuda_ipc"});
  }
}

// The two sides' views (hosts, variables, interfaces ranked by the reach probes) and the
// pair's facts, from the context.
void read_sides(doctor_report& r) {
  const nlohmann::json& ctx = r.context;
  const auto part = [&](const char* key) {
    return ctx.is_object() && ctx.contains(key) ? ctx.at(key) : nlohmann::json::object();
  };
  const nlohmann::json env = part("env");
  r.client = make_side("client", part("client"), env.value("client", nlohmann::json::object()),
                       part("tool"));
  r.server = make_side("server", part("server"), env.value("server", nlohmann::json::object()),
                       part("server_tool"));
  fill_reach(r.client, r.reach, true);
  fill_reach(r.server, r.reach, false);
  r.pair = compare_hosts(part("client"), part("server"));
  r.client.loopback_reaches_peer = r.server.loopback_reaches_peer = r.pair.same_net;
}

// The findings of the reach probes: links that connect and then lose the probe, and a pair
// whose interfaces do not reach each other at all.
void add_reach_findings(doctor_report& r) {
  for (const auto& cell : r.reach) {
    if (!connected_then_failed(cell.result)) continue;
    const auto lost = retransmitted(cell.result);
    r.findings.push_back(finding{
        "pair", "link",
        fmt::format("{} -> {} ({}): the data connection came up, then the probe failed{}: the "
                    "path loses or delays packets, it is not cut ({})",
                    cell.target.local_iface, cell.target.peer_address, cell.target.peer_iface,
                    lost ? fmt::format(" after {} retransmitted segment(s)", *lost) : "",
                    cell.result.message),
        "check drops and errors on both ends and on the path (ip -s link, ethtool -S, the "
        "switch's counters); a job over this link stalls the same way"});
  }
  if (r.reach.empty()) {
    r.findings.push_back(finding{"pair", "interfaces",
                                 "no local interface pairs with an address the server advertises "
                                 "(check --iface, and that both sides have addresses up)",
                                 "bring up an interface on the server's subnet"});
  } else if (r.client.reaching.empty()) {
    r.findings.push_back(
        finding{"pair", "interfaces",
                fmt::format("no interface of the client reaches any address of the server over TCP "
                            "(tried {} pairs); only the control connection got through",
                            r.reach.size()),
                "check routes and firewalls between the pair's data interfaces"});
  }
}

// The library probes that fail where TCP reaches the server from the same interface.
void add_library_findings(doctor_report& r) {
  // The library probe's device variable (registry: UCX_NET_DEVICES) is the finding's subject.
  const auto* library = transport_registry::instance().find(r.library_transport);
  const std::string device_variable =
      library && library->doctor ? library->doctor->device_variable : r.library_transport;
  for (const auto& u : r.library) {
    if (u.result.status == case_status::ok || u.result.status == case_status::skipped) continue;
    if (r.client.reaching.count(u.target.local_iface) == 0) continue;
    r.findings.push_back(finding{
        "client", device_variable,
        fmt::format("TCP reaches the server from {}, but UCX over tcp with {}={} fails: {}",
                    u.target.local_iface, device_variable, u.target.local_iface, u.result.message),
        "run with UCX_LOG_LEVEL=info on both sides; check UCX_TCP_* options and the server's "
        "UCX_NET_DEVICES",
        severity::fragile, r.library_transport});
  }
}

// The GPUs of the pair, the GPU path and the host path's verdict, and their findings.
void judge_paths(doctor_report& r) {
  r.gpus.reset();
  if (r.client.gpus && r.server.gpus) {
    r.gpus = judge_gpu_pair(r.pair.same_host, *r.client.gpus, *r.server.gpus);
    if (!r.gpus->problem.empty())
      r.findings.push_back(finding{"pair", "GPUs", r.gpus->problem, r.gpus->fix});
  }
  add_gpu_path_findings(r);
  r.verdict.reset();
  if (!r.path.empty()) {
    r.verdict = judge_host_path(r.pair, r.path.front());
    const auto& v = *r.verdict;
    if (v.verdict == "failed" || v.verdict.rfind("fallback", 0) == 0) {
      r.findings.push_back(finding{"pair", "path",
                                   fmt::format("expected {}, UCX used {}: {}; cause: {}",
                                               v.expected, v.seen, v.verdict, v.cause),
                                   v.fix, severity::fails, r.library_transport});
    }
  }
}

// Two sides whose libraries cannot be trusted together (context.h: library_mismatches): that is
// the finding, and the transport's failing probes are its evidence, not findings about
// interfaces or variables that no setting of them would fix.
void fold_library_mismatch(doctor_report& r) {
  for (const auto& m : library_mismatches(r.context)) {
    std::vector<std::string> evidence;
    bool failed = false;
    std::erase_if(r.findings, [&](const finding& f) {
      if (f.measured_by != m.transport) return false;
      evidence.push_back(f.problem);
      failed = failed || f.severity == severity::fails;
      return true;
    });
    r.findings.push_back(finding{
        "pair", m.transport + " version",
        evidence.empty() ? m.problem
                         : fmt::format("{}; between these two, {} probe(s) failed: {}", m.problem,
                                       evidence.size(), fmt::join(evidence, " | ")),
        m.fix, failed ? severity::fails : severity::fragile});
  }
}

}  // namespace

std::vector<interface_info> usable_interfaces_of(const nlohmann::json& host) {
  return usable_of(all_interfaces_of(host));
}

void analyze(doctor_report& r) {
  read_sides(r);
  measured_connections measured;
  for (const auto& a : r.applications) {
    if (a.result.status == case_status::skipped) continue;
    measured[a.variable] =
        application_outcome{true, a.result.status == case_status::ok, a.result.message};
  }
  r.findings = check_variables(r.client, r.server, measured);
  r.nccl = judge_nccl(r.client);
  for (auto& v : judge_nccl(r.server)) r.nccl.push_back(std::move(v));
  add_reach_findings(r);
  add_library_findings(r);
  judge_paths(r);
  fold_library_mismatch(r);
}

}  // namespace pairperf
