#pragma once
// One side of one case: the transport built for it, the buffers from the case's allocator and
// their registrations. The client and the server each hold one per case.
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/config.h"
#include "harness/noise.h"
#include "harness/patterns.h"
#include "harness/payload.h"
#include "harness/result.h"
#include "harness/stats.h"
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

  // Runs one phase of `iterations` under the case timeout; `probe` asks the transport to
  // inspect the first data operation for provenance.
  pattern_outcome run(std::uint64_t iterations, const where& place, bool probe);

  [[nodiscard]] sample_recorder& samples() noexcept { return m_samples; }
  [[nodiscard]] std::optional<validation> validated() const;
  [[nodiscard]] provenance describe() const { return m_transport->describe(); }
  [[nodiscard]] unsigned window() const noexcept { return m_window; }
  [[nodiscard]] const test_case& test() const noexcept { return m_params.test; }
  [[nodiscard]] op_kind data_op() const noexcept { return m_data_op; }
  // This side's host noise over the measured phases so far (noise.h).
  [[nodiscard]] const noise_meter& noise() const noexcept { return m_noise; }

 private:
  void allocate(allocator& alloc, std::size_t slots);

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
};

}  // namespace pairperf
