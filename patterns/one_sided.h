#pragma once
// The one-sided loops: put and get ping-pong, streams of puts or gets, bidirectional puts, over a
// transport type T.
#include <algorithm>
#include <stdexcept>

#include "patterns/driver.h"

namespace pairperf::pattern_detail {

// Put ping-pong: each side puts into the other's buffer and then sends a sync notification,
// which the transport delivers only after the put is complete at the target. The latency is that
// of a put made visible to the target (the pattern of RDMA writes with a notification).
template <bool Validate, class T>
pattern_outcome put_pingpong(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                             sample_recorder& samples, message_check* checker) {
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
template <bool Validate, class T>
pattern_outcome get_pingpong(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                             sample_recorder& samples, message_check* checker) {
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
template <bool Validate, class T>
pattern_outcome one_sided_bi(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                             message_check* checker) {
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

template <bool Validate, class T>
pattern_outcome one_sided_stream(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                                 sample_recorder& samples, message_check* checker) {
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

template <bool Validate, class T>
pattern_outcome run_one_sided(driver<T>& d, const pattern_run& run, const pattern_buffers& b,
                              sample_recorder& samples, message_check* checker) {
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

}  // namespace pairperf::pattern_detail
