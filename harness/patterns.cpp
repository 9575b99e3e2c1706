#include "harness/patterns.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "harness/payload.h"

namespace pairperf {
namespace {

constexpr std::uint64_t sync_cookie = ~std::uint64_t{0};
inline std::int64_t now_ns() noexcept;
constexpr unsigned slot_bits = 16;
constexpr std::uint64_t slot_mask = (std::uint64_t{1} << slot_bits) - 1;
constexpr unsigned polls_between_clock_reads = 1024;

constexpr std::uint64_t cookie_of(std::uint64_t seq, std::size_t slot) noexcept {
  return (seq << slot_bits) | slot;
}
constexpr std::uint64_t seq_of(std::uint64_t cookie) noexcept { return cookie >> slot_bits; }
constexpr std::size_t slot_of(std::uint64_t cookie) noexcept {
  return static_cast<std::size_t>(cookie & slot_mask);
}

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

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

// A ping-pong phase: n messages each way, timed from `start` to now.
pattern_outcome ping_pong_outcome(std::int64_t start, std::uint64_t n) noexcept {
  pattern_outcome out;
  out.elapsed_ns = now_ns() - start;
  out.messages_sent = out.messages_received = n;
  return out;
}

// post/poll with failure and deadline handling around a transport.
class driver {
 public:
  driver(transport& t, const pattern_run& run, const where& place)
      : m_t(t), m_deadline(run.deadline), m_place(place) {}

  void post(op_kind kind, op_channel channel, std::byte* data, std::size_t len,
            std::uint64_t cookie, std::uint32_t remote = 0) {
    if (m_t.post(op{kind, channel, data, len, cookie, remote}) != 0) fail();
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

  std::span<const completion> poll() {
    const int n = m_t.poll(m_completions);
    if (n < 0) fail();
    if (n == 0 && ++m_idle >= polls_between_clock_reads) {
      m_idle = 0;
      if (steady::now() >= m_deadline) {
        throw step_error(error_kind::timeout, m_place,
                         "the case did not finish before its timeout (--timeout-case)", ETIMEDOUT);
      }
    }
    return {m_completions.data(), static_cast<std::size_t>(n)};
  }

 private:
  [[noreturn]] void fail() const {
    throw step_error(m_t.peer_gone() ? error_kind::closed : error_kind::error, m_place,
                     m_t.last_error());
  }

  transport& m_t;
  deadline_t m_deadline;
  const where& m_place;
  std::array<completion, 64> m_completions{};
  unsigned m_idle = 0;
};

template <bool Validate>
pattern_outcome pingpong_client(driver& d, const pattern_run& run, const pattern_buffers& b,
                                sample_recorder& samples, payload_checker* checker) {
  std::byte* send = b.send_slots[0];
  std::byte* recv = b.recv_slots[0];
  const std::int64_t start = now_ns();
  // One clock read per round trip: the end of one is the start of the next (validation's fill
  // and check stay outside the samples by reading the clock again after them).
  std::int64_t prev = start;
  for (std::uint64_t i = 0; i < run.iterations; ++i) {
    if constexpr (Validate) {
      checker->fill(send, i);
      prev = now_ns();
    }
    // The post that comes first is on the round trip's critical path: the send, where the
    // transport keeps a reply that beats its receive.
    if (!run.receive_after_send) d.post(op_kind::recv, op_channel::data, recv, run.size, i);
    d.post(op_kind::send, op_channel::data, send, run.size, i);
    if (run.receive_after_send) d.post(op_kind::recv, op_channel::data, recv, run.size, i);
    for (std::size_t pending = 2; pending > 0;) pending -= d.poll().size();
    const std::int64_t t = now_ns();
    samples.record(t - prev);
    prev = t;
    if constexpr (Validate) checker->check(recv, i);
  }
  return ping_pong_outcome(start, run.iterations);
}

template <bool Validate>
pattern_outcome pingpong_server(driver& d, const pattern_run& run, const pattern_buffers& b,
                                payload_checker* checker) {
  std::byte* send = b.send_slots[0];
  std::byte* recv = b.recv_slots[0];
  const std::int64_t start = now_ns();
  std::uint64_t received = 0;
  std::uint64_t sent = 0;
  const auto count = [&](std::span<const completion> done) {
    for (const auto& c : done) (c.kind == op_kind::recv ? received : sent) += 1;
  };
  if (run.iterations > 0) d.post(op_kind::recv, op_channel::data, recv, run.size, 0);
  for (std::uint64_t i = 0; i < run.iterations; ++i) {
    while (received <= i) count(d.poll());
    if constexpr (Validate) {
      checker->check(recv, i);
      checker->fill(send, i);
    }
    // The next receive: after the answer where the transport keeps early arrivals (off the
    // critical path), else before it, so the next request always finds one waiting.
    const bool more = i + 1 < run.iterations;
    if (more && !run.receive_after_send)
      d.post(op_kind::recv, op_channel::data, recv, run.size, i + 1);
    d.post(op_kind::send, op_channel::data, send, run.size, i);
    if (more && run.receive_after_send)
      d.post(op_kind::recv, op_channel::data, recv, run.size, i + 1);
    while (sent <= i) count(d.poll());
  }
  return ping_pong_outcome(start, run.iterations);
}

// One loop for all streaming roles: a side sends n_send and receives n_recv messages, keeping up
// to `window` of each in flight. The receiver of data acknowledges with one sync message after
// its last arrival (and after its own sends are posted, so the ack queues behind them).
template <bool Validate>
pattern_outcome stream(driver& d, const pattern_run& run, const pattern_buffers& b,
                       sample_recorder& samples, payload_checker* checker, std::uint64_t n_send,
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
  pattern_outcome out;
  out.elapsed_ns = now_ns() - start;
  out.send_elapsed_ns = n_send > 0 ? ack_at - start : 0;
  arrivals.report(out);
  out.messages_sent = done_s;
  out.messages_received = done_r;
  return out;
}

// Put ping-pong: each side puts into the other's buffer and then sends a sync notification,
// which the transport delivers only after the put is complete at the target. The latency is that
// of a put made visible to the target (the pattern of RDMA writes with a notification).
template <bool Validate>
pattern_outcome put_pingpong(driver& d, const pattern_run& run, const pattern_buffers& b,
                             sample_recorder& samples, payload_checker* checker) {
  std::byte* send = b.send_slots[0];
  std::byte* recv = b.recv_slots[0];
  const bool client = run.role == side::client;
  const auto put_and_notify = [&](std::uint64_t i) {
    if constexpr (Validate) checker->fill(send, i);
    d.post(op_kind::put, op_channel::data, send, run.size, i, 0);
    d.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
  };
  // Waits until this side's put and notification are done and, if `notified`, the peer's came.
  const auto wait = [&](bool notified) {
    bool put_done = false, sent = false, got = !notified;
    while (!put_done || !sent || !got) {
      for (const completion& c : d.poll()) {
        if (c.kind == op_kind::put) put_done = true;
        if (c.cookie == sync_cookie && c.kind == op_kind::send) sent = true;
        if (c.cookie == sync_cookie && c.kind == op_kind::recv) got = true;
      }
    }
  };
  const std::int64_t start = now_ns();
  for (std::uint64_t i = 0; i < run.iterations; ++i) {
    if (client) {
      const std::int64_t t0 = now_ns();
      d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
      put_and_notify(i);
      wait(true);
      samples.record(now_ns() - t0);
      if constexpr (Validate) checker->check(recv, i);
    } else {
      d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
      d.wait_sync(op_kind::recv);
      if constexpr (Validate) checker->check(recv, i);
      put_and_notify(i);
      wait(false);
    }
  }
  return ping_pong_outcome(start, run.iterations);
}

// Get ping-pong: the client reads the target's buffer, one read at a time; a read is a round trip
// (request out, data back), so one-way latency is half of it as for every ping-pong. The target
// only waits for "done" and acknowledges it.
template <bool Validate>
pattern_outcome get_pingpong(driver& d, const pattern_run& run, const pattern_buffers& b,
                             sample_recorder& samples, payload_checker* checker) {
  const std::int64_t start = now_ns();
  if (run.role == side::server) {
    d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
    d.wait_sync(op_kind::recv);
    d.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
    d.wait_sync(op_kind::send);
    return ping_pong_outcome(start, run.iterations);
  }
  std::byte* local = b.recv_slots[0];
  const auto peer_slot0 = static_cast<std::uint32_t>(b.peer_recv_slots);  // its first send slot
  d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
  std::int64_t prev = now_ns();
  for (std::uint64_t i = 0; i < run.iterations; ++i) {
    d.post(op_kind::get, op_channel::data, local, run.size, i, peer_slot0);
    for (bool done = false; !done;) {
      for (const completion& c : d.poll()) done = done || c.kind == op_kind::get;
    }
    const std::int64_t now = now_ns();
    samples.record(now - prev);
    if constexpr (Validate) {
      checker->check(local, 0);  // the target filled its slot 0 with the pattern of 0
      prev = now_ns();
    } else {
      prev = now;
    }
  }
  d.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
  for (bool sent = false, acked = false; !sent || !acked;) {
    for (const completion& c : d.poll()) {
      if (c.cookie != sync_cookie) continue;
      sent = sent || c.kind == op_kind::send;
      acked = acked || c.kind == op_kind::recv;
    }
  }
  return ping_pong_outcome(start, run.iterations);
}

// Bidirectional puts: both sides keep `window` puts in flight into the other's receive slots,
// then each sends "done" (ordered after its puts) and waits for the other's. A put's completion
// means it reached the target, so each side's figure is that of a sender.
template <bool Validate>
pattern_outcome one_sided_bi(driver& d, const pattern_run& run, const pattern_buffers& b,
                             payload_checker* checker) {
  pattern_outcome out;
  const std::int64_t start = now_ns();
  std::uint64_t posted = 0, done = 0;
  const std::size_t peer_slots = std::max<std::size_t>(1, b.peer_recv_slots);
  const auto post_one = [&](std::size_t slot) {
    if constexpr (Validate) checker->fill(b.send_slots[slot], posted);
    d.post(op_kind::put, op_channel::data, b.send_slots[slot], run.size, cookie_of(posted, slot),
           static_cast<std::uint32_t>(posted % peer_slots));
    ++posted;
  };
  d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
  bool got_done = false;
  while (posted < std::min<std::uint64_t>(run.window, run.iterations))
    post_one(posted % b.send_slots.size());
  while (done < run.iterations) {
    for (const completion& c : d.poll()) {
      if (c.cookie == sync_cookie) {
        got_done = got_done || c.kind == op_kind::recv;
        continue;
      }
      ++done;
      if (posted < run.iterations) post_one(slot_of(c.cookie));
    }
  }
  const std::int64_t puts_done = now_ns();
  d.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
  for (bool sent = false; !sent || !got_done;) {
    for (const completion& c : d.poll()) {
      if (c.cookie != sync_cookie) continue;
      sent = sent || c.kind == op_kind::send;
      got_done = got_done || c.kind == op_kind::recv;
    }
  }
  if constexpr (Validate) {
    const std::size_t slots = b.recv_slots.size();
    for (std::size_t s = 0; s < slots && s < run.iterations; ++s)
      checker->check(b.recv_slots[s], s + (run.iterations - 1 - s) / slots * slots);
  }
  out.elapsed_ns = now_ns() - start;
  out.send_elapsed_ns = puts_done - start;
  out.messages_sent = done;
  return out;
}

template <bool Validate>
pattern_outcome one_sided_stream(driver& d, const pattern_run& run, const pattern_buffers& b,
                                 sample_recorder& samples, payload_checker* checker) {
  pattern_outcome out;
  const std::int64_t start = now_ns();
  if (run.role == side::server) {
    // The target: wait for "done", check what landed, acknowledge.
    d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
    d.wait_sync(op_kind::recv);
    if constexpr (Validate) {
      if (run.data_op == op_kind::put) {
        const std::size_t slots = b.recv_slots.size();
        for (std::size_t s = 0; s < slots && s < run.iterations; ++s) {
          const std::uint64_t last =
              s + (run.iterations - 1 - s) / slots * slots;  // last k with k % slots == s
          checker->check(b.recv_slots[s], last);
        }
      }
    }
    d.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
    d.wait_sync(op_kind::send);
    out.elapsed_ns = now_ns() - start;
    return out;
  }
  const bool is_get = run.data_op == op_kind::get;
  const std::span<std::byte* const> local = is_get ? b.recv_slots : b.send_slots;
  const std::size_t peer_slots = is_get ? b.peer_send_slots : b.peer_recv_slots;
  const std::uint32_t peer_base = is_get ? static_cast<std::uint32_t>(b.peer_recv_slots) : 0;
  std::uint64_t posted = 0, done = 0;
  std::int64_t ack_at = 0;
  arrival_clock arrivals(start);
  const auto post_one = [&](std::size_t slot) {
    if constexpr (Validate) {
      if (!is_get) checker->fill(local[slot], posted);
    }
    d.post(run.data_op, op_channel::data, local[slot], run.size, cookie_of(posted, slot),
           peer_base + static_cast<std::uint32_t>(posted % peer_slots));
    ++posted;
  };
  d.post(op_kind::recv, op_channel::sync, b.sync_recv, sync_message_bytes, sync_cookie);
  while (posted < std::min<std::uint64_t>(run.window, run.iterations))
    post_one(posted % local.size());
  while (done < run.iterations) {
    arrivals.new_batch();
    for (const completion& c : d.poll()) {
      if (c.cookie == sync_cookie) continue;  // cannot be the ack yet: "done" is not sent
      if (is_get) {
        arrivals.arrived(samples);
        // The target filled its slot j with the pattern of j; message k read slot k % peer_slots.
        if constexpr (Validate)
          checker->check(local[slot_of(c.cookie)], seq_of(c.cookie) % peer_slots);
      }
      ++done;
      if (posted < run.iterations) post_one(slot_of(c.cookie));
    }
  }
  d.post(op_kind::send, op_channel::sync, b.sync_send, sync_message_bytes, sync_cookie);
  bool sent = false, acked = false;
  while (!sent || !acked) {
    for (const completion& c : d.poll()) {
      if (c.cookie != sync_cookie) continue;
      if (c.kind == op_kind::send) sent = true;
      if (c.kind == op_kind::recv) {
        acked = true;
        ack_at = now_ns();
      }
    }
  }
  out.elapsed_ns = now_ns() - start;
  out.send_elapsed_ns = is_get ? 0 : ack_at - start;
  if (is_get) arrivals.report(out);
  (is_get ? out.messages_received : out.messages_sent) = done;
  return out;
}

template <bool Validate>
pattern_outcome dispatch(driver& d, const pattern_run& run, const pattern_buffers& b,
                         sample_recorder& samples, payload_checker* checker) {
  const bool client = run.role == side::client;
  if (run.data_op == op_kind::put || run.data_op == op_kind::get) {
    switch (run.pattern) {
      case pattern_kind::pingpong:
        if (run.data_op == op_kind::put) return put_pingpong<Validate>(d, run, b, samples, checker);
        return get_pingpong<Validate>(d, run, b, samples, checker);
      case pattern_kind::stream_uni:
        return one_sided_stream<Validate>(d, run, b, samples, checker);
      case pattern_kind::stream_bi:
        if (run.data_op == op_kind::put) return one_sided_bi<Validate>(d, run, b, checker);
        break;
    }
    throw std::logic_error("no one-sided variant of this pattern");
  }
  switch (run.pattern) {
    case pattern_kind::pingpong:
      return client ? pingpong_client<Validate>(d, run, b, samples, checker)
                    : pingpong_server<Validate>(d, run, b, checker);
    case pattern_kind::stream_uni:
      return stream<Validate>(d, run, b, samples, checker, client ? run.iterations : 0,
                              client ? 0 : run.iterations);
    case pattern_kind::stream_bi:
      return stream<Validate>(d, run, b, samples, checker, run.iterations, run.iterations);
  }
  throw std::logic_error("unknown pattern");
}

}  // namespace

pattern_outcome run_pattern(transport& t, const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, payload_checker* checker,
                            const where& place) {
  if (buffers.send_slots.empty() && buffers.recv_slots.empty())
    throw std::logic_error("pattern without buffers");
  if (run.window == 0 || run.window > max_window)
    throw std::logic_error("pattern window out of range");
  driver d(t, run, place);
  const pattern_outcome out = checker != nullptr
                                  ? dispatch<true>(d, run, buffers, samples, checker)
                                  : dispatch<false>(d, run, buffers, samples, checker);
  d.flush();  // outside the timed span
  return out;
}

}  // namespace pairperf
