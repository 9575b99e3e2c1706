#pragma once
// One side of one case: the transport built for it, the buffers from the case's allocator and
// their registrations. The client and the server each hold one per case.
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/result.h"
#include "core/stats.h"
#include "harness/payload.h"
#include "host/noise.h"
#include "patterns/pattern_types.h"
#include "transports/memory/allocator.h"
#include "transports/transport.h"

namespace pairperf {

// This side cannot run the case (no such transport here, memory type not supported...).
class case_skipped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The peer's registered buffers as its regions() listed them, checked: counts that match the
// list, whole numbers in range, keys in hex of at most 64 KiB. Throws std::invalid_argument.
struct peer_regions {
  std::size_t recv_slots = 0, send_slots = 0;
  std::vector<remote_region> list;
};
peer_regions parse_peer_regions(const nlohmann::json& j);

// What a phase is to the measurement: not part of it (warm-up, calibration), the start of one, or
// more of the one started (its samples, counts and host noise add to those before).
enum class phase_mode { unmeasured, measure, measure_more };

class case_session {
 public:
  // Throws case_skipped when this side cannot run the case, other exceptions when setup fails.
  case_session(const run_config& config, const transport_params& params);

  std::vector<std::byte> local_address() { return m_transport->local_address(); }
  // Throws std::invalid_argument when the peer's transport address cannot be right (transport.h).
  void check_peer_address(std::span<const std::byte> peer) {
    m_transport->check_peer_address(peer);
  }
  // This side's registered buffers for the peer: receive slots, then send slots, as
  // [{"address", "length_bytes", "key"}] (key in hex).
  [[nodiscard]] nlohmann::json regions() const;
  // Connects to the peer and takes its regions (the peer's regions()).
  // Both sides call it at the same time (the server right after `ready`).
  void connect(std::span<const std::byte> peer, const nlohmann::json& peer_regions);

  // Runs one phase of `iterations` under the case timeout; with a `budget` (has_time_budget
  // patterns only), for that long, `iterations` being a cap. The start of a measurement asks the
  // transport to inspect its first data operation for provenance. Returns the phase's outcome,
  // for a measured phase the measurement's so far (every phase of it added up).
  // The server passes `stop_requested` (pattern_run) for a timed phase.
  pattern_outcome run(std::uint64_t iterations, const where& place, phase_mode mode,
                      std::chrono::nanoseconds budget = {},
                      std::function<bool()> stop_requested = {});
  // After a timed phase and the control channel's stop/stopped: the client sends the closing
  // message, the server takes it (patterns.h).
  void close_timed_phase(const where& place);
  // Whether run() takes a time budget for this case's pattern and operation.
  [[nodiscard]] bool timed() const noexcept {
    return has_time_budget(m_params.test.pattern, m_data_op) && m_transport->caps().time_budget;
  }
  // Iterations of the measurement so far; 0 before one started and after an unmeasured phase.
  [[nodiscard]] std::uint64_t measured_iterations() const noexcept { return m_measured_iterations; }

  [[nodiscard]] sample_recorder& samples() noexcept { return m_samples; }
  [[nodiscard]] std::optional<validation> validated() const;
  // What carried the bytes (transport::describe), as described when the last measured phase
  // ended; described now if none has.
  [[nodiscard]] provenance describe() const {
    return m_described ? *m_described : m_transport->describe();
  }
  [[nodiscard]] unsigned window() const noexcept { return m_window; }
  [[nodiscard]] const test_case& test() const noexcept { return m_params.test; }
  [[nodiscard]] op_kind data_op() const noexcept { return m_data_op; }
  // This side's host noise over the measured phases so far (noise.h).
  [[nodiscard]] const noise_meter& noise() const noexcept { return m_noise; }

 private:
  void allocate(allocator& alloc, std::size_t slots);
  [[nodiscard]] pattern_run phase_run(std::uint64_t iterations) const;
  [[nodiscard]] pattern_buffers buffers() const;

  run_config m_config;
  transport_params m_params;
  op_kind m_data_op = op_kind::send;
  std::unique_ptr<transport> m_transport;
  unsigned m_window = 1;
  bool m_receive_after_send = false;  // capabilities::keeps_early_arrivals
  std::vector<buffer> m_buffers;
  std::vector<std::byte*> m_send_slots;
  std::vector<std::byte*> m_recv_slots;
  std::byte* m_sync_send = nullptr;
  std::byte* m_sync_recv = nullptr;
  std::vector<mem_region> m_recv_regions, m_send_regions;
  std::size_t m_peer_recv_slots = 0, m_peer_send_slots = 0;
  std::optional<payload_checker> m_checker;
  sample_recorder m_samples;
  noise_meter m_noise;
  pattern_outcome m_measured;
  std::uint64_t m_measured_iterations = 0;
  std::optional<provenance> m_described;
};

}  // namespace pairperf
