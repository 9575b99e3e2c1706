#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "harness/patterns.h"
#include "harness/payload.h"
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

struct pair_result {
  pattern_outcome client, server;
  std::size_t client_samples = 0, server_samples = 0;
  std::uint64_t client_corrupt = 0, server_corrupt = 0, client_checked = 0, server_checked = 0;
  std::size_t client_early = 0, server_early = 0;  // strict receives: data before its receive
};

pair_result run_pair(pattern_kind kind, std::uint64_t n, unsigned window, std::size_t size,
                     bool validate, bool server_corrupts = false, bool strict_receives = false) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true), st(link, false);
  st.corrupt_data = server_corrupts;
  ct.strict_receives = st.strict_receives = strict_receives;
  const std::size_t slots = validate ? window : 1;
  side_state cs(size, slots, validate), ss(size, slots, validate);
  cs.samples.reset(n);
  ss.samples.reset(n);
  pattern_run run{kind, op_kind::send, side::client, n, window, size, deadline_in(10s)};
  run.receive_after_send = ct.caps().keeps_early_arrivals;  // as case_session sets it
  pattern_run srun = run;
  srun.role = side::server;
  auto server = std::async(std::launch::async, [&] {
    return run_pattern(st, srun, ss.buffers(), ss.samples, ss.checker ? &*ss.checker : nullptr,
                       where{"server", "", ""});
  });
  pair_result r;
  r.client = run_pattern(ct, run, cs.buffers(), cs.samples, cs.checker ? &*cs.checker : nullptr,
                         where{"client", "", ""});
  r.server = server.get();
  r.client_early = ct.early_arrivals();
  r.server_early = st.early_arrivals();
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

TEST(Patterns, SilentPeerTimesOutWithinTheDeadline) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true);
  side_state cs(8, 1, false);
  cs.samples.reset(10);
  pattern_run run{pattern_kind::pingpong, op_kind::send, side::client, 10, 1, 8,
                  deadline_in(200ms)};
  const auto start = steady::now();
  try {
    run_pattern(ct, run, cs.buffers(), cs.samples, nullptr, where{"case 1 measure", "peer", "lo"});
    FAIL() << "expected a timeout";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::timeout);
    EXPECT_NE(std::string(e.what()).find("case 1 measure"), std::string::npos);
  }
  EXPECT_LT(steady::now() - start, 2s);
}

TEST(Patterns, PeerGoingAwayIsReportedAsClosed) {
  auto link = std::make_shared<mem_link>();
  mem_transport ct(link, true), st(link, false);
  st.close();
  side_state cs(8, 1, false);
  cs.samples.reset(10);
  pattern_run run{pattern_kind::stream_uni, op_kind::send, side::client, 10, 4, 8, deadline_in(5s)};
  try {
    run_pattern(ct, run, cs.buffers(), cs.samples, nullptr, where{"case", "", ""});
    FAIL() << "expected closed";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::closed);
  }
}

}  // namespace
}  // namespace pairperf
