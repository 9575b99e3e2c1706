#pragma once
// What the pattern loops share (two_sided.h, one_sided.h): cookies, the clock, arrival timing,
// and the driver that posts and polls with failure and deadline handling, over a transport type
// T (loop_transport). With T a transport's final class, its post() and poll() are direct calls
// the compiler can inline into the loops; with T the transport interface, virtual ones.
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>

#include "core/clock.h"
#include "patterns/pattern_types.h"

namespace pairperf {

// What the loops need of a transport (transports/transport.h documents each call).
template <class T>
concept loop_transport = requires(T& t, const T& ct, const op& o, std::span<completion> out) {
  { t.post(o) } -> std::same_as<int>;
  { t.poll(out) } -> std::same_as<int>;
  requires noexcept(t.post(o));
  requires noexcept(t.poll(out));
  t.start_flush();
  { ct.flushed() } -> std::convertible_to<bool>;
  { ct.last_error() } -> std::convertible_to<std::string>;
  { ct.peer_gone() } -> std::convertible_to<bool>;
  { ct.counted_completions() } -> std::same_as<std::uint64_t>;
  requires noexcept(ct.counted_completions());
};

}  // namespace pairperf

namespace pairperf::pattern_detail {

constexpr std::uint64_t sync_cookie = ~std::uint64_t{0};
constexpr unsigned slot_bits = 16;
constexpr std::uint64_t slot_mask = (std::uint64_t{1} << slot_bits) - 1;

constexpr std::uint64_t cookie_of(std::uint64_t seq, std::size_t slot) noexcept {
  return (seq << slot_bits) | slot;
}
constexpr std::uint64_t seq_of(std::uint64_t cookie) noexcept { return cookie >> slot_bits; }
constexpr std::size_t slot_of(std::uint64_t cookie) noexcept {
  return static_cast<std::size_t>(cookie & slot_mask);
}

// The loops' clock (core/clock.h): the TSC where it is invariant, else CLOCK_MONOTONIC.
inline std::int64_t now_ns() noexcept { return loop_now_ns(); }

// Times arrivals for the receiver's bandwidth: every message counts, over the span from the
// receiver's start (it posts its receives before the sender can begin: the sender waits for the
// server's `running`) to the last arrival. Timing from the first arrival instead would inflate
// the figure: with a window of transfers interleaved on one connection, the first completes only
// when most of the window's data is already there. One poll may return several completions; a
// batch gets one timestamp, and the gaps between arrivals are the samples.
class arrival_clock {
 public:
  explicit arrival_clock(std::int64_t start) noexcept : m_start(start), m_last(start) {}
  void new_batch() noexcept { m_batch_time = 0; }
  void arrived(sample_recorder& samples) noexcept {
    if (m_batch_time == 0) m_batch_time = now_ns();
    if (m_count > 0) samples.record(m_batch_time - m_last);
    m_last = m_batch_time;
    ++m_count;
  }
  void report(pattern_outcome& out) const noexcept {
    out.recv_span_ns = m_last - m_start;
    out.recv_span_messages = m_count;
  }

 private:
  std::int64_t m_start, m_last, m_batch_time = 0;
  std::uint64_t m_count = 0;
};

// A stream phase that began at `start`: its span to now, the sender's span to the receiver's
// acknowledgement (at `ack_at`), the receiver's arrivals, and the counts each way.
inline pattern_outcome stream_outcome(std::int64_t start, std::int64_t ack_at, bool sent,
                                      const arrival_clock& arrivals, std::uint64_t done_s,
                                      std::uint64_t done_r) noexcept {
  pattern_outcome out;
  out.elapsed_ns = now_ns() - start;
  out.send_elapsed_ns = sent ? ack_at - start : 0;
  arrivals.report(out);
  out.messages_sent = done_s;
  out.messages_received = done_r;
  return out;
}

// What every phase's loops refuse before they start (std::logic_error): no buffers, a window out
// of range.
inline void check_phase(const pattern_run& run, const pattern_buffers& buffers) {
  if (buffers.send_slots.empty() && buffers.recv_slots.empty())
    throw std::logic_error("pattern without buffers");
  if (run.window == 0 || run.window > max_window)
    throw std::logic_error("pattern window out of range");
}

// A ping-pong phase: n messages each way, timed from `start` to now.
inline pattern_outcome ping_pong_outcome(std::int64_t start, std::uint64_t n) noexcept {
  pattern_outcome out;
  out.elapsed_ns = now_ns() - start;
  out.messages_sent = out.messages_received = n;
  return out;
}

// post/poll with failure and deadline handling around a transport.
template <loop_transport T>
class driver {
 public:
  driver(T& t, const pattern_run& run, const where& place)
      : m_t(t),
        m_deadline(run.deadline),
        m_place(place),
        m_stop_requested(run.stop_requested),
        m_idle_polls_per_check(std::max(run.idle_polls_per_check, 1U)),
        m_ask_from(steady::now() + std::chrono::nanoseconds(run.budget_ns)) {}

  // Whether the peer said it stopped (a timed ping-pong's server: pattern_run::stop_requested).
  [[nodiscard]] bool stopped() const noexcept { return m_stopped; }
  // Asks from now on, whatever the budget: the peer must stop (it reached its cap).
  void expect_stop() noexcept { m_ask_from = steady::now(); }

  // A ping-pong's data send, counted by the loop: true when the transport completed it inside
  // the post (op::may_complete_in_post) and no completion will follow; false when one will.
  [[gnu::always_inline]] bool post_send_counted(std::byte* data, std::size_t len,
                                                std::uint64_t cookie) {
    const int r = m_t.post(op{op_kind::send, op_channel::data, data, len, cookie, 0, true});
    if (r < 0) [[unlikely]]
      fail();
    return r == 1;
  }

  [[gnu::always_inline]] void post(op_kind kind, op_channel channel, std::byte* data,
                                   std::size_t len, std::uint64_t cookie,
                                   std::uint32_t remote = 0) {
    if (m_t.post(op{kind, channel, data, len, cookie, remote}) != 0) fail();
  }

  // A ping-pong's data receive, whose completion the loop counts (op::counted): it comes through
  // poll() or the transport's counter (counted()), whichever the transport uses.
  [[gnu::always_inline]] void post_recv_counted(std::byte* data, std::size_t len,
                                                std::uint64_t cookie) {
    if (m_t.post(op{op_kind::recv, op_channel::data, data, len, cookie, 0, false, true}) != 0)
      fail();
  }
  // The transport's count of counted operations completed without a completion (monotonic).
  [[gnu::always_inline]] std::uint64_t counted() const noexcept {
    return m_t.counted_completions();
  }
  // Waits for `pending` completions of the operations just posted: those poll() returns and
  // those the transport counted since `counted_at` (counted() before the posts).
  [[gnu::always_inline]] void await(std::size_t pending, std::uint64_t counted_at) {
    std::size_t polled = 0;
    while (polled + (counted() - counted_at) < pending) polled += poll().size();
  }

  // Waits (progressing the transport) for one completion of the sync channel's kind `kind`.
  void wait_sync(op_kind kind, std::int64_t* at = nullptr) {
    for (;;) {
      for (const completion& c : poll()) {
        if (c.cookie == sync_cookie && c.kind == kind) {
          if (at != nullptr) *at = now_ns();
          return;
        }
      }
    }
  }

  // Pushes out whatever the transport still holds; completions seen here are extra and dropped.
  void flush() {
    m_t.start_flush();
    while (!m_t.flushed()) (void)poll();
  }

  // The peer broke the pattern's protocol.
  [[noreturn, gnu::noinline, gnu::cold]] void protocol_error(const char* what) const {
    throw step_error(error_kind::protocol, m_place, what);
  }

  // Inlined into the loops: with a transport's final class, the loop's every step is this and
  // the transport's poll().
  [[gnu::always_inline]] std::span<const completion> poll() {
    const int n = m_t.poll(m_completions);
    if (n < 0) [[unlikely]]
      fail();
    // The clock is read every m_idle_polls_per_check-th empty poll and, however busy the
    // transport, every busy_polls_per_check-th poll that found something: completions that keep
    // coming (sends a dead peer's shared-memory queue still takes) must not outrun the deadline.
    if (n == 0 ? ++m_idle >= m_idle_polls_per_check : ++m_busy >= busy_polls_per_check) [[unlikely]]
      check_clock();
    return {m_completions.data(), static_cast<std::size_t>(n)};
  }

 private:
  // The deadline and the peer's stop, off the loop's line.
  [[gnu::noinline]] void check_clock() {
    m_idle = 0;
    m_busy = 0;
    const auto now = steady::now();
    if (now >= m_deadline) {
      throw step_error(error_kind::timeout, m_place,
                       "the case did not finish before its timeout (--timeout-case)", ETIMEDOUT);
    }
    if (m_stop_requested && !m_stopped && now >= m_ask_from) m_stopped = m_stop_requested();
  }

  [[noreturn, gnu::noinline, gnu::cold]] void fail() const {
    throw step_error(m_t.peer_gone() ? error_kind::closed : error_kind::error, m_place,
                     m_t.last_error());
  }

  T& m_t;
  deadline_t m_deadline;
  const where& m_place;
  const std::function<bool()>& m_stop_requested;
  unsigned m_idle_polls_per_check;
  deadline_t m_ask_from;
  bool m_stopped = false;
  std::array<completion, 64> m_completions{};
  unsigned m_idle = 0;
  unsigned m_busy = 0;
  static constexpr unsigned busy_polls_per_check = 4096;
};

}  // namespace pairperf::pattern_detail
