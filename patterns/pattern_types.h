#pragma once
// What one phase of a measurement loop is given and what it returns (patterns/run.h runs it).
// Plain types over core only: transports/transport.h declares its run_phase hook with them.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "core/config.h"
#include "core/errors.h"
#include "core/ops.h"
#include "core/socket.h"
#include "core/stats.h"

namespace pairperf {

// --validate: fills every message sent and checks every message received (the harness's
// payload_checker, which stages through the case's allocators). Called once a message, outside
// the timed spans where the loops can keep it there.
class message_check {
 public:
  virtual void fill(std::byte* buf, std::uint64_t seq) = 0;
  // Returns the corrupt byte count of this message (and keeps the totals).
  virtual std::uint64_t check(const std::byte* buf, std::uint64_t seq) = 0;

 protected:
  message_check() = default;
  ~message_check() = default;
  message_check(const message_check&) = default;
  message_check& operator=(const message_check&) = default;
};

// Bytes of each sync-channel message (the receiver's "got everything" acknowledgement).
inline constexpr std::size_t sync_message_bytes = 8;
// Windows above this are refused: a completion cookie carries the slot in its low bits.
inline constexpr unsigned max_window = 1U << 16;

struct pattern_buffers {
  std::span<std::byte* const> send_slots;  // one per outstanding send when validating, else one
  std::span<std::byte* const> recv_slots;
  std::byte* sync_send = nullptr;  // sync_message_bytes each
  std::byte* sync_recv = nullptr;
  // One-sided tests: the peer's slots, as the peer registered them (its receive slots first,
  // then its send slots; op.remote indexes that list).
  std::size_t peer_recv_slots = 0;
  std::size_t peer_send_slots = 0;
};

struct pattern_run {
  pattern_kind pattern = pattern_kind::pingpong;
  op_kind data_op = op_kind::send;  // send: two-sided; put or get: one-sided, the client initiates
  side role = side::client;         // the client initiates ping-pong and sends in stream_uni
  std::uint64_t iterations = 0;     // messages each way (ping-pong: round trips)
  unsigned window = 1;              // outstanding operations per direction (stream patterns)
  std::size_t size = 0;             // bytes per message
  deadline_t deadline{};            // the loop fails with a timeout after this
  // Polls that find nothing between two reads of the clock (the deadline, the stop check): many
  // where a poll spins, 1 where it sleeps in the kernel (progress_mode::block).
  unsigned idle_polls_per_check = 1024;
  // Two-sided ping-pong only (has_time_budget): when positive, the client stops at the first round
  // trip that ends this long after its start (and not before at_least of them), `iterations` is
  // only a cap, and the server answers until stop_requested() says the client stopped; it asks on
  // idle polls once the budget has passed on its own clock (it starts first).
  std::int64_t budget_ns = 0;
  std::uint64_t at_least = 0;
  std::function<bool()> stop_requested;
  // Ping-pong posts each receive after its send (the transport keeps early arrivals: see
  // capabilities::keeps_early_arrivals); otherwise before it.
  bool receive_after_send = false;
};

struct pattern_outcome {
  std::int64_t elapsed_ns = 0;           // this side: first post to last completion
  std::int64_t send_elapsed_ns = 0;      // a sender: first post to the receiver's acknowledgement
  std::int64_t recv_span_ns = 0;         // a receiver: its start to the last arrival
  std::uint64_t recv_span_messages = 0;  // messages that arrived in that span (all of them)
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;

  // Phases that continue one measurement add up: every field is a count or a span.
  pattern_outcome& operator+=(const pattern_outcome& o) noexcept {
    elapsed_ns += o.elapsed_ns;
    send_elapsed_ns += o.send_elapsed_ns;
    recv_span_ns += o.recv_span_ns;
    recv_span_messages += o.recv_span_messages;
    messages_sent += o.messages_sent;
    messages_received += o.messages_received;
    return *this;
  }
};

// Whether run_pattern honours pattern_run::budget_ns for this pattern and operation: a time
// bound on the phase itself. The others run their count; a caller bounds their time in phases.
constexpr bool has_time_budget(pattern_kind pattern, op_kind data_op) noexcept {
  return pattern == pattern_kind::pingpong && data_op == op_kind::send;
}

}  // namespace pairperf
