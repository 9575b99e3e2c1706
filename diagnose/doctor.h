#pragma once
// `pairperf doctor PEER`: which interfaces reach a pairperf server, how fast, what UCX does on
// each, whether the pair's host memory takes the fast path, and what the interface variables of
// UCX, NCCL and gloo on both sides get wrong. Every probe is an ordinary case of the harness
// (bounded by the same timeouts), so a black-hole address costs one probe timeout, never a hang.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/interfaces.h"
#include "core/result.h"
#include "core/socket.h"
#include "core/units.h"
#include "host/gpus.h"
#include "host/netvars.h"
#include "host/pair.h"

namespace pairperf {

// The cases doctor runs, chosen by the command that calls it (the harness names no transport);
// sizes, interfaces and targets are filled in per probe.
struct doctor_probes {
  test_case reach;  // per interface pair, bound to the interface, aimed at the address
  std::optional<test_case> library;   // per local interface, restricted to it (e.g. UCX over tcp)
  std::optional<test_case> path_bw;   // the library's own choice of transports, at the probe size
  std::optional<test_case> path_lat;  // ... and at its own (small) size
  // The library's transport even where its probes are off (--no-ucx): its cells stay in the JSON,
  // empty. "" where no transport has the library role.
  std::string library_transport;
  // The libraries' own connections as the applications make them, each side with its own
  // environment: the application role's (gloo) and the library's with no pinning (UCX with each
  // side's UCX_*). Each with the variable whose findings its outcome decides.
  struct application {
    std::string variable;  // GLOO_SOCKET_IFNAME, UCX_NET_DEVICES
    test_case probe;
  };
  std::vector<application> applications;
  // The variable that pins the library to a device (UCX_NET_DEVICES): where the client's
  // environment sets it, the path cases are not pinned to the best interface.
  std::string library_device_variable;
};

struct doctor_options {
  doctor_probes probes;
  endpoint server;
  std::string token;
  // How long each session waits out a busy server (client.h's wait_busy).
  std::chrono::nanoseconds wait_busy = std::chrono::minutes(2);
  std::vector<std::string> ifaces;  // local interfaces to probe; empty = every usable one
  std::uint64_t size_bytes = std::uint64_t{1} << 20;
  // Each connection attempt. Above the kernel's 3 s of unanswered ARP, so an address that is not
  // on the link shows as EHOSTUNREACH rather than a timeout.
  std::chrono::nanoseconds probe_timeout = std::chrono::seconds(4);
  std::chrono::nanoseconds duration = std::chrono::milliseconds(200);  // each bandwidth probe
  double noise_threshold = 0.05;  // a probe is noisy beyond this descheduled share (noise.h)
  std::vector<std::string> argv;
  // No peer was given: the server is a local one, so only this host is checked (loopback to
  // itself); the report says so and recommends no interface for multi-node variables.
  bool this_host_only = false;
  bool strict = false;  // --strict: `fragile` findings fail too (exit 3)
  // Set to a signal number (SIGINT, SIGTERM) when the user asks doctor to stop: the probes end
  // at the next safe point and the report holds what ran, with no verdict past it.
  const std::atomic<int>* interrupted = nullptr;
};

// One cell of the interface matrix: a local interface and one address the peer advertises.
struct probe_target {
  std::string local_iface;
  std::string peer_iface;
  std::string peer_address;
  bool on_subnet = false;  // the address lies in a subnet of the local interface
};

// Every local interface x every peer address it could use. Loopback pairs only with loopback and
// only when the control connection is on loopback (then nothing else is probed: every other
// address of a same-namespace peer is ours too); link-local addresses are left out.
// `server_listen` is the address the server listens on ("", "0.0.0.0" or "::" for all of its
// IPv4 / all of its addresses). `only` restricts the local interfaces (empty = all given).
std::vector<probe_target> plan_matrix(const std::vector<interface_info>& local,
                                      const std::vector<interface_info>& peer,
                                      const std::string& control_peer_ip,
                                      const std::string& server_listen,
                                      const std::vector<std::string>& only);

// The interfaces of a side's host facts (a context's "client" or "server") that can carry a
// probe: up, with an address.
std::vector<interface_info> usable_interfaces_of(const nlohmann::json& host);

struct probe_result {
  probe_target target;
  case_result result;
};

struct doctor_report {
  nlohmann::json context;  // as in a results file: tool, hosts, env of both sides
  // The transports of the two probe roles (doctor_probes), which name their cells in the JSON.
  std::string reach_transport, library_transport;
  std::vector<probe_result> reach;    // per cell: TCP connect and a short stream
  std::vector<probe_result> library;  // per local interface: UCX_TLS=tcp, UCX_NET_DEVICES=it
  std::vector<case_result> path;      // UCX's default transports between the pair
  // doctor_probes::applications' results, in their order.
  struct application_result {
    std::string variable;
    case_result result;
  };
  std::vector<application_result> applications;
  std::string path_iface;  // the interface the path cases were pinned to
  pair_facts pair;
  std::optional<path_verdict> verdict;
  std::optional<gpu_pair> gpus;  // when both sides know their GPUs
  side_view client, server;
  // NCCL's bootstrap interface on each side, as each side's libnccl answered (or NCCL's rule),
  // and whether the peer reaches it.
  std::vector<nccl_verdict> nccl;
  std::vector<finding> findings;
  std::chrono::nanoseconds probe_timeout{};  // each connection attempt's bound
  std::chrono::nanoseconds bound{};          // the most the probes could take, announced up front
  double elapsed_s = 0;
  bool this_host_only = false;  // doctor_options::this_host_only
  // The path probes were noisy (noise.h) twice: why; the verdict then cannot be trusted.
  std::string path_noisy;
  bool path_retried = false;  // the first path probe was noisy and was run again
  bool strict = false;        // doctor_options::strict
  // The signal that stopped the probes (0: none) and the stage it stopped ("the hello", "the
  // probes", "the path probe"); what ran is kept, nothing after it is judged.
  int interrupted = 0;
  std::string interrupted_during;
  // The hello failed: no control connection to the server within --probe-timeout (or no answer
  // to the hello): why, as the step said it. Nothing was probed; exit 1.
  std::string server_unreachable;
};

// Everything after the measurements: side views, ranking, variable checks, path verdict,
// findings. Reads report.context and the probe results; fills the rest.
void analyze(doctor_report& report);

// The worst case time of the probes, from the plan and the options.
std::chrono::nanoseconds doctor_bound(const doctor_options& o, std::size_t reach_cells,
                                      std::size_t library_cells, std::size_t path_cases);

// Connects to the server, probes, analyzes. Throws step_error when the server cannot be
// reached at all (the control connection or its hello fails). `progress` (may be null) gets a
// line per probe as it starts.
doctor_report run_doctor(const doctor_options& o, std::FILE* progress);

void to_json(nlohmann::json& j, const doctor_report& r);
void print_report(std::FILE* out, const doctor_report& r, rate_unit unit);
// The exit-code contract: 3 when a finding's severity is `fails` (with `strict`, `fragile` too),
// as a failed --expect; else 4 when the path verdict rests on noisy probes (twice); else 0.
// Advice never changes the code.
int exit_code(const doctor_report& r);

}  // namespace pairperf
