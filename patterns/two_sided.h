#pragma once
// The two-sided loops: ping-pong (client and server, counted or timed) and one loop for every
// streaming role (one-way and bidirectional), over a transport type T. Configuration is
// resolved before a loop starts (pattern, role, validation and a time budget pick one
// instantiation); inside, nothing allocates and nothing branches on configuration.
#include <algorithm>
#include <stdexcept>

#include "patterns/driver.h"

namespace pairperf::pattern_detail {

template <bool Validate, bool Timed, class T>
pattern_outcome pingpong_client(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                                sample_recorder& samples, message_check* checker) {
  std::byte* send = b.send_slots[0];
  std::byte* recv = b.recv_slots[0];
  const std::int64_t start = now_ns();
  const std::int64_t stop_at = start + run.budget_ns;
  // One clock read per round trip: the end of one is the start of the next (validation's fill
  // and check stay outside the samples by reading the clock again after them).
  std::int64_t prev = start;
  std::uint64_t done = 0;
  while (done < run.iterations) {
    const std::uint64_t i = done;
    if constexpr (Validate) {
      checker->fill(send, i);
      prev = now_ns();
    }
    // The post that comes first is on the round trip's critical path: the send, where the
    // transport keeps a reply that beats its receive.
    const std::uint64_t counted_at = d.counted();
    if (!run.receive_after_send) d.post_recv_counted(recv, run.size, i);
    const bool sent = d.post_send_counted(send, run.size, i);
    if (run.receive_after_send) d.post_recv_counted(recv, run.size, i);
    d.await(sent ? 1 : 2, counted_at);
    const std::int64_t t = now_ns();
    samples.record(t - prev);
    prev = t;
    if constexpr (Validate) checker->check(recv, i);
    ++done;
    if constexpr (Timed) {
      if (t >= stop_at && done >= run.at_least) break;
    }
  }
  return ping_pong_outcome(start, done);
}

template <bool Validate, bool Timed, class T>
pattern_outcome pingpong_server(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                                message_check* checker) {
  std::byte* send = b.send_slots[0];
  std::byte* recv = b.recv_slots[0];
  const std::int64_t start = now_ns();
  // Receives complete through poll() or the transport's counter (op::counted), sends through
  // poll() unless inside their post.
  std::uint64_t polled_recvs = 0;
  std::uint64_t sent = 0;
  const std::uint64_t counted_at = d.counted();
  const auto received = [&] { return polled_recvs + (d.counted() - counted_at); };
  const auto count = [&](std::span<const completion> done) {
    for (const auto& c : done) (c.kind == op_kind::recv ? polled_recvs : sent) += 1;
  };
  if (Timed || run.iterations > 0) d.post_recv_counted(recv, run.size, 0);
  std::uint64_t i = 0;
  for (; Timed || i < run.iterations; ++i) {
    if (Timed && i == run.iterations) d.expect_stop();  // the client is at its cap
    while (received() <= i && !(Timed && d.stopped())) count(d.poll());
    if (received() <= i) break;  // timed: the client stopped after i round trips
    if (Timed && i >= run.iterations)
      d.protocol_error("the client went on past the phase's iteration cap");
    if constexpr (Validate) {
      checker->check(recv, i);
      checker->fill(send, i);
    }
    // The next receive: after the answer where the transport keeps early arrivals (off the
    // critical path), else before it, so the next request always finds one waiting. A timed
    // phase always posts one: the last takes the client's closing message.
    const bool more = Timed || i + 1 < run.iterations;
    if (more && !run.receive_after_send) d.post_recv_counted(recv, run.size, i + 1);
    if (d.post_send_counted(send, run.size, i)) ++sent;
    if (more && run.receive_after_send) d.post_recv_counted(recv, run.size, i + 1);
    while (sent <= i) count(d.poll());
  }
  return ping_pong_outcome(start, i);
}

// One loop for all streaming roles: a side sends n_send and receives n_recv messages, keeping up
// to `window` of each in flight. The receiver of data acknowledges with one sync message after
// its last arrival (and after its own sends are posted, so the ack queues behind them).
template <bool Validate, class T>
pattern_outcome stream(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                       sample_recorder& samples, message_check* checker, std::uint64_t n_send,
                       std::uint64_t n_recv) {
  const std::size_t send_slots = b.send_slots.size();
  const std::size_t recv_slots = b.recv_slots.size();
  std::uint64_t posted_s = 0, done_s = 0, posted_r = 0, done_r = 0;
  bool ack_send_posted = n_recv == 0, ack_sent = n_recv == 0;
  bool ack_recv_posted = n_send == 0, ack_received = n_send == 0;
  std::int64_t ack_at = 0;

  const auto post_send = [&](std::size_t slot) {
    if constexpr (Validate) checker->fill(b.send_slots[slot], posted_s);
    d.post(op_kind::send, op_channel::data, b.send_slots[slot], run.size,
           cookie_of(posted_s, slot));
    ++posted_s;
  };
  const auto post_recv = [&](std::size_t slot) {
    d.post(op_kind::recv, op_channel::data, b.recv_slots[slot], run.size,
           cookie_of(posted_r, slot));
    ++posted_r;
  };

  const std::int64_t start = now_ns();
  arrival_clock arrivals(start);
  while (posted_r < std::min<std::uint64_t>(run.window, n_recv)) post_recv(posted_r % recv_slots);
  while (posted_s < std::min<std::uint64_t>(run.window, n_send)) post_send(posted_s % send_slots);
  while (done_s < n_send || done_r < n_recv || !ack_sent || !ack_received) {
    if (!ack_recv_posted && posted_r == n_recv) {
      d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
      ack_recv_posted = true;
    }
    if (!ack_send_posted && done_r == n_recv && posted_s == n_send) {
      d.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
      ack_send_posted = true;
    }
    arrivals.new_batch();
    for (const completion& c : d.poll()) {
      if (c.cookie == sync_cookie) {
        if (c.kind == op_kind::recv) {
          ack_received = true;
          ack_at = now_ns();
        } else {
          ack_sent = true;
        }
      } else if (c.kind == op_kind::send) {
        ++done_s;
        if (posted_s < n_send) post_send(slot_of(c.cookie));
      } else {
        arrivals.arrived(samples);
        if constexpr (Validate) checker->check(b.recv_slots[slot_of(c.cookie)], seq_of(c.cookie));
        ++done_r;
        if (posted_r < n_recv) post_recv(slot_of(c.cookie));
      }
    }
  }
  return stream_outcome(start, ack_at, n_send > 0, arrivals, done_s, done_r);
}

template <bool Validate, class T>
pattern_outcome run_two_sided(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                              sample_recorder& samples, message_check* checker) {
  const bool client = run.role == side::client;
  switch (run.pattern) {
    case pattern_kind::pingpong:
      if (run.budget_ns > 0) {
        return client ? pingpong_client<Validate, true>(d, run, b, samples, checker)
                      : pingpong_server<Validate, true>(d, run, b, checker);
      }
      return client ? pingpong_client<Validate, false>(d, run, b, samples, checker)
                    : pingpong_server<Validate, false>(d, run, b, checker);
    case pattern_kind::stream_uni:
      return stream<Validate>(d, run, b, samples, checker, client ? run.iterations : 0,
                              client ? 0 : run.iterations);
    case pattern_kind::stream_bi:
      return stream<Validate>(d, run, b, samples, checker, run.iterations, run.iterations);
  }
  throw std::logic_error("unknown pattern");
}

}  // namespace pairperf::pattern_detail
