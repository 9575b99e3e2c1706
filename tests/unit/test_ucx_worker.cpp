// A UCX worker serves consecutive cases of one configuration in a process, and only while each
// case leaves it clean: two transports connected to each other in this process, on shared memory.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "transports/ucx/ucx_transport.h"
#include "transports/ucx/ucx_wire.h"

namespace pairperf {
namespace {

transport_params params(std::size_t index, side which) {
  transport_params p;
  p.test.index = index;
  p.test.transport = "ucx";
  p.test.test = "tag_lat";
  p.test.tls = "posix,sysv,cma";
  // Distinct configurations for the two sides, so each side has its own kept worker.
  p.test.iface = which == side::client ? "lo" : "";
  p.test.size_bytes = 8;
  p.side = which;
  p.peer_host = "127.0.0.1";
  return p;
}

struct connected {
  std::unique_ptr<ucx_transport> client, server;
};

// Both sides connect at once (the handshake is a message each way), each in its own thread.
connected connect_pair(std::size_t index) {
  connected c{std::make_unique<ucx_transport>(params(index, side::client)),
              std::make_unique<ucx_transport>(params(index, side::server))};
  const auto client_address = c.client->local_address();
  const auto server_address = c.server->local_address();
  std::thread server([&] { c.server->connect(client_address); });
  c.client->connect(server_address);
  server.join();
  return c;
}

std::size_t worker_cases(const ucx_transport& t, side which) {
  const provenance p = t.describe();
  return (which == side::client ? p.client : p.server).at("worker_cases").get<std::size_t>();
}

// Polls until `n` completions arrived or a second passed.
bool complete(transport& t, std::size_t n) {
  std::array<completion, 8> out{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  std::size_t seen = 0;
  while (seen < n && std::chrono::steady_clock::now() < end) {
    const int got = t.poll(out);
    if (got < 0) return false;
    seen += static_cast<std::size_t>(got);
  }
  return seen >= n;
}

TEST(UcxWorker, ConsecutiveCleanCasesShareTheWorkerAndAMessageLeftBehindEndsIt) {
  const std::size_t first = 1000;  // indices of this test's own: its tags are its own
  std::size_t base_client = 0, base_server = 0;
  {
    auto c = connect_pair(first);
    base_client = worker_cases(*c.client, side::client);
    base_server = worker_cases(*c.server, side::server);
    // One message each way, both received: a clean case.
    std::array<std::byte, 8> a{}, b{};
    ASSERT_EQ(c.server->post(op{op_kind::recv, op_channel::data, b.data(), b.size(), 1, 0}), 0);
    ASSERT_EQ(c.client->post(op{op_kind::send, op_channel::data, a.data(), a.size(), 2, 0}), 0);
    std::thread server([&] { EXPECT_TRUE(complete(*c.server, 1)) << c.server->last_error(); });
    EXPECT_TRUE(complete(*c.client, 1)) << c.client->last_error();
    server.join();
  }
  {
    auto c = connect_pair(first + 1);
    EXPECT_EQ(worker_cases(*c.client, side::client), base_client + 1);
    EXPECT_EQ(worker_cases(*c.server, side::server), base_server + 1);
    // The client sends a message the server never receives: it waits in the server's worker.
    std::array<std::byte, 8> a{};
    ASSERT_EQ(c.client->post(op{op_kind::send, op_channel::data, a.data(), a.size(), 3, 0}), 0);
    std::thread server([&] {
      std::array<completion, 8> out{};
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (std::chrono::steady_clock::now() < end) EXPECT_GE(c.server->poll(out), 0);
    });
    EXPECT_TRUE(complete(*c.client, 1)) << c.client->last_error();
    server.join();
  }
  {
    auto c = connect_pair(first + 2);
    // The client's worker was clean; the server's held the unreceived message and went.
    EXPECT_EQ(worker_cases(*c.client, side::client), base_client + 2);
    EXPECT_EQ(worker_cases(*c.server, side::server), 1U);
  }
}

// Polls until `n` completions arrived or a second passed; returns their cookies in order.
std::vector<std::uint64_t> cookies(transport& t, std::size_t n) {
  std::array<completion, 8> out{};
  std::vector<std::uint64_t> seen;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (seen.size() < n && std::chrono::steady_clock::now() < end) {
    const int got = t.poll(out);
    if (got < 0) break;
    for (int i = 0; i < got; ++i) seen.push_back(out[static_cast<std::size_t>(i)].cookie);
  }
  return seen;
}

// Each operation's cookie lives in its UCX request; requests complete in any order of the
// transport's outstanding list (its last, middle and first entries here), and a probed send
// (UCP_OP_ATTR_FLAG_NO_IMM_CMPL) reports its own cookie whether it completes inside its post or
// later.
TEST(UcxWorker, EveryCompletionCarriesItsOperationsCookie) {
  auto c = connect_pair(2000);
  std::array<std::array<std::byte, 8>, 3> in{}, out{};
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(c.server->post(op{op_kind::recv, op_channel::data, in[i].data(), 8, 10 + i, 0}), 0);
  }
  c.client->probe_next_operation();
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(c.client->post(op{op_kind::send, op_channel::data, out[i].data(), 8, 20 + i, 0}), 0)
        << c.client->last_error();
  }
  std::vector<std::uint64_t> received;
  std::thread server([&] { received = cookies(*c.server, 3); });
  const std::vector<std::uint64_t> sent = cookies(*c.client, 3);
  server.join();
  EXPECT_EQ(sent, (std::vector<std::uint64_t>{20, 21, 22}));
  EXPECT_EQ(received, (std::vector<std::uint64_t>{10, 11, 12}));
  // The probed send was queried: its protocol is in the description.
  const provenance p = c.client->describe();
  EXPECT_FALSE(p.client.value("request_info", std::string()).empty()) << p.client.dump();
}

// A case that ends with receives still posted (a peer that died) cancels them, every one, and
// its worker does not serve the next case.
TEST(UcxWorker, OperationsLeftOutstandingAreCancelledAndTheirWorkerGoes) {
  {
    auto c = connect_pair(3000);
    std::array<std::array<std::byte, 8>, 3> in{};
    for (std::size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(c.server->post(op{op_kind::recv, op_channel::data, in[i].data(), 8, i, 0}), 0);
    }
    EXPECT_TRUE(cookies(*c.server, 1).empty());  // nothing was sent: all three stay posted
  }
  auto c = connect_pair(3001);
  EXPECT_EQ(worker_cases(*c.server, side::server), 1U);
}

TEST(UcxWorker, EachCaseTagsItsMessagesWithItsIndex) {
  using namespace ucx_wire;
  EXPECT_NE(case_tag(data_tag, 0), case_tag(data_tag, 1));
  EXPECT_NE(case_tag(data_tag, 0), case_tag(sync_tag, 0));
  EXPECT_NE(case_tag(wireup_tag, 7), case_tag(sync_tag, 7));
  EXPECT_EQ(case_tag(sync_tag, 5) & 0xff, sync_tag);
}

}  // namespace
}  // namespace pairperf
