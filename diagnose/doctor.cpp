#include "diagnose/doctor.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "core/exit_codes.h"
#include "harness/client.h"
#include "harness/context.h"
#include "harness/reporter.h"
#include "harness/token.h"
#include "host/noise.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

client_options base_options(const doctor_options& o) {
  client_options c;
  c.server = o.server;
  c.token = o.token;
  c.wait_busy = o.wait_busy;
  c.nccl_budget = std::chrono::seconds(5);  // the server asks its own libnccl.so.2 in its hello
  c.argv = redact_argv(o.argv);
  c.interrupted = o.interrupted;
  c.config.duration = o.duration;
  c.config.noise_threshold = o.noise_threshold;
  c.config.timeouts.connect = o.probe_timeout;
  c.config.timeouts.handshake =
      std::max<std::chrono::nanoseconds>(o.probe_timeout, std::chrono::seconds(2));
  c.config.timeouts.per_case =
      std::max<std::chrono::nanoseconds>(o.duration * 10, std::chrono::seconds(3));
  return c;
}

std::vector<case_result> run_cases(const doctor_options& o, std::vector<test_case> cases,
                                   std::FILE* progress, nlohmann::json* context) {
  client_options c = base_options(o);
  for (std::size_t i = 0; i < cases.size(); ++i) cases[i].index = i;
  c.cases = std::move(cases);
  collecting_reporter out(progress);
  run_client(c, out);
  if (context != nullptr) *context = out.context;
  return std::move(out.results);
}

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

std::vector<interface_info> interfaces_of(const nlohmann::json& host) {
  return usable_of(all_interfaces_of(host));
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
                "UCX)"});
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

}  // namespace

std::vector<probe_target> plan_matrix(const std::vector<interface_info>& local,
                                      const std::vector<interface_info>& peer,
                                      const std::string& control_peer_ip,
                                      const std::string& server_listen,
                                      const std::vector<std::string>& only) {
  const bool loop_control = is_loopback(control_peer_ip);
  const bool any = server_listen.empty() || server_listen == "::";
  const auto listened = [&](const iface_address& a) {
    if (any) return true;
    if (server_listen == "0.0.0.0") return a.family == AF_INET;
    return a.address == server_listen;
  };
  std::vector<probe_target> out;
  for (const auto& l : local) {
    if (!only.empty() && std::find(only.begin(), only.end(), l.name) == only.end()) continue;
    for (const auto& p : peer) {
      for (const auto& a : p.addresses) {
        if (is_link_local(a.address) || !listened(a)) continue;
        const bool peer_lo = is_loopback(a.address);
        if (loop_control ? !(l.loopback && peer_lo) : (l.loopback || peer_lo)) continue;
        const bool family_ok =
            std::any_of(l.addresses.begin(), l.addresses.end(), [&](const iface_address& mine) {
              return mine.family == a.family && !is_link_local(mine.address);
            });
        const bool on_subnet =
            std::any_of(l.addresses.begin(), l.addresses.end(),
                        [&](const iface_address& mine) { return in_subnet(mine, a.address); });
        if (family_ok) out.push_back(probe_target{l.name, p.name, a.address, on_subnet});
      }
    }
  }
  return out;
}

std::chrono::nanoseconds doctor_bound(const doctor_options& o, std::size_t reach_cells,
                                      std::size_t library_cells, std::size_t path_cases) {
  const client_options c = base_options(o);
  const auto& t = c.config.timeouts;
  // A case: set-up reply, data connect, then warm-up and measurement (each a run request, the
  // pattern and the results), as client.cpp bounds them.
  const auto per_case = (t.per_case + t.connect) + t.connect +
                        2 * (t.handshake + (t.per_case + t.connect) + (t.per_case + t.handshake));
  const auto per_run = t.connect + 2 * t.handshake;  // control connect, hello, bye
  return 3 * per_run + static_cast<long>(reach_cells + library_cells + path_cases) * per_case;
}

void analyze(doctor_report& r) {
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
  measured_connections measured;
  for (const auto& a : r.applications) {
    if (a.result.status == case_status::skipped) continue;
    measured[a.variable] =
        application_outcome{true, a.result.status == case_status::ok, a.result.message};
  }
  r.findings = check_variables(r.client, r.server, measured);
  r.nccl = judge_nccl(r.client);
  for (auto& v : judge_nccl(r.server)) r.nccl.push_back(std::move(v));

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
        severity::fragile});
  }
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
                                   v.fix});
    }
  }
}

namespace {

// The library's own choice of transports between the pair (and, where both sides see GPUs, for
// GPU buffers), measured once more when the host descheduled the probes.
void measure_path(const doctor_options& o, doctor_report& r, std::FILE* progress) {
  // UCX's own choice of transports, as an application with this environment gets it; pinned
  // to the best interface unless the environment already names devices.
  const bool env_devices = !o.probes.library_device_variable.empty() &&
                           r.client.env.contains(o.probes.library_device_variable);
  r.path_iface = env_devices ? std::string() : r.client.ranked.front();
  test_case bw = *o.probes.path_bw;
  test_case lat = *o.probes.path_lat;
  bw.size_bytes = o.size_bytes;
  bw.iface = lat.iface = r.path_iface;
  std::vector<test_case> cases{bw, lat};
  // Both sides see GPUs: the GPU path too (cuda buffers on both sides, UCX's default transports).
  const bool gpus =
      r.client.gpus && !r.client.gpus->empty() && r.server.gpus && !r.server.gpus->empty();
  if (gpus) {
    test_case g = bw;
    g.client_memory = g.server_memory = memory_type::cuda;
    cases.push_back(g);
  }
  r.path = run_cases(o, cases, progress, nullptr);
  // A verdict on probes the host descheduled is no verdict: measure once more, then say so. The
  // same for probes that the doctor's own two processes kept waiting (a client and local server
  // that busy-poll on one CPU): their figure is the contention's, not the path's.
  const auto noisy = [&] {
    for (const auto& c : r.path) {
      if (is_noisy(c.host_noise)) return "noisy: " + noise_reason(c.host_noise);
      if (is_self_contended(c.host_noise))
        return "contended by its own processes: " + self_contention_reason(c.host_noise);
    }
    return std::string();
  };
  if (!noisy().empty() && (o.interrupted == nullptr || o.interrupted->load() == 0)) {
    if (progress != nullptr)
      fmt::print(progress, "pairperf doctor: the path probe was not clean ({}); measuring again\n",
                 noisy());
    r.path_retried = true;
    r.path = run_cases(o, cases, progress, nullptr);
  }
  r.path_noisy = noisy();
}

}  // namespace

doctor_report run_doctor(const doctor_options& o, std::FILE* progress) {
  const auto start = std::chrono::steady_clock::now();
  doctor_report r;
  r.reach_transport = o.probes.reach.transport;
  r.library_transport = o.probes.library_transport;
  r.probe_timeout = o.probe_timeout;
  r.this_host_only = o.this_host_only;
  r.strict = o.strict;
  // Whether a signal asked doctor to stop; it records where (what ran is kept).
  const auto stopped = [&](const char* during) {
    const int sig = o.interrupted != nullptr ? o.interrupted->load() : 0;
    if (sig != 0 && r.interrupted == 0) {
      r.interrupted = sig;
      r.interrupted_during = during;
      r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return sig != 0;
  };
  try {
    run_cases(o, {}, nullptr, &r.context);  // hello only: the server's interfaces and variables
  } catch (const step_error&) {
    if (!stopped("the hello")) throw;  // a signal cut the hello short: not a network failure
    return r;
  }
  if (stopped("the hello")) return r;

  const bool with_library = o.probes.library.has_value();
  const auto targets =
      plan_matrix(usable_interfaces(), interfaces_of(r.context.value("server", nlohmann::json())),
                  r.context.value("server_ip", std::string()),
                  r.context.value("server_listen", std::string()), o.ifaces);
  std::vector<test_case> cases;
  for (const auto& t : targets) {
    test_case c = o.probes.reach;
    c.size_bytes = o.size_bytes;
    c.iface = t.local_iface;
    c.target = t.peer_address;
    cases.push_back(c);
  }
  std::vector<std::string> library_ifaces;
  for (const auto& t : targets) {
    if (std::find(library_ifaces.begin(), library_ifaces.end(), t.local_iface) ==
        library_ifaces.end())
      library_ifaces.push_back(t.local_iface);
  }
  if (with_library) {
    for (const auto& name : library_ifaces) {
      test_case c = *o.probes.library;
      c.size_bytes = o.size_bytes;
      c.iface = name;
      cases.push_back(c);
    }
  }
  for (const auto& a : o.probes.applications) cases.push_back(a.probe);
  const std::size_t path_cases = (o.probes.path_bw ? 2 : 0) + o.probes.applications.size();
  r.bound = doctor_bound(o, targets.size(), with_library ? library_ifaces.size() : 0, path_cases);
  if (progress != nullptr) {
    fmt::print(progress,
               "pairperf doctor: {} interface pair(s){}; connection attempts time out after {}, "
               "the whole probe at worst {}\n",
               targets.size(),
               with_library
                   ? fmt::format(", {} UCX interface(s), the UCX path", library_ifaces.size())
                   : std::string(),
               format_seconds(static_cast<double>(o.probe_timeout.count()) * 1e-9),
               format_seconds(static_cast<double>(r.bound.count()) * 1e-9));
  }
  const auto results = run_cases(o, cases, progress, nullptr);
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (i < targets.size()) {
      r.reach.push_back(probe_result{targets[i], results[i]});
    } else if (i - targets.size() < (with_library ? library_ifaces.size() : 0)) {
      const auto& name = library_ifaces[i - targets.size()];
      r.library.push_back(probe_result{probe_target{name, "", ""}, results[i]});
    } else {
      const auto& a = o.probes.applications.at(i - targets.size() - r.library.size());
      r.applications.push_back(doctor_report::application_result{a.variable, results[i]});
    }
  }
  // Probes that did not run would read as interfaces that do not reach: no verdict on them.
  if (stopped("the probes")) return r;
  analyze(r);  // ranks the interfaces for the path cases

  if (o.probes.path_bw && o.probes.path_lat && !r.client.ranked.empty()) {
    measure_path(o, r, progress);
    // The findings of the complete probes stand; the path's verdict is not judged.
    if (stopped("the path probe")) return r;
    analyze(r);
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

int exit_code(const doctor_report& r) {
  if (r.interrupted != 0) return 128 + r.interrupted;
  for (const auto& f : r.findings) {
    if (f.severity == severity::fails || (r.strict && f.severity == severity::fragile))
      return code(exit_status::missed);
  }
  if (!r.path_noisy.empty()) return code(exit_status::inconclusive);
  return code(exit_status::held);
}

}  // namespace pairperf
