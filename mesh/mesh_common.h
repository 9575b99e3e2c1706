#pragma once
// What the two ways of running `pairperf mesh` share: under mpirun (mesh_mpi.cpp) and
// against servers started by something else (--hosts, mesh_hosts.cpp): the options, the cases,
// the schedule, and rank 0's / the driver's analysis and report.
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "core/config.h"
#include "harness/expect.h"
#include "mesh/mesh.h"

namespace pairperf::mesh {

struct mesh_args {
  // "" = the transport the registry gives doctor's reachability role (a plain socket: TCP).
  std::string transport;
  std::vector<std::string> tests;
  std::string sizes;
  std::string iface;
  std::string pattern = "all-pairs";
  std::string duration = "0.2s";
  bool no_retest = false;
  bool one_way = false;  // each pair in one direction only (half the rounds)
  double retest_bw = 0.5, retest_lat = 3.0;
  std::vector<std::string> expect;
  std::string json;
  std::string t_connect = "3s", t_case = "10s", deadline;
  std::vector<std::string> hosts;
  std::string hosts_from;  // NAME[:PORT] whose addresses are the servers (a headless Service)
  std::string token;       // resolved: --token, --token-file or $PAIRPERF_TOKEN ("" for none)
  // --hosts: how long each hello waits out a busy server; one busy past it has its pairs marked
  // not measured (the others are measured; exit 4 where nothing else failed).
  std::chrono::nanoseconds wait_busy = std::chrono::minutes(2);
  // --hosts: set to a signal number (SIGINT, SIGTERM) when the user asks the mesh to stop: the
  // pairs measured are kept and written, the rest are marked not measured, exit 128 + signal.
  const std::atomic<int>* interrupted = nullptr;
};

struct mesh_node {
  std::string name, address, note;
  bool busy = false;  // its server stayed busy past --wait-busy: its pairs are not measured
  bool gone = false;  // it stopped answering after its hello: its later pairs are not measured
  std::uint16_t port = 0;
  nlohmann::json host, env;
  // The application libraries' descriptions on this node, by transport (registry role
  // application: gloo's devices as torch.distributed would make them there).
  nlohmann::json libraries = nlohmann::json::object();
};

// This process's application libraries' descriptions (mesh_node::libraries).
nlohmann::json application_libraries();

struct mesh_plan {
  std::string transport;  // the transport every pair runs (resolved from mesh_args)
  run_config config;
  std::vector<std::string> tests;
  std::vector<test_case> cases;
  std::vector<expectation> expectations;
  std::vector<mesh_round> schedule;
  double pair_bound_s = 0;  // the most one pair can take within the timeouts
};

// Throws usage_error for bad options.
mesh_plan make_plan(const mesh_args& a, int nodes);

// Names from hostnames, "host:rank" where several nodes share one.
void name_nodes(std::vector<mesh_node>& nodes);

// A pair that could not even start: every case unreachable with the reason.
pair_result unreachable_pair(const node_pair& pair, const std::vector<test_case>& cases,
                             const std::string& why, const std::string& code);
// The verdict from the results: ok, unreachable or error.
void judge(pair_result& p);

// A pair of the schedule that was not measured, and why (a signal stopped the mesh, a server
// stayed busy past --wait-busy, a node stopped answering): it says nothing about its link, so
// it is neither failed nor slow, and no comparison counts it.
struct unmeasured_pair {
  node_pair pair;
  std::string why;
  bool node_gone = false;  // a node of the pair stopped answering mid-mesh (a failure)
};
struct mesh_gaps {
  std::vector<unmeasured_pair> pairs;
  int interrupted = 0;  // the signal that stopped the mesh
};

// Retest verdicts, --expect, node comparison, matrices, findings, JSON. Returns the exit code.
int finish_mesh(const mesh_args& a, const std::vector<std::string>& argv, const mesh_plan& plan,
                const std::vector<mesh_node>& nodes, std::vector<pair_result> pairs,
                const std::vector<pair_result>& retests, const std::vector<double>& round_seconds,
                double retest_seconds, std::chrono::steady_clock::time_point start,
                const mesh_gaps& gaps = {});

#if PAIRPERF_HAVE_MPI
int mesh_mpi(const mesh_args& a, const std::vector<std::string>& argv);
#endif
int mesh_hosts(const mesh_args& a, const std::vector<std::string>& argv);
// --hosts-from NAME[:PORT]: every address NAME resolves to (IPv4 when it has any, else IPv6),
// sorted, as host:port. Throws usage_error when it resolves to none.
std::vector<std::string> hosts_from_name(const std::string& name_port);

}  // namespace pairperf::mesh
