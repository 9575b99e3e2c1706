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
  try {
    run_client(c, out);
  } catch (const step_error&) {
    if (context != nullptr) *context = out.context;  // this side's facts, when the hello fails
    throw;
  }
  if (context != nullptr) *context = out.context;
  return std::move(out.results);
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

// The probes' plan: the interface pairs (reach), the local interfaces among them, in their
// first pair's order (the library's), and every case in the order its result is filed.
struct probe_plan {
  std::vector<probe_target> targets;
  std::vector<std::string> library_ifaces;  // empty without the library probes
  std::vector<test_case> cases;
};

probe_plan plan_probes(const doctor_options& o, const nlohmann::json& context) {
  probe_plan p;
  p.targets = plan_matrix(usable_interfaces(),
                          usable_interfaces_of(context.value("server", nlohmann::json())),
                          context.value("server_ip", std::string()),
                          context.value("server_listen", std::string()), o.ifaces);
  for (const auto& t : p.targets) {
    test_case c = o.probes.reach;
    c.size_bytes = o.size_bytes;
    c.iface = t.local_iface;
    c.target = t.peer_address;
    p.cases.push_back(c);
  }
  if (o.probes.library.has_value()) {
    for (const auto& t : p.targets) {
      if (std::find(p.library_ifaces.begin(), p.library_ifaces.end(), t.local_iface) ==
          p.library_ifaces.end())
        p.library_ifaces.push_back(t.local_iface);
    }
    for (const auto& name : p.library_ifaces) {
      test_case c = *o.probes.library;
      c.size_bytes = o.size_bytes;
      c.iface = name;
      p.cases.push_back(c);
    }
  }
  for (const auto& a : o.probes.applications) p.cases.push_back(a.probe);
  return p;
}

// Each probe's result to its place in the report: the reach cells, the library cells, the
// applications' connections, in the plan's order.
void file_results(const doctor_options& o, const probe_plan& p,
                  const std::vector<case_result>& results, doctor_report& r) {
  const std::size_t reach = p.targets.size();
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (i < reach) {
      r.reach.push_back(probe_result{p.targets[i], results[i]});
    } else if (i - reach < p.library_ifaces.size()) {
      const auto& name = p.library_ifaces[i - reach];
      r.library.push_back(probe_result{probe_target{name, "", ""}, results[i]});
    } else {
      const auto& a = o.probes.applications.at(i - reach - r.library.size());
      r.applications.push_back(doctor_report::application_result{a.variable, results[i]});
    }
  }
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
  } catch (const server_stayed_busy&) {
    throw;
  } catch (const step_error& e) {
    // A signal cut the hello short: not a network failure.
    if (!stopped("the hello")) {
      r.server_unreachable = e.what();
      r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return r;
  }
  if (stopped("the hello")) return r;

  const bool with_library = o.probes.library.has_value();
  const probe_plan plan = plan_probes(o, r.context);
  const std::size_t path_cases = (o.probes.path_bw ? 2 : 0) + o.probes.applications.size();
  r.bound = doctor_bound(o, plan.targets.size(), plan.library_ifaces.size(), path_cases);
  if (progress != nullptr) {
    fmt::print(progress,
               "pairperf doctor: {} interface pair(s){}; connection attempts time out after {}, "
               "the whole probe at worst {}\n",
               plan.targets.size(),
               with_library
                   ? fmt::format(", {} UCX interface(s), the UCX path", plan.library_ifaces.size())
                   : std::string(),
               format_seconds(static_cast<double>(o.probe_timeout.count()) * 1e-9),
               format_seconds(static_cast<double>(r.bound.count()) * 1e-9));
  }
  file_results(o, plan, run_cases(o, plan.cases, progress, nullptr), r);
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
  if (!r.server_unreachable.empty()) return code(exit_status::failed);
  for (const auto& f : r.findings) {
    if (f.severity == severity::fails || (r.strict && f.severity == severity::fragile))
      return code(exit_status::missed);
  }
  if (!r.path_noisy.empty()) return code(exit_status::inconclusive);
  return code(exit_status::held);
}

}  // namespace pairperf
