#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/interrupts.h"
#include "bench/pairperf/local_server.h"
#include "core/control.h"
#include "core/errors.h"
#include "core/exit_codes.h"
#include "core/output.h"
#include "core/units.h"
#include "diagnose/doctor.h"
#include "harness/client_hello.h"
#include "harness/context.h"
#include "transports/registry.h"

namespace pairperf::cli {
namespace {

// Points fd 1 at stderr for its lifetime, then restores it.
class stdout_to_stderr {
 public:
  stdout_to_stderr() : m_saved(::dup(STDOUT_FILENO)) {
    std::fflush(stdout);
    if (m_saved >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
  }
  stdout_to_stderr(const stdout_to_stderr&) = delete;
  stdout_to_stderr& operator=(const stdout_to_stderr&) = delete;
  ~stdout_to_stderr() {
    if (m_saved < 0) return;
    std::fflush(stdout);
    ::dup2(m_saved, STDOUT_FILENO);
    ::close(m_saved);
  }

 private:
  int m_saved;
};

struct doctor_args {
  std::string peer;
  std::vector<std::string> ifaces;
  std::string size = "1M";
  std::string probe_timeout = "4s";
  std::string duration = "0.2s";
  bool no_ucx = false;
  bool strict = false;
  std::string json;
  std::string units = "GB";
  token_options token;
  wait_busy_option wait_busy;
  bool quiet = false;
  double noise_threshold = 5;  // percent
};

test_case probe(const std::string& transport, const std::string& test, std::uint64_t size = 0) {
  const test_spec* spec = transport_registry::instance().find_test(transport, test);
  if (spec == nullptr) throw std::logic_error(fmt::format("no {} test {}", transport, test));
  test_case c;
  c.transport = transport;
  c.test = test;
  c.pattern = spec->pattern;
  c.size_bytes = size;
  return c;
}

// The transports that have a part in doctor (registry.h doctor_probe), the first of each role:
// one for reachability and bandwidth per interface pair (TCP); a library (UCX, where built) per
// interface and with its own choice of transports for the path verdict, unless --no-ucx.
doctor_probes probes(bool no_library) {
  std::optional<doctor_probes> p;
  const transport_entry* library = nullptr;
  const transport_entry* application = nullptr;
  for (const auto& e : transport_registry::instance().all()) {
    if (!e.doctor) continue;
    if (e.doctor->what == doctor_probe::role::reach && !p) {
      p.emplace();
      p->reach = probe(e.name, e.doctor->bandwidth_test);
    } else if (e.doctor->what == doctor_probe::role::library && library == nullptr) {
      library = &e;
    } else if (e.doctor->what == doctor_probe::role::application && application == nullptr) {
      application = &e;
    }
  }
  if (!p) throw std::logic_error("no transport offers doctor's reachability probe");
  if (application != nullptr)
    p->applications.push_back({application->doctor->device_variable,
                               probe(application->name, application->doctor->latency_test, 8)});
  if (library != nullptr) {
    p->library_transport = library->name;
    p->library_device_variable = library->doctor->device_variable;
  }
  if (library == nullptr || no_library) return *p;
  const doctor_probe& d = *library->doctor;
  p->library = probe(library->name, d.bandwidth_test);
  p->library->tls = d.per_interface_axis;
  p->path_bw = probe(library->name, d.bandwidth_test);
  p->path_lat = probe(library->name, d.latency_test, 8);
  // As the application: the side's own environment decides transports and devices (no axis
  // value, no interface), so UCX_TLS / UCX_NET_DEVICES (all, a list, a missing name) act as UCX
  // makes them act.
  p->applications.push_back({d.device_variable, probe(library->name, d.bandwidth_test, 8)});
  return *p;
}

int doctor_command(const doctor_args& a, const std::vector<std::string>& argv) {
  doctor_options o;
  o.ifaces = a.ifaces;
  o.strict = a.strict;
  o.size_bytes = parse_size(a.size);
  if (o.size_bytes == 0) throw usage_error("--size must be at least 1 byte");
  o.probe_timeout = parse_duration(a.probe_timeout);
  o.duration = parse_duration(a.duration);
  if (o.probe_timeout <= std::chrono::nanoseconds(0) || o.duration <= std::chrono::nanoseconds(0))
    throw usage_error("--probe-timeout and --duration must be positive");
  o.probes = probes(a.no_ucx);
  if (!(a.noise_threshold > 0 && a.noise_threshold <= 100))
    throw usage_error("--noise-threshold must be above 0 and at most 100 (%)");
  o.noise_threshold = a.noise_threshold / 100;
  o.token = a.token.resolve();
  o.wait_busy = a.wait_busy.resolve();
  o.argv = argv;
  const rate_unit unit = parse_rate_unit(a.units);
  const bool json_stdout = a.json == "-";
  // Checked and its room taken before the probes, not after them (a report measured 30-60 KiB).
  std::optional<reserved_output> report_file;
  if (!a.json.empty() && !json_stdout) report_file.emplace(a.json, 512 * 1024);
  catch_interrupts();
  o.interrupted = &interrupt_signal();

  std::optional<local_server> local;
  o.this_host_only = a.peer.empty();
  if (a.peer.empty()) {
    try {
      local.emplace(std::chrono::seconds(8), false);
      o.server = endpoint{"127.0.0.1", local->port()};
    } catch (const std::exception&) {
      // A terminal's Ctrl-C reaches the whole process group, the starting server too; the
      // report then says where doctor stopped.
      if (interrupt_signal().load() == 0) throw;
    }
  } else {
    o.server = parse_endpoint(a.peer, default_control_port);
  }
  // UCX logs its errors to stdout: with the JSON on stdout, everything else goes to stderr
  // until the report is written.
  std::optional<stdout_to_stderr> quiet_stdout;
  if (json_stdout) quiet_stdout.emplace();
  // NCCL's own answer on this side, for the hello's host facts (the server gives its own).
  describe_nccl_in_context();
  doctor_report r;
  try {
    r = run_doctor(o, a.quiet || json_stdout ? nullptr : stderr);
  } catch (const server_stayed_busy& e) {
    // Nothing could be judged: the server was serving others the whole time (not a failure).
    fmt::print(stderr, "pairperf doctor: inconclusive: {}\n", e.what());
    return code(exit_status::inconclusive);
  }
  quiet_stdout.reset();
  const nlohmann::json j = r;
  if (!r.server_unreachable.empty()) {
    // Nothing was probed; the document says so, for a job that reads it rather than stderr.
    fmt::print(stderr, "pairperf doctor: cannot reach the pairperf server: {}\n",
               r.server_unreachable);
    if (json_stdout) fmt::print("{}\n", j.dump(2));
    if (report_file) report_file->commit(j.dump(2) + "\n");
    return exit_code(r);
  }
  if (json_stdout) {
    fmt::print("{}\n", j.dump(2));
  } else {
    if (!a.quiet) print_report(stdout, r, unit);
    if (!a.json.empty()) {
      report_file->commit(j.dump(2) + "\n");
      if (!a.quiet) fmt::print("\nreport: {}\n", a.json);
    }
  }
  return exit_code(r);
}

}  // namespace

command add_doctor(CLI::App& root, const std::vector<std::string>& argv) {
  auto a = std::make_shared<doctor_args>();
  CLI::App* app = root.add_subcommand(
      "doctor",
      "Diagnose a pair: which interfaces reach the server and how fast, UCX per interface, fast "
      "path or fallback, and the UCX/NCCL/gloo interface variables of both sides. NCCL's "
      "interface is asked of each side's own libnccl.so.2 (PAIRPERF_NCCL_LIBRARY=PATH[:PATH] "
      "names it; else the loader's, the CUDA toolkit's and Python environments' are found)");
  app->add_option("peer", a->peer,
                  "pairperf server host[:port]; none = a local server on 127.0.0.1, which checks "
                  "this host only");
  app->add_option("-i,--iface", a->ifaces, "Only these local interfaces (repeatable)")
      ->delimiter(',');
  app->add_option("-s,--size", a->size, "Message size of the bandwidth probes")
      ->capture_default_str();
  app->add_option("--probe-timeout", a->probe_timeout, "Bound on each connection attempt")
      ->capture_default_str();
  app->add_option("-d,--duration", a->duration, "Time budget of each bandwidth probe")
      ->capture_default_str();
  app->add_flag("--no-ucx", a->no_ucx, "Probe with TCP only");
  app->add_flag("--strict", a->strict,
                "Exit 3 for `fragile` findings too (works for this pair, fails for other peers "
                "or by chance), not only for `fails`");
  app->add_option("--json", a->json,
                  "Also write the report as JSON to this file ('-': stdout only)");
  app->add_option("--units", a->units, "Bandwidth display: GB (1e9 B/s) or GiB")
      ->capture_default_str();
  a->token.add(app, "Token the server requires");
  a->wait_busy.add(app);
  app->add_option("--noise-threshold", a->noise_threshold,
                  "A probe is noisy when a side waited for a CPU longer than this share of its "
                  "measured time, in percent; a noisy path probe is measured again")
      ->capture_default_str();
  app->add_flag("-q,--quiet", a->quiet, "No report on stdout (exit code and --json only)");
  return command{app, [a, argv] { return doctor_command(*a, argv); }};
}

}  // namespace pairperf::cli
