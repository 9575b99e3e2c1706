#pragma once
// The two-sided loops for a transport whose library completes operations on its own thread and
// offers only a blocking wait per operation: gloo, whose event loop thread moves the bytes and
// whose UnboundBuffer::waitSend / waitRecv put the caller to sleep until the loop thread signals
// it (torch.distributed's ProcessGroupGloo waits exactly so). A polling loop over such a library
// is a third party competing for the CPU with the library's own thread; these loops wait as the
// library's users do, on the measuring thread, and nothing spins.
//
// What they need of a transport (waiting_transport): post() as everywhere, and wait(kind), which
// blocks until the oldest posted operation of that kind completes, bounded by the phase's
// deadline. Waiting per kind, not in posting order, is what keeps a stream from deadlocking: a
// sender's acknowledgement receive, posted early, must not hold up the sends behind it.
//
// The same phases as patterns/two_sided.h, with the same outcome and samples:
//   ping-pong: the client posts its receive, then its send, then waits for both (torch's
//     irecv, send, wait); the server waits for a request, posts the next receive, answers, and
//     waits for the answer to leave. Counted only: a blocked wait cannot look at the control
//     channel, so a time budget is the harness's (capabilities::time_budget is false).
//   streams: `window` operations of each kind in flight; each wait's completion reposts its slot.
//     A side that both sends and receives alternates one wait of each kind, so each wait depends
//     only on operations the peer posted earlier in its own alternation (no cycle). The receiver
//     of data acknowledges with one sync message after its last arrival.
#include <algorithm>
#include <cerrno>
#include <concepts>
#include <stdexcept>

#include "core/clock.h"
#include "patterns/driver.h"

namespace pairperf {

// What the blocking loops need of a transport.
template <class T>
concept waiting_transport = requires(T& t, const T& ct, const op& o, op_kind k, deadline_t d,
                                     completion& c) {
  { t.post(o) } -> std::same_as<int>;
  // 0 with `c` filled; wait_failed (last_error() says why, peer_gone() whether the peer went);
  // wait_deadline when `d` passed first.
  { t.wait(k, d, c) } -> std::same_as<int>;
  requires noexcept(t.post(o));
  requires noexcept(t.wait(k, d, c));
  { ct.last_error() } -> std::convertible_to<std::string>;
  { ct.peer_gone() } -> std::convertible_to<bool>;
};

inline constexpr int wait_failed = -1;
inline constexpr int wait_deadline = -2;

namespace pattern_detail {

template <waiting_transport T>
class waiter {
 public:
  waiter(T& t, const pattern_run& run, const where& place)
      : m_t(t), m_deadline(run.deadline), m_place(place) {}

  void post(op_kind kind, op_channel channel, std::byte* data, std::size_t len,
            std::uint64_t cookie) {
    if (m_t.post(op{kind, channel, data, len, cookie}) != 0) [[unlikely]]
      fail(wait_failed);
  }
  completion wait(op_kind kind) {
    completion c{};
    if (const int r = m_t.wait(kind, m_deadline, c); r != 0) [[unlikely]]
      fail(r);
    return c;
  }

 private:
  [[noreturn, gnu::noinline, gnu::cold]] void fail(int r) const {
    if (r == wait_deadline) {
      throw step_error(error_kind::timeout, m_place,
                       "the case did not finish before its timeout (--timeout-case)", ETIMEDOUT);
    }
    throw step_error(m_t.peer_gone() ? error_kind::closed : error_kind::error, m_place,
                     m_t.last_error());
  }

  T& m_t;
  deadline_t m_deadline;
  const where& m_place;
};

template <bool Validate, class T>
pattern_outcome waiting_pingpong_client(waiter<T>& w, const pattern_run& run,
                                        const pattern_buffers& b, sample_recorder& samples,
                                        message_check* checker) {
  std::byte* send = b.send_slots[0];
  std::byte* recv = b.recv_slots[0];
  const std::int64_t start = now_ns();
  std::int64_t prev = start;
  for (std::uint64_t i = 0; i < run.iterations; ++i) {
    if constexpr (Validate) {
      checker->fill(send, i);
      prev = now_ns();
    }
    w.post(op_kind::recv, op_channel::data, recv, run.size, i);
    w.post(op_kind::send, op_channel::data, send, run.size, i);
    (void)w.wait(op_kind::send);
    (void)w.wait(op_kind::recv);
    const std::int64_t t = now_ns();
    samples.record(t - prev);
    prev = t;
    if constexpr (Validate) checker->check(recv, i);
  }
  return ping_pong_outcome(start, run.iterations);
}

template <bool Validate, class T>
pattern_outcome waiting_pingpong_server(waiter<T>& w, const pattern_run& run,
                                        const pattern_buffers& b, message_check* checker) {
  std::byte* send = b.send_slots[0];
  std::byte* recv = b.recv_slots[0];
  const std::int64_t start = now_ns();
  if (run.iterations > 0) w.post(op_kind::recv, op_channel::data, recv, run.size, 0);
  for (std::uint64_t i = 0; i < run.iterations; ++i) {
    (void)w.wait(op_kind::recv);
    if constexpr (Validate) {
      checker->check(recv, i);
      checker->fill(send, i);
    }
    // The next request's receive before the answer: the peer's send then finds it posted.
    if (i + 1 < run.iterations) w.post(op_kind::recv, op_channel::data, recv, run.size, i + 1);
    w.post(op_kind::send, op_channel::data, send, run.size, i);
    (void)w.wait(op_kind::send);
  }
  return ping_pong_outcome(start, run.iterations);
}

template <bool Validate, class T>
pattern_outcome waiting_stream(waiter<T>& w, const pattern_run& run, const pattern_buffers& b,
                               sample_recorder& samples, message_check* checker,
                               std::uint64_t n_send, std::uint64_t n_recv) {
  const std::size_t send_slots = b.send_slots.size();
  const std::size_t recv_slots = b.recv_slots.size();
  std::uint64_t posted_s = 0, done_s = 0, posted_r = 0, done_r = 0;
  bool ack_recv_posted = false;
  const auto post_send = [&](std::size_t slot) {
    if constexpr (Validate) checker->fill(b.send_slots[slot], posted_s);
    w.post(op_kind::send, op_channel::data, b.send_slots[slot], run.size,
           cookie_of(posted_s, slot));
    ++posted_s;
  };
  const auto post_recv = [&](std::size_t slot) {
    w.post(op_kind::recv, op_channel::data, b.recv_slots[slot], run.size,
           cookie_of(posted_r, slot));
    ++posted_r;
  };
  // A sender's acknowledgement receive, after its data receives (gloo matches a slot's messages
  // to receives in posting order).
  const auto post_ack_recv = [&] {
    if (n_send == 0 || ack_recv_posted || posted_r < n_recv) return;
    w.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
    ack_recv_posted = true;
  };

  const std::int64_t start = now_ns();
  arrival_clock arrivals(start);
  while (posted_r < std::min<std::uint64_t>(run.window, n_recv)) post_recv(posted_r % recv_slots);
  while (posted_s < std::min<std::uint64_t>(run.window, n_send)) post_send(posted_s % send_slots);
  post_ack_recv();
  while (done_s < n_send || done_r < n_recv) {
    if (done_s < n_send) {
      const completion c = w.wait(op_kind::send);
      ++done_s;
      if (posted_s < n_send) post_send(slot_of(c.cookie));
    }
    if (done_r < n_recv) {
      const completion c = w.wait(op_kind::recv);
      arrivals.new_batch();
      arrivals.arrived(samples);
      if constexpr (Validate) checker->check(b.recv_slots[slot_of(c.cookie)], seq_of(c.cookie));
      ++done_r;
      if (posted_r < n_recv) post_recv(slot_of(c.cookie));
      post_ack_recv();
    }
  }
  if (n_recv > 0) {
    w.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
    (void)w.wait(op_kind::send);
  }
  std::int64_t ack_at = 0;
  if (n_send > 0) {
    (void)w.wait(op_kind::recv);
    ack_at = now_ns();
  }
  return stream_outcome(start, ack_at, n_send > 0, arrivals, done_s, done_r);
}

template <bool Validate, class T>
pattern_outcome run_waiting(waiter<T>& w, const pattern_run& run, const pattern_buffers& b,
                            sample_recorder& samples, message_check* checker) {
  const bool client = run.role == side::client;
  switch (run.pattern) {
    case pattern_kind::pingpong:
      return client ? waiting_pingpong_client<Validate>(w, run, b, samples, checker)
                    : waiting_pingpong_server<Validate>(w, run, b, checker);
    case pattern_kind::stream_uni:
      return waiting_stream<Validate>(w, run, b, samples, checker, client ? run.iterations : 0,
                                      client ? 0 : run.iterations);
    case pattern_kind::stream_bi:
      return waiting_stream<Validate>(w, run, b, samples, checker, run.iterations, run.iterations);
  }
  throw std::logic_error("unknown pattern");
}

}  // namespace pattern_detail

// One phase over a waiting transport: two-sided, counted (no time budget).
template <waiting_transport T>
pattern_outcome run_waiting_pattern(T& t, const pattern_run& run, const pattern_buffers& buffers,
                                    sample_recorder& samples, message_check* checker,
                                    const where& place) {
  pattern_detail::check_phase(run, buffers);
  if (run.budget_ns != 0) throw std::logic_error("a time budget for a waiting transport's loop");
  if (run.data_op != op_kind::send)
    throw std::logic_error("one-sided operations in a waiting loop");
  setup_loop_clock();
  pattern_detail::waiter<T> w(t, run, place);
  return checker != nullptr ? pattern_detail::run_waiting<true>(w, run, buffers, samples, checker)
                            : pattern_detail::run_waiting<false>(w, run, buffers, samples, checker);
}

}  // namespace pairperf
