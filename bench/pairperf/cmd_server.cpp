#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include "bench/pairperf/commands.h"
#include "harness/control.h"
#include "harness/noise.h"
#include "harness/server.h"
#include "harness/units.h"
#include "transports/memory/gpu_select.h"

namespace pairperf::cli {
namespace {

std::atomic<bool> g_stop{false};  // set by SIGINT/SIGTERM; the only global, as signals require
extern "C" void on_stop_signal(int /*sig*/) { g_stop.store(true); }

struct server_args {
  std::string listen;
  std::uint16_t port = default_control_port;
  bool once = false;
  int ready_fd = -1;
  std::string token;
  std::string handshake = "5s";
  std::string idle = "60s";
  bool quiet = false;
  std::string gpu;
  int cpu = -1;
};

}  // namespace

command add_server(CLI::App& root) {
  auto args = std::make_shared<server_args>();
  CLI::App* app =
      root.add_subcommand("server", "Serve clients one after another on the control port");
  app->add_option("--listen", args->listen, "Address to listen on (default: all)");
  app->add_option("-p,--port", args->port, "Control port (0 = any free port)")
      ->capture_default_str();
  app->add_flag("--once", args->once, "Serve one client, then exit");
  app->add_option("--ready-fd", args->ready_fd,
                  "Write the port to this file descriptor once listening")
      ->group("");
  app->add_option("--token", args->token, "Require clients to present this token")->envname("PAIRPERF_TOKEN");
  app->add_option("--timeout-handshake", args->handshake, "Bound on each control reply, e.g. 5s")
      ->capture_default_str();
  app->add_option("--timeout-idle", args->idle, "Bound on a client's silence between cases")
      ->capture_default_str();
  app->add_flag("-q,--quiet", args->quiet, "Do not log clients and cases to stderr");
  app->add_option(
      "--gpu", args->gpu,
      "GPU for cuda buffers: an index (CUDA_VISIBLE_DEVICES applies), a UUID or a PCI bus id");
  app->add_option("--cpu", args->cpu,
                  "Pin the server to this CPU (as ucx_perftest -c, iperf3 -A); recorded per case "
                  "in host_noise.server.cpus_allowed");
  return command{app, [args] {
                   if (args->cpu >= 0) pin_to_cpu(args->cpu);
                   set_gpu_selection(parse_gpu_selector(args->gpu));
                   server_options o;
                   o.listen_host = args->listen;
                   o.port = args->port;
                   o.once = args->once;
                   if (args->ready_fd >= 0) o.ready_fd = args->ready_fd;
                   o.token = args->token;
                   o.timeouts.handshake = parse_duration(args->handshake);
                   o.timeouts.idle = parse_duration(args->idle);
                   o.log = args->quiet ? nullptr : stderr;
                   std::signal(SIGINT, on_stop_signal);
                   std::signal(SIGTERM, on_stop_signal);
                   return run_server(o, g_stop);
                 }};
}

}  // namespace pairperf::cli
