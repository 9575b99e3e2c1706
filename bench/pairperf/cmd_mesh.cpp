// `pairperf mesh`: its options, and the hand-over to the mesh's runners (mesh/): under mpirun/srun
// (mesh/mesh_mpi.cpp, in the pairperf-mpi binary), or with --hosts against pairperf servers that
// something else started (mesh/mesh_hosts.cpp).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/interrupts.h"
#include "bench/pairperf/private_files.h"
#include "core/control.h"
#include "core/errors.h"
#include "core/interfaces.h"
#include "core/output.h"
#include "harness/client.h"
#include "mesh/mesh_common.h"

namespace pairperf::cli {
command add_mesh(CLI::App& root, const std::vector<std::string>& argv) {
  auto a = std::make_shared<mesh::mesh_args>();
  auto token = std::make_shared<token_options>();
  CLI::App* app = root.add_subcommand(
      "mesh",
      "All pairs of many nodes: under mpirun/srun (`mpirun -np N pairperf mesh`), or --hosts "
      "against pairperf servers already running. n x n bandwidth and latency matrices, outliers "
      "retested alone, interface and variable differences between nodes");
  CLI::Option* hosts =
      app->add_option("--hosts", a->hosts, "Servers host[:port] to mesh, instead of MPI ranks")
          ->delimiter(',');
  app->add_option("--hosts-from", a->hosts_from,
                  "NAME[:PORT]: every address NAME resolves to is a server (a Kubernetes headless "
                  "Service in front of the pairperf-server DaemonSet)")
      ->excludes(hosts);
  app->add_option("-t,--transport", a->transport,
                  "Transport for every pair (default: the plain-socket one doctor reaches with, "
                  "tcp)");
  app->add_option("--test", a->tests,
                  "Tests (default: the transport's bandwidth and latency tests)")
      ->delimiter(',');
  app->add_option("-s,--sizes", a->sizes,
                  "Message sizes (default: 1M for bandwidth, 8 for latency)");
  app->add_option(
      "-i,--iface", a->iface,
      "The data interface on every node (MPI: its address serves; every pair binds to it)");
  app->add_option("--pattern", a->pattern, "all-pairs, ring or one-to-all")->capture_default_str();
  app->add_option("-d,--duration", a->duration, "Time budget per case")->capture_default_str();
  app->add_flag("--no-retest", a->no_retest, "Do not rerun outliers alone");
  app->add_flag("--one-way", a->one_way,
                "Measure each pair in one direction only (half the rounds; an asymmetric link, "
                "one direction degraded, then goes unseen)");
  app->add_option("--retest-bw", a->retest_bw,
                  "Outlier: bandwidth below this fraction of the median")
      ->capture_default_str();
  app->add_option("--retest-lat", a->retest_lat,
                  "Outlier: latency above this multiple of the minimum")
      ->capture_default_str();
  app->add_option("--expect", a->expect, "Check every pair's cases (as for run)");
  app->add_option("--json", a->json, "Results file (schema pairperf.mesh)");
  app->add_option("--timeout-connect", a->t_connect, "Bound on each connection attempt")
      ->capture_default_str();
  app->add_option("--timeout-case", a->t_case, "Bound on each phase of a case")
      ->capture_default_str();
  app->add_option("--deadline", a->deadline,
                  "MPI: abort the whole job after this long (default: from the timeouts)");
  token->add(app, "--hosts: the token the servers require");
  auto wait_busy = std::make_shared<wait_busy_option>();
  wait_busy->add(app);
  return command{app, [a, token, wait_busy, argv] {
                   a->token = token->resolve();
                   a->wait_busy = wait_busy->resolve();
                   if (!a->hosts_from.empty()) a->hosts = mesh::hosts_from_name(a->hosts_from);
                   if (!a->hosts.empty()) {
                     // The pairs measured are written when a signal stops the mesh.
                     catch_interrupts();
                     a->interrupted = &interrupt_signal();
                     return mesh::mesh_hosts(*a, argv);
                   }
#if PAIRPERF_HAVE_MPI
                   return mesh::mesh_mpi(*a, argv);
#else
                   // The MPI mesh is its own binary (package pairperf-mpi): hand over to it.
                   if (const std::string mpi = find_private_file("pairperf-mpi"); !mpi.empty()) {
                     std::vector<std::string> args = argv;
                     args.at(0) = mpi;
                     exec_program(std::move(args));
                     throw std::runtime_error(fmt::format("cannot run {}: {}", mpi,
                                                          std::strerror(errno)));
                   }
                   throw usage_error(
                       "this pairperf has no MPI mesh: install pairperf-mpi (Debian package) or "
                       "build with -DPAIRPERF_WITH_MPI=ON, or give --hosts (servers already "
                       "running)");
#endif
                 }};
}

}  // namespace pairperf::cli
