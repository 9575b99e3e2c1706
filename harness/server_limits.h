#pragma once
// What a server accepts from its peers. A server left running (a DaemonSet on every node) takes
// requests from anyone who reaches its port, so its own limits bound every request: the
// client's timeouts are capped by the server's, its memory and iteration counts are checked
// before anything is allocated, and `drive` (measuring towards another host on a peer's behalf)
// is refused unless the operator allowed it, towards the targets the operator named.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"

namespace pairperf {

struct server_limits {
  std::chrono::nanoseconds max_connect = std::chrono::seconds(30);  // caps timeouts_s.connect
  std::chrono::nanoseconds max_case = std::chrono::seconds(120);    // caps timeouts_s.case
  std::uint64_t max_case_memory = 0;           // bytes per case, buffers and samples; 0 = automatic
  std::uint64_t max_iterations = 100'000'000;  // per phase
  std::uint64_t max_session_bytes = std::uint64_t{16} << 40;  // data moved per client session
  std::size_t max_pending = 256;  // connections saying hello at once; beyond, the oldest goes
  std::size_t max_queue = 8;      // authenticated clients waiting for their turn; more get `busy`
};

// A quarter of the memory this process may still use (host/memory_room: MemAvailable, or what its
// cgroups, v2 or v1, allow beyond what they use, whichever is less). 1 GiB if neither can be read.
std::uint64_t automatic_case_memory();

// The client's config with its timeouts capped by the server's: connect and case by the limits,
// handshake by the server's own handshake bound.
run_config capped(run_config config, const server_limits& limits,
                  std::chrono::nanoseconds handshake);

// The bytes one side of `c` needs: its buffers (2 x slots x size, validation's slots included)
// and the sample buffer for `iterations`.
std::uint64_t case_memory(const run_config& config, const test_case& c, std::uint64_t iterations);

// A `run` message's budget_s: seconds, positive and below 1e6 (the caller holds it to the case
// timeout). Throws std::invalid_argument.
std::chrono::nanoseconds parse_phase_budget(const nlohmann::json& v);

// Why the server refuses this case or phase, or nothing. `iterations` is the phase's count (the
// client's max_iterations at setup: advisory, checked against the server's limit only).
std::optional<std::string> refuse_case(const run_config& config, const test_case& c,
                                       std::uint64_t iterations, const server_limits& limits);

// Where `drive` may send a server: CIDRs, single addresses and host names (a Kubernetes headless
// Service: its addresses at the time of the request), or "*" for anywhere.
class drive_allowlist {
 public:
  drive_allowlist() = default;
  // Comma-separated entries; throws usage_error on an empty entry or a bad prefix length.
  explicit drive_allowlist(const std::string& list);

  [[nodiscard]] bool empty() const noexcept { return m_entries.empty(); }
  // Whether the numeric address `ip` is allowed.
  [[nodiscard]] bool allows(const std::string& ip) const;
  [[nodiscard]] std::string to_string() const;

 private:
  std::vector<std::string> m_entries;
};

// The optional fields of a client's hello, as the server takes them (absent or malformed: the
// defaults): the ticket it came back with after a `busy`; its planned time (0 to 24 h; 0 =
// unknown); and, where it says "want": ["nccl"] (doctor, mesh), the time it grants the session
// to ask this host's libnccl.so.2 ("nccl_budget_s", 0.1 to 30 s, 3 s where it names none; 0 =
// not asked).
struct hello_extras {
  std::optional<std::uint64_t> ticket;
  double budget_s = 0;
  std::chrono::milliseconds nccl_budget{0};
};
hello_extras read_hello_extras(const nlohmann::json& hello);

}  // namespace pairperf
