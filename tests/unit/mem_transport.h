#pragma once
// An in-memory transport pair for testing the patterns on two threads without sockets (UCX's
// test_perf does the same). Knobs: corrupt the first byte of every data message sent, close,
// complete sends inside post() where the poster allows it, count receives the poster marks
// op::counted instead of returning their completions, or count data that arrives before its
// receive is posted (verbs RC answers it with RNR and a
// retry; here it is delivered once the receive comes, and counted).
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "patterns/run.h"
#include "transports/transport.h"

namespace pairperf::testing {

struct mem_wire {
  std::mutex m;
  std::deque<std::vector<std::byte>> data, sync;
  bool closed = false;
  std::size_t posted_data = 0;    // the receiving side's data receives not yet matched
  std::size_t early_pending = 0;  // data messages that came with no receive posted, unmatched
  std::size_t early_total = 0;    // all such messages
};

struct mem_link {
  mem_wire a_to_b, b_to_a;
};

class mem_transport final : public transport {
 public:
  mem_transport(std::shared_ptr<mem_link> link, bool is_a)
      : m_link(std::move(link)), m_is_a(is_a) {}

  bool corrupt_data = false;
  // Sends the poster lets complete inside post() (op::may_complete_in_post) do, as UCX's eager
  // sends: post returns 1 and queues no completion. Counted in sends_completed_in_post.
  bool complete_in_post = false;
  std::size_t sends_completed_in_post = 0;
  // Data receives the poster marks op::counted complete into counted_completions(), as UCX's do:
  // poll() returns no completion for them.
  bool count_receives = false;
  bool strict_receives = false;  // both sides of a pair must agree
  // Data messages this side received before their receive was posted (strict_receives).
  std::size_t early_arrivals() {
    std::lock_guard lock(in().m);
    return in().early_total;
  }

  // Receives posted and not yet matched.
  [[nodiscard]] std::size_t posted_receives() const {
    return m_recv_data.size() + m_recv_sync.size();
  }

  void close() {
    std::lock_guard lock(out().m);
    out().closed = true;
  }

  [[nodiscard]] capabilities caps() const override {
    return {true, false, false, {memory_type::host}, !strict_receives};
  }
  std::vector<std::byte> local_address() override { return {}; }
  void connect(std::span<const std::byte>) override {}
  mem_region register_memory(std::byte* a, std::size_t n, memory_type) override {
    return {a, n, {}};
  }

  [[nodiscard]] int post(const op& o) noexcept override {
    if (o.kind == op_kind::send) {
      std::vector<std::byte> bytes(o.local, o.local + o.length);
      if (corrupt_data && o.channel == op_channel::data && !bytes.empty())
        bytes[0] ^= std::byte{0x5A};
      {
        std::lock_guard lock(out().m);
        if (strict_receives && o.channel == op_channel::data) {
          if (out().posted_data == 0) {
            ++out().early_pending;
            ++out().early_total;
          } else {
            --out().posted_data;
          }
        }
        (o.channel == op_channel::data ? out().data : out().sync).push_back(std::move(bytes));
      }
      if (complete_in_post && o.may_complete_in_post) {
        ++sends_completed_in_post;
        return 1;
      }
      m_done.push_back({o.cookie, op_kind::send});
      return 0;
    }
    if (o.kind != op_kind::recv) return -1;
    if (o.channel == op_channel::data) {
      std::lock_guard lock(in().m);
      if (in().early_pending > 0)
        --in().early_pending;
      else
        ++in().posted_data;
    }
    (o.channel == op_channel::data ? m_recv_data : m_recv_sync).push_back(o);
    return 0;
  }

  [[nodiscard]] int poll(std::span<completion> c) noexcept override {
    std::size_t n = 0;
    while (n < c.size() && !m_done.empty()) {
      c[n++] = m_done.front();
      m_done.pop_front();
    }
    std::lock_guard lock(in().m);
    for (auto* q : {&m_recv_data, &m_recv_sync}) {
      auto& inbox = q == &m_recv_data ? in().data : in().sync;
      while (n < c.size() && !q->empty() && !inbox.empty()) {
        const op& o = q->front();
        std::memcpy(o.local, inbox.front().data(), std::min(o.length, inbox.front().size()));
        if (count_receives && o.counted)
          ++m_counted;
        else
          c[n++] = {o.cookie, op_kind::recv};
        inbox.pop_front();
        q->pop_front();
      }
    }
    if (n == 0 && in().closed) {
      m_error = "peer closed";
      m_gone = true;
      return -1;
    }
    return static_cast<int>(n);
  }

  [[nodiscard]] std::uint64_t counted_completions() const noexcept override { return m_counted; }

  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override {
    return run_pattern(*this, run, buffers, samples, checker, place);
  }

  [[nodiscard]] std::string last_error() const override { return m_error; }
  [[nodiscard]] bool peer_gone() const noexcept override { return m_gone; }
  [[nodiscard]] provenance describe() const override {
    return {{{"mem", "test"}}, "in-memory", {}, {}, {}, ""};
  }

 private:
  mem_wire& out() { return m_is_a ? m_link->a_to_b : m_link->b_to_a; }
  mem_wire& in() { return m_is_a ? m_link->b_to_a : m_link->a_to_b; }

  std::shared_ptr<mem_link> m_link;
  bool m_is_a;
  std::deque<completion> m_done;
  std::deque<op> m_recv_data, m_recv_sync;
  std::string m_error;
  bool m_gone = false;
  std::uint64_t m_counted = 0;
};

}  // namespace pairperf::testing
