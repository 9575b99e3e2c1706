#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "harness/payload.h"
#include "patterns/run.h"
#include "tests/unit/mem_transport.h"
#include "transports/memory/allocator.h"

namespace pairperf {
namespace {

using namespace std::chrono_literals;
using testing::mem_link;
using testing::mem_transport;

// Buffers and a checker for one side.
struct side_state {
  side_state(std::size_t size, std::size_t slots, bool validate) : size(size) {
    std::string why;
    allocator* host = find_allocator(memory_type::host, why);
    for (std::size_t i = 0; i < slots; ++i) {
      storage.emplace_back(size);
      send.push_back(storage.back().data());
      storage.emplace_back(size);
      recv.push_back(storage.back().data());
    }
    if (validate) checker.emplace(*host, *host, size);
  }
  pattern_buffers buffers() { return {send, recv, sync_send.data(), sync_recv.data()}; }

  std::size_t size;
  std::deque<std::vector<std::byte>> storage;
  std::vector<std::byte*> send, recv;
  std::vector<std::byte> sync_send = std::vector<std::byte>(sync_message_bytes);
  std::vector<std::byte> sync_recv = std::vector<std::byte>(sync_message_bytes);
  std::optional<payload_checker> checker;
  sample_recorder samples;
};

pattern_run make_run(pattern_kind kind, std::uint64_t n, unsigned window, std::size_t size,
                     std::chrono::nanoseconds timeout) {
  pattern_run run;
  run.pattern = kind;
  run.iterations = n;
  run.window = window;
  run.size = size;
  run.deadline = deadline_in(timeout);
  return run;
}

struct pair_result {
  pattern_outcome client, server;
  std::size_t client_samples = 0, server_samples = 0;
  std::uint64_t client_corrupt = 0, server_corrupt = 0, client_checked = 0, server_checked = 0;
  std::size_t client_early = 0, server_early = 0;        // strict receives: data before its receive
  std::size_t client_in_post = 0, server_in_post = 0;    // sends completed inside post()
  std::size_t client_left = 0, server_left = 0;          // receives still posted after the phase
  std::uint64_t client_counted = 0, server_counted = 0;  // receives completed into the counter
};

pair_result run_pair(pattern_kind kind, std::uint64_t n, unsigned window, std::size_t size,
                     bool validate, bool server_corrupts = false, bool strict_receives = false,
                     bool complete_in_post = false, bool client_counts = false,
                     bool server_counts = false) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true), st(link, false);
  ct.count_receives = client_counts;
  st.count_receives = server_counts;
  st.corrupt_data = server_corrupts;
  ct.complete_in_post = st.complete_in_post = complete_in_post;
  ct.strict_receives = st.strict_receives = strict_receives;
  const std::size_t slots = validate ? window : 1;
  side_state cs(size, slots, validate), ss(size, slots, validate);
  cs.samples.reset(n);
  ss.samples.reset(n);
  pattern_run run = make_run(kind, n, window, size, 10s);
  run.receive_after_send = ct.caps().keeps_early_arrivals;  // as case_session sets it
  pattern_run srun = run;
  srun.role = side::server;
  auto server = std::async(std::launch::async, [&] {
    return st.run_phase(srun, ss.buffers(), ss.samples, ss.checker ? &*ss.checker : nullptr,
                        where{"server", "", ""});
  });
  pair_result r;
  r.client = ct.run_phase(run, cs.buffers(), cs.samples, cs.checker ? &*cs.checker : nullptr,
                          where{"client", "", ""});
  r.server = server.get();
  r.client_early = ct.early_arrivals();
  r.server_early = st.early_arrivals();
  r.client_in_post = ct.sends_completed_in_post;
  r.server_in_post = st.sends_completed_in_post;
  r.client_counted = ct.counted_completions();
  r.server_counted = st.counted_completions();
  r.client_left = ct.posted_receives();
  r.server_left = st.posted_receives();
  r.client_samples = cs.samples.samples().size();
  r.server_samples = ss.samples.samples().size();
  if (validate) {
    r.client_corrupt = cs.checker->corrupt_bytes();
    r.server_corrupt = ss.checker->corrupt_bytes();
    r.client_checked = cs.checker->messages_checked();
    r.server_checked = ss.checker->messages_checked();
  }
  return r;
}

TEST(Patterns, PingPongRecordsEveryRoundTrip) {
  const auto r = run_pair(pattern_kind::pingpong, 200, 1, 64, true);
  EXPECT_EQ(r.client_samples, 200U);
  EXPECT_EQ(r.server_samples, 0U);
  EXPECT_EQ(r.client.messages_sent, 200U);
  EXPECT_EQ(r.server.messages_received, 200U);
  EXPECT_EQ(r.client_checked, 200U);
  EXPECT_EQ(r.server_checked, 200U);
  EXPECT_EQ(r.client_corrupt + r.server_corrupt, 0U);
  EXPECT_GT(r.client.elapsed_ns, 0);
}

// A validated ping-pong of n round trips that went through whole: every round trip timed, every
// message checked and intact, no receive left posted.
void expect_whole_pingpong(const pair_result& r, std::uint64_t n) {
  EXPECT_EQ(r.client_samples, n);
  EXPECT_EQ(r.client.messages_sent, n);
  EXPECT_EQ(r.server.messages_received, n);
  EXPECT_EQ(r.client_checked + r.server_checked, 2 * n);
  EXPECT_EQ(r.client_corrupt + r.server_corrupt, 0U);
  EXPECT_EQ(r.client_left + r.server_left, 0U);
}

// A transport that completes a send inside post() (UCX's eager send) and says so: the ping-pong
// loops count it then, and nothing waits for a completion that never comes. Streams do not offer
// it (their sends complete later, by slot), so they see queued completions as before.
TEST(Patterns, SendsCompletedInsidePostAreCountedThere) {
  const auto r = run_pair(pattern_kind::pingpong, 300, 1, 64, true, false, false, true);
  EXPECT_EQ(r.client_in_post, 300U);
  EXPECT_EQ(r.server_in_post, 300U);
  expect_whole_pingpong(r, 300);

  const auto s = run_pair(pattern_kind::stream_bi, 500, 8, 64, true, false, false, true);
  EXPECT_EQ(s.client_in_post + s.server_in_post, 0U);
  EXPECT_EQ(s.client.messages_received, 500U);
  EXPECT_EQ(s.server.messages_received, 500U);
  EXPECT_EQ(s.client_corrupt + s.server_corrupt, 0U);
}

// A transport that completes a ping-pong's receives into its counter (op::counted; UCX's
// callbacks only count them): the loops read the counter beside poll(), on both sides or on one
// (each side's loop reads whichever its transport uses), with sends completed in post or not.
TEST(Patterns, ReceivesCountedByTheTransportAreSeenByTheLoops) {
  for (const auto& [client_counts, server_counts, in_post] :
       {std::tuple{true, true, true}, {true, false, false}, {false, true, true}}) {
    const auto r = run_pair(pattern_kind::pingpong, 300, 1, 64, true, false, false, in_post,
                            client_counts, server_counts);
    EXPECT_EQ(r.client_counted, client_counts ? 300U : 0U);
    EXPECT_EQ(r.server_counted, server_counts ? 300U : 0U);
    expect_whole_pingpong(r, 300);
  }
  // Streams keep their cookies (slots, arrival order): they never ask for counting.
  const auto s =
      run_pair(pattern_kind::stream_bi, 500, 8, 64, true, false, false, false, true, true);
  EXPECT_EQ(s.client_counted + s.server_counted, 0U);
  EXPECT_EQ(s.client.messages_received, 500U);
  EXPECT_EQ(s.server.messages_received, 500U);
  EXPECT_EQ(s.client_corrupt + s.server_corrupt, 0U);
}

TEST(Patterns, PingPongPrePostsReceivesWhereEarlyArrivalsAreRefused) {
  // Verbs-like: a data message with no receive posted would be an RNR. The receive-first order
  // lets none arrive early, however the two threads interleave, except the very first request,
  // which may beat the server's start (real runs start both loops after the control channel's
  // go, and verbs retries an RNR).
  const auto r = run_pair(pattern_kind::pingpong, 5000, 1, 64, true, false, true);
  EXPECT_EQ(r.client_early, 0U);
  EXPECT_LE(r.server_early, 1U);
  EXPECT_EQ(r.client_samples, 5000U);
  EXPECT_EQ(r.client_checked + r.server_checked, 10000U);
  EXPECT_EQ(r.client_corrupt + r.server_corrupt, 0U);
}

TEST(Patterns, StreamUniMovesEveryMessageAndAcknowledges) {
  const auto r = run_pair(pattern_kind::stream_uni, 1000, 8, 100, true);
  EXPECT_EQ(r.client.messages_sent, 1000U);
  EXPECT_EQ(r.client.messages_received, 0U);
  EXPECT_EQ(r.server.messages_received, 1000U);
  EXPECT_EQ(r.server_samples, 999U);  // gaps between arrivals
  EXPECT_EQ(r.server_checked, 1000U);
  EXPECT_EQ(r.server_corrupt, 0U);
  EXPECT_GT(r.client.send_elapsed_ns, 0);  // ended by the receiver's acknowledgement
  EXPECT_GE(r.server.recv_span_ns, 0);
}

TEST(Patterns, StreamBiRunsBothDirections) {
  const auto r = run_pair(pattern_kind::stream_bi, 500, 4, 33, true);
  EXPECT_EQ(r.client.messages_sent, 500U);
  EXPECT_EQ(r.client.messages_received, 500U);
  EXPECT_EQ(r.server.messages_sent, 500U);
  EXPECT_EQ(r.server.messages_received, 500U);
  EXPECT_EQ(r.client_checked + r.server_checked, 1000U);
  EXPECT_EQ(r.client_corrupt + r.server_corrupt, 0U);
}

TEST(Patterns, WithoutValidationOneSlotServesTheWholeWindow) {
  const auto r = run_pair(pattern_kind::stream_uni, 300, 16, 8, false);
  EXPECT_EQ(r.server.messages_received, 300U);
}

TEST(Patterns, CorruptionIsCountedByteForByte) {
  const auto r = run_pair(pattern_kind::pingpong, 50, 1, 256, true, /*server_corrupts=*/true);
  EXPECT_EQ(r.client_checked, 50U);
  EXPECT_EQ(r.client_corrupt, 50U);  // one flipped byte per echoed message
  EXPECT_EQ(r.server_corrupt, 0U);
}

// A timed ping-pong (run_pattern's budget) on both sides, as case_session and the control
// channel run it: the server asks stop_requested(), then the closing message.
struct timed_pair {
  pattern_outcome client, server;
  std::chrono::nanoseconds took{};
};

timed_pair run_timed(mem_transport& ct, mem_transport& st, side_state& cs, side_state& ss,
                     std::uint64_t cap, std::chrono::nanoseconds budget) {
  pattern_run run = make_run(pattern_kind::pingpong, cap, 1, 64, 10s);
  run.receive_after_send = ct.caps().keeps_early_arrivals;
  run.budget_ns = budget.count();
  pattern_run srun = run;
  srun.role = side::server;
  std::atomic<bool> client_done{false}, server_stopped{false};  // `stop` and `stopped`
  srun.stop_requested = [&] { return client_done.load(); };
  cs.samples.reset(cap);
  auto server = std::async(std::launch::async, [&] {
    pattern_outcome out;
    try {
      out = st.run_phase(srun, ss.buffers(), ss.samples, ss.checker ? &*ss.checker : nullptr,
                         where{"server", "", ""});
    } catch (...) {
      server_stopped = true;
      throw;
    }
    server_stopped = true;
    receive_closing_message(st, srun, where{"server closing", "", ""});
    return out;
  });
  const auto start = steady::now();
  timed_pair r;
  r.client = ct.run_phase(run, cs.buffers(), cs.samples, cs.checker ? &*cs.checker : nullptr,
                          where{"client", "", ""});
  r.took = steady::now() - start;
  client_done = true;
  for (int i = 0; i < 10'000 && !server_stopped; ++i) std::this_thread::sleep_for(1ms);
  send_closing_message(ct, run, cs.buffers(), where{"client closing", "", ""});
  r.server = server.get();
  return r;
}

TEST(Patterns, TimedPingPongEndsAtItsBudgetAndLeavesNoReceivePosted) {
  // TCP-like, then verbs-like receives, then UCX-like: sends completed inside post() and
  // receives into the counter (the closing message's too)
  for (const auto& [strict, in_post] : {std::pair{false, false}, {true, false}, {false, true}}) {
    auto link = std::make_shared<mem_link>();
    mem_transport ct(link, true), st(link, false);
    ct.strict_receives = st.strict_receives = strict;
    ct.complete_in_post = st.complete_in_post = in_post;
    ct.count_receives = st.count_receives = in_post;
    side_state cs(64, 1, true), ss(64, 1, true);
    const timed_pair r = run_timed(ct, st, cs, ss, 2'000'000, 50ms);
    EXPECT_GE(r.took, 50ms) << "strict " << strict;
    EXPECT_LT(r.took, 5s);
    EXPECT_GT(r.client.messages_sent, 0U);
    EXPECT_LT(r.client.messages_sent, 2'000'000U);
    EXPECT_EQ(r.client.messages_sent, r.server.messages_received) << "strict " << strict;
    EXPECT_EQ(cs.samples.samples().size(), r.client.messages_sent);
    EXPECT_EQ(ct.posted_receives() + st.posted_receives(), 0U) << "strict " << strict;
    // The next phase finds the link empty: every message of a fixed count lands where expected.
    pattern_run next = make_run(pattern_kind::pingpong, 100, 1, 64, 10s);
    next.receive_after_send = ct.caps().keeps_early_arrivals;
    pattern_run snext = next;
    snext.role = side::server;
    auto server = std::async(std::launch::async, [&] {
      return st.run_phase(snext, ss.buffers(), ss.samples, &*ss.checker, where{"s", "", ""});
    });
    const auto c = ct.run_phase(next, cs.buffers(), cs.samples, &*cs.checker, where{"c", "", ""});
    EXPECT_EQ(server.get().messages_received, 100U);
    EXPECT_EQ(c.messages_sent, 100U);
    EXPECT_EQ(cs.checker->corrupt_bytes() + ss.checker->corrupt_bytes(), 0U);
    EXPECT_EQ(ct.early_arrivals(), 0U) << "strict " << strict;
    if (in_post) {
      EXPECT_EQ(ct.sends_completed_in_post, r.client.messages_sent + 100);
      // Every request the server took, the closing message included, and every reply.
      EXPECT_EQ(st.counted_completions(), r.server.messages_received + 1 + 100);
      EXPECT_EQ(ct.counted_completions(), r.client.messages_sent + 100);
    }
  }
}

TEST(Patterns, TimedPingPongStopsAtItsCapFirst) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true), st(link, false);
  side_state cs(64, 1, false), ss(64, 1, false);
  const timed_pair r = run_timed(ct, st, cs, ss, 500, 60s);
  EXPECT_EQ(r.client.messages_sent, 500U);
  EXPECT_EQ(r.server.messages_received, 500U);
  EXPECT_LT(r.took, 30s);
}

TEST(Patterns, TimedServerRefusesAClientPastTheCap) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true), st(link, false);
  side_state cs(8, 1, false), ss(8, 1, false);
  pattern_run run = make_run(pattern_kind::pingpong, 20, 1, 8, 10s);  // the client ignores it
  pattern_run srun = make_run(pattern_kind::pingpong, 10, 1, 8, 10s);
  srun.role = side::server;
  srun.budget_ns = std::chrono::nanoseconds(1s).count();
  srun.stop_requested = [] { return false; };
  cs.samples.reset(20);
  auto client = std::async(std::launch::async, [&] {
    try {
      ct.run_phase(run, cs.buffers(), cs.samples, nullptr, where{"client", "", ""});
    } catch (const step_error&) {  // the server stops answering: it times out or sees it close
    }
  });
  try {
    st.run_phase(srun, ss.buffers(), ss.samples, nullptr, where{"server", "", ""});
    ADD_FAILURE() << "expected a protocol error";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::protocol);
    EXPECT_NE(std::string(e.what()).find("iteration cap"), std::string::npos) << e.what();
  }
  st.close();
  client.get();
}

TEST(Patterns, SilentPeerTimesOutWithinTheDeadline) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true);
  side_state cs(8, 1, false);
  cs.samples.reset(10);
  pattern_run run = make_run(pattern_kind::pingpong, 10, 1, 8, 200ms);
  const auto start = steady::now();
  try {
    ct.run_phase(run, cs.buffers(), cs.samples, nullptr, where{"case 1 measure", "peer", "lo"});
    FAIL() << "expected a timeout";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::timeout);
    EXPECT_NE(std::string(e.what()).find("case 1 measure"), std::string::npos);
  }
  EXPECT_LT(steady::now() - start, 2s);
}

// Sends that complete at once and never stop (the peer died behind a queue that still takes
// them): the loop is never idle, and must still end at its deadline, not after its count.
class sink_transport final : public transport {
 public:
  [[nodiscard]] capabilities caps() const override {
    return {true, false, false, {memory_type::host}, true};
  }
  std::vector<std::byte> local_address() override { return {}; }
  void connect(std::span<const std::byte>) override {}
  mem_region register_memory(std::byte* a, std::size_t n, memory_type) override {
    return {a, n, {}};
  }
  [[nodiscard]] int post(const op& o) noexcept override {
    if (o.kind == op_kind::send) m_done.push_back(completion{o.cookie, o.kind});
    return 0;  // receives never complete
  }
  [[nodiscard]] int poll(std::span<completion> out) noexcept override {
    std::size_t n = 0;
    while (n < out.size() && !m_done.empty()) {
      out[n++] = m_done.front();
      m_done.pop_front();
    }
    return static_cast<int>(n);
  }
  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override {
    return run_pattern(*this, run, buffers, samples, checker, place);
  }
  [[nodiscard]] std::string last_error() const override { return {}; }
  [[nodiscard]] bool peer_gone() const noexcept override { return false; }
  [[nodiscard]] provenance describe() const override { return {}; }

 private:
  std::deque<completion> m_done;
};

TEST(Patterns, CompletionsThatNeverStopStillEndAtTheDeadline) {
  for (const pattern_kind kind : {pattern_kind::stream_uni, pattern_kind::stream_bi}) {
    sink_transport t;
    side_state cs(8, 32, false);
    const pattern_run run = make_run(kind, std::uint64_t{1} << 40, 32, 8, 50ms);
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)t.run_phase(run, cs.buffers(), cs.samples, nullptr, where{"c", "", ""});
      ADD_FAILURE() << "2^40 sends ended without the deadline";
    } catch (const step_error& e) {
      EXPECT_NE(std::string(e.what()).find("did not finish before its timeout"), std::string::npos)
          << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << to_string(kind);
  }
}

TEST(Patterns, PeerGoingAwayIsReportedAsClosed) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true), st(link, false);
  st.close();
  side_state cs(8, 1, false);
  cs.samples.reset(10);
  pattern_run run = make_run(pattern_kind::stream_uni, 10, 4, 8, 5s);
  try {
    ct.run_phase(run, cs.buffers(), cs.samples, nullptr, where{"case", "", ""});
    FAIL() << "expected closed";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::closed);
  }
}

}  // namespace
}  // namespace pairperf
