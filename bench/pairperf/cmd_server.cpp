#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/pairperf/commands.h"
#include "core/control.h"
#include "core/errors.h"
#include "core/units.h"
#include "harness/server.h"
#include "host/noise.h"
#include "transports/memory/gpu_select.h"
#include "transports/registry.h"

namespace pairperf::cli {
namespace {

std::atomic<bool> g_stop{false};  // set by SIGINT/SIGTERM; the only global, as signals require
extern "C" void on_stop_signal(int /*sig*/) { g_stop.store(true); }

struct server_args {
  std::string listen;
  std::uint16_t port = default_control_port;
  bool once = false;
  int ready_fd = -1;
  token_options token;
  std::string handshake = "5s";
  std::string idle = "60s";
  std::string connect = "30s";
  std::string per_case = "120s";
  std::string case_memory;  // "" = automatic
  std::uint64_t iterations = server_limits{}.max_iterations;
  std::string session_bytes = "16T";
  std::size_t pending = server_limits{}.max_pending;
  std::size_t queue = server_limits{}.max_queue;
  std::string allow_drive;
  bool quiet = false;
  std::string gpu;
  int cpu = -1;
  std::vector<std::string> transports;
};

}  // namespace

namespace {

// The server's options from its command line; throws usage_error.
server_options make_server_options(const server_args& a) {
  server_options o;
  o.listen_host = a.listen;
  o.port = a.port;
  o.once = a.once;
  if (a.ready_fd >= 0) o.ready_fd = a.ready_fd;
  o.token = a.token.resolve();
  o.timeouts.handshake = parse_duration(a.handshake);
  o.timeouts.idle = parse_duration(a.idle);
  auto& l = o.limits;
  l.max_connect = parse_duration(a.connect);
  l.max_case = parse_duration(a.per_case);
  l.max_case_memory = a.case_memory.empty() ? automatic_case_memory()
                                            : parse_size(a.case_memory, std::uint64_t{1} << 60);
  l.max_iterations = a.iterations;
  l.max_session_bytes = parse_size(a.session_bytes, std::uint64_t{1} << 60);
  if (a.pending == 0 || a.queue == 0)
    throw usage_error("--max-pending and --max-queue must be at least 1");
  l.max_pending = a.pending;
  l.max_queue = a.queue;
  if (!a.allow_drive.empty()) {
    if (o.token.empty())
      throw usage_error(
          "--allow-drive needs a token (--token, --token-file or $PAIRPERF_TOKEN): without one "
          "anyone could make this server send data anywhere it allows");
    o.drive = drive_allowlist(a.allow_drive);
  }
  for (const auto& t : a.transports) {
    if (transport_registry::instance().find(t) == nullptr)
      throw usage_error(fmt::format("--transport {}: no such transport (built in: {})", t,
                                    fmt::join(transport_registry::instance().names(), ", ")));
  }
  o.transports = a.transports;
  o.log = a.quiet ? nullptr : stderr;
  return o;
}

}  // namespace

command add_server(CLI::App& root) {
  auto args = std::make_shared<server_args>();
  CLI::App* app =
      root.add_subcommand("server",
                          "Serve clients on the control port: hellos at once, one measurement "
                          "at a time, each in its own process");
  app->add_option("--listen", args->listen,
                  "Address to listen on (default: every address with a token, 127.0.0.1 without)");
  app->add_option("-p,--port", args->port, "Control port (0 = any free port)")
      ->capture_default_str();
  app->add_flag("--once", args->once, "Serve one client, then exit");
  app->add_option("--ready-fd", args->ready_fd,
                  "Write the port to this file descriptor once listening")
      ->group("");
  args->token.add(app, "Require clients to present this token");
  app->add_option("--timeout-handshake", args->handshake, "Bound on each control reply, e.g. 5s")
      ->capture_default_str();
  app->add_option("--timeout-idle", args->idle, "Bound on a client's silence between cases")
      ->capture_default_str();
  app->add_option("--timeout-connect", args->connect,
                  "The longest a data connection may take, whatever a client asks")
      ->capture_default_str();
  app->add_option("--timeout-case", args->per_case,
                  "The longest one phase of a case may take, whatever a client asks")
      ->capture_default_str();
  app->add_option("--max-case-memory", args->case_memory,
                  "Memory one case may take on the server, buffers and samples (default: a "
                  "quarter of what this process may still use)");
  app->add_option("--max-iterations", args->iterations, "Iterations one phase may run")
      ->capture_default_str();
  app->add_option("--max-session-bytes", args->session_bytes,
                  "Data one client session may move through the server")
      ->capture_default_str();
  app->add_option("--max-pending", args->pending, "Connections saying hello at once")
      ->capture_default_str();
  app->add_option("--max-queue", args->queue,
                  "Clients waiting for their turn; more are told to retry later")
      ->capture_default_str();
  app->add_option("--allow-drive", args->allow_drive,
                  "Let clients ask this server to measure towards these targets (pairperf mesh "
                  "--hosts): CIDRs, addresses or host names, comma-separated, or '*'. Needs a "
                  "token");
  app->add_flag("-q,--quiet", args->quiet, "Do not log clients and cases to stderr");
  app->add_option(
      "--gpu", args->gpu,
      "GPU for cuda buffers: an index (CUDA_VISIBLE_DEVICES applies), a UUID or a PCI bus id");
  app->add_option("-t,--transport", args->transports,
                  "Serve only these transports (comma-separated; default every built-in one): "
                  "cases of others are refused, and their libraries are neither loaded nor probed")
      ->delimiter(',');
  app->add_option("--cpu", args->cpu,
                  "Pin the server to this CPU (as ucx_perftest -c, iperf3 -A); recorded per case "
                  "in host_noise.server.cpus_allowed");
  return command{app, [args] {
                   if (args->cpu >= 0) pin_to_cpu(args->cpu);
                   set_gpu_selection(parse_gpu_selector(args->gpu));
                   const server_options o = make_server_options(*args);
                   std::signal(SIGINT, on_stop_signal);
                   std::signal(SIGTERM, on_stop_signal);
                   return run_server(o, g_stop);
                 }};
}

}  // namespace pairperf::cli
