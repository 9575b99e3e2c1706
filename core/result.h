#pragma once
// One case's outcome as plain data. The runner fills it; reporters only format it (results are
// data, reporters format them). JSON field names carry their units.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/stats.h"

namespace pairperf {

enum class case_status {
  ok,
  skipped,      // this host or build cannot run the case (with the reason)
  error,        // setup or the run failed
  unreachable,  // the data connection could not be made
  fail,         // it ran, but a check failed (corrupt bytes, a missed expectation)
};

const char* to_string(case_status s) noexcept;
case_status parse_case_status(const std::string& text);

// How a lane moves bytes, as the transport that reports it classifies it. The verdicts (expect,
// the pair's path, the GPU path) judge kinds, never transport names.
enum class lane_kind : std::uint8_t {
  unknown,        // the transport could not tell (or a results file older than kinds)
  shared_memory,  // within one host through shared or cross-mapped host memory
  network,        // a socket network stack (TCP)
  rdma,           // an RDMA NIC (InfiniBand, RoCE, iWARP)
  gpu_ipc,        // one GPU's memory mapped into the peer process (NVLink or PCIe peer-to-peer)
  staged_copy,    // GPU memory copied through host memory by the CPU or a copy engine
};

const char* to_string(lane_kind k) noexcept;
// Any text it does not know (a newer kind, an older file) is lane_kind::unknown.
lane_kind parse_lane_kind(std::string_view text) noexcept;

// One path the bytes took: a transport over a device, e.g. {"tcp", "eth0", network},
// {"cma", "memory", shared_memory}.
struct lane {
  std::string transport;
  std::string device;
  lane_kind kind = lane_kind::unknown;
};

// What really carried the bytes, asked of the transport after the case.
struct provenance {
  std::vector<lane> lanes;  // every lane of the connection that can carry data
  std::string protocol;     // e.g. "tcp stream, 2 connections, busy-poll"
  nlohmann::json client;    // transport-specific detail from each side (addresses, TCP_INFO...)
  nlohmann::json server;
  // The lanes that carried this case's payload at its size, where the transport can tell them
  // apart from the rest (UCX's rendezvous moves a large message's bulk over its RMA lanes); empty
  // where it cannot, and then all of `lanes` did.
  std::vector<lane> bulk;
  // Set where either side's transport saw the payload staged through host memory: the protocol's
  // words that show it (e.g. "rendezvous pipeline cuda_copy").
  std::string staged;
};

// The lanes that carried the payload: provenance.bulk, else all of provenance.lanes.
const std::vector<lane>& payload_lanes(const provenance& p) noexcept;

// What one side's transport saw of the payload's path, sent by the server beside its own detail
// so the client's provenance judges both ends: its bulk lanes and any staging.
nlohmann::json path_evidence(const provenance& p);
// Adds the peer's evidence to the client's provenance: the peer's staging where this side saw
// none, and its GPU IPC bulk lanes (the peer's operation may be the one that maps GPU memory).
void add_peer_evidence(provenance& mine, const nlohmann::json& peer);

// Either figure is absent where that side cannot see the data: the target of a put sees no
// arrivals, the target of a get posts nothing.
struct bandwidth {
  std::optional<double>
      receiver_Bps;  // payload bytes / time from the receiver's start to the last arrival
  std::optional<double>
      sender_Bps;  // payload bytes / time from first post to the receiver's final ack
};

struct validation {
  std::uint64_t messages_checked = 0;
  std::uint64_t corrupt_bytes = 0;
};

// One measured phase of a case run with --repeat: the spread between them is what a comparison
// of two result files tests.
struct repetition {
  std::uint64_t iterations = 0;
  double elapsed_s = 0;
  std::optional<sample_stats> latency_s;
  std::optional<bandwidth> bandwidth_Bps;
  std::optional<double> message_rate_per_s;
};

struct case_result {
  test_case test;
  case_status status = case_status::ok;
  std::string message;     // why, for every status but ok
  std::string error_code;  // the errno behind an error or unreachable case, e.g. "ENETUNREACH"

  std::uint64_t iterations = 0;
  std::uint64_t warmup_iterations = 0;
  unsigned window = 0;
  double elapsed_s = 0;  // measured phase, on the client
  // The case on the client from its start to its result: set-up, data connect, warm-up and
  // measured phases, teardown (0: not timed). wall_s - elapsed_s is the case's fixed cost.
  double wall_s = 0;
  // Its place among the cases its worker process ran (client.cpp: cases of one transport share a
  // worker while they end ok): 1 in a fresh process; 0 when no worker ran it.
  unsigned worker_case = 0;

  std::optional<sample_stats> latency_s;          // pingpong: one-way (round trip / 2)
  std::optional<sample_stats> interval_s;         // stream: receiver's time between arrivals
  std::optional<bandwidth> bandwidth_Bps;         // stream: both directions summed for stream_bi
  std::optional<bandwidth> client_to_server_Bps;  // stream_bi only: each direction
  std::optional<bandwidth> server_to_client_Bps;
  std::optional<double> message_rate_per_s;
  std::optional<validation> validated;
  std::optional<struct provenance> provenance;
  // --repeat N (N > 1): each measured phase. Then latency_s is over the samples of all of them,
  // bandwidth_Bps and message_rate_per_s are their medians.
  std::vector<repetition> repetitions;
  // GPU rows: fast path (cuda_ipc) or fallback, and why (gpus.h classify_gpu_path).
  std::string gpu_path, gpu_path_why;
  nlohmann::json verdict;  // --expect: {"pass", "checks": [{"expect", "seen", "pass", "why"}]};
                           // null if none applied
  // --expect that covered this case but could not judge it (the case did not run, or has no
  // such figure): {"expect": [texts], "why"}; null otherwise.
  nlohmann::json unjudged;
  // Host noise of the measured phases (host/noise.h): null where the case did not measure.
  nlohmann::json host_noise;
};

// The figure a result stands for, shared by --expect, compare, export, mesh and doctor:
// bandwidth is the receiver's where it saw arrivals, else the sender's (a put's target sees none).
enum class headline { bandwidth, latency_p50, latency_p99 };
std::optional<double> preferred_Bps(const std::optional<bandwidth>& b);
std::optional<double> headline_of(const std::optional<bandwidth>& b,
                                  const std::optional<sample_stats>& latency, headline which);
// The case's figure (nullopt unless it ran: ok or fail), and one per repetition (the case's own
// when it was not repeated).
std::optional<double> headline_of(const case_result& r, headline which);
std::vector<double> repetition_values(const case_result& r, headline which);

void to_json(nlohmann::json& j, const lane& l);
void from_json(const nlohmann::json& j, lane& l);
void to_json(nlohmann::json& j, const bandwidth& b);
void from_json(const nlohmann::json& j, bandwidth& b);
void to_json(nlohmann::json& j, const repetition& r);
void from_json(const nlohmann::json& j, repetition& r);
void to_json(nlohmann::json& j, const case_result& r);
void from_json(const nlohmann::json& j, case_result& r);

}  // namespace pairperf
