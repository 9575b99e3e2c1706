// The gloo transport: devices chosen from the environment as torch.distributed chooses them, two
// transports in one process connected through gloo's own pairs over loopback, messages both ways
// through post/poll, gloo's own allreduce over the same connected pair, and the errors gloo gives.
#include <gloo/allreduce.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <future>
#include <thread>

#include "core/errors.h"
#include "transports/gloo/gloo_device.h"
#include "transports/gloo/gloo_transport.h"

namespace pairperf {
namespace {

using gloo_env::choose;
using gloo_env::torch_split;

TEST(GlooDevices, GlooSocketIfnameIsSplitAsTorchSplitsIt) {
  EXPECT_EQ(torch_split("eth0,ib0"), (std::vector<std::string>{"eth0", "ib0"}));
  EXPECT_EQ(torch_split("eth0,"), (std::vector<std::string>{"eth0"}));
  EXPECT_EQ(torch_split(",eth0"), (std::vector<std::string>{"", "eth0"}));
  EXPECT_EQ(torch_split("eth0 , ib0"), (std::vector<std::string>{"eth0 ", " ib0"}));
}

TEST(GlooDevices, TheVariableWinsWhenLongerThanOneCharacter) {
  const auto c = choose(std::string("eth0,ib0"), "localhost", "");
  ASSERT_EQ(c.devices.size(), 2U);
  EXPECT_EQ(c.devices[0].iface, "eth0");
  EXPECT_EQ(c.devices[1].iface, "ib0");
  EXPECT_EQ(c.source, "GLOO_SOCKET_IFNAME=eth0,ib0");
  EXPECT_FALSE(c.loopback_fallback);
}

TEST(GlooDevices, OneCharacterIsIgnoredAndTheHostnameUsed) {
  // "localhost" resolves to 127.0.0.1, which binds everywhere.
  const auto c = choose(std::string("e"), "localhost", "");
  ASSERT_EQ(c.devices.size(), 1U);
  EXPECT_EQ(c.devices[0].hostname, "localhost");
  EXPECT_EQ(c.ignored_ifname, "e");
  EXPECT_FALSE(c.loopback_fallback);
}

TEST(GlooDevices, AnUnresolvableOrForeignHostnameFallsBackToLoopback) {
  // RFC 6761: .invalid never resolves. 192.0.2.1 (TEST-NET-1) resolves but cannot be bound here.
  for (const char* host : {"pairperf-test.invalid", "192.0.2.1"}) {
    const auto c = choose(std::nullopt, host, "");
    ASSERT_EQ(c.devices.size(), 1U) << host;
    EXPECT_EQ(c.devices[0].hostname, "127.0.0.1") << host;
    EXPECT_TRUE(c.loopback_fallback) << host;
    EXPECT_NE(c.source.find("Using the loopback address as fallback"), std::string::npos);
  }
}

TEST(GlooDevices, AClientsIfacePinsItsDevice) {
  const auto c = choose(std::string("eth0,ib0"), "localhost", "lo");
  ASSERT_EQ(c.devices.size(), 1U);
  EXPECT_EQ(c.devices[0].iface, "lo");
}

transport_params params_for(side s) {
  transport_params p;
  p.side = s;
  p.test.transport = "gloo";
  p.test.test = "gloo_lat";
  p.peer_host = "127.0.0.1";
  p.test.iface = s == side::client ? "lo" : "";
  p.connect_timeout = std::chrono::seconds(5);
  return p;
}

// Both sides built on the calling thread (gloo makes the pair's listening socket then), then
// connected at the same time, as the harness does.
struct connected_pair {
  connected_pair()
      : owned_client(std::make_unique<gloo_transport>(params_for(side::client))),
        owned_server(server_on_loopback()),
        client(*owned_client),
        server(*owned_server) {
    const auto ca = client.local_address();
    const auto sa = server.local_address();
    client.check_peer_address(sa);
    server.check_peer_address(ca);
    auto s = std::async(std::launch::async, [&] { server.connect(ca); });
    client.connect(sa);
    s.get();
  }
  // The server side follows its environment: GLOO_SOCKET_IFNAME=lo for this in-process test.
  static std::unique_ptr<gloo_transport> server_on_loopback() {
    ::setenv("GLOO_SOCKET_IFNAME", "lo", 1);
    auto t = std::make_unique<gloo_transport>(params_for(side::server));
    ::unsetenv("GLOO_SOCKET_IFNAME");
    return t;
  }
  std::unique_ptr<gloo_transport> owned_client, owned_server;
  gloo_transport& client;
  gloo_transport& server;
};

// Polls until `n` completions came or 5 s passed.
std::vector<completion> wait_for(gloo_transport& t, std::size_t n) {
  std::vector<completion> got;
  std::array<completion, 8> out{};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (got.size() < n && std::chrono::steady_clock::now() < until) {
    const int k = t.poll(out);
    if (k < 0) ADD_FAILURE() << "poll failed: " << t.last_error();
    for (int i = 0; i < k; ++i) got.push_back(out[i]);
  }
  return got;
}

TEST(GlooTransport, PingPongAndStreamsThroughGloosPairs) {
  connected_pair p;
  std::array<std::byte, 4096> cs{}, cr{}, ss{}, sr{};
  (void)p.client.register_memory(cs.data(), cs.size(), memory_type::host);
  (void)p.client.register_memory(cr.data(), cr.size(), memory_type::host);
  (void)p.server.register_memory(ss.data(), ss.size(), memory_type::host);
  (void)p.server.register_memory(sr.data(), sr.size(), memory_type::host);
  for (std::uint64_t i = 0; i < 50; ++i) {
    cs[0] = static_cast<std::byte>(i);
    ASSERT_EQ(p.server.post(op{op_kind::recv, op_channel::data, sr.data(), 64, 100 + i}), 0);
    ASSERT_EQ(p.client.post(op{op_kind::send, op_channel::data, cs.data(), 64, i}), 0);
    ASSERT_EQ(p.client.post(op{op_kind::recv, op_channel::data, cr.data(), 64, 200 + i}), 0);
    const auto at_server = wait_for(p.server, 1);
    ASSERT_EQ(at_server.size(), 1U) << "round " << i;
    EXPECT_EQ(at_server[0].cookie, 100 + i);
    EXPECT_EQ(sr[0], static_cast<std::byte>(i));
    ss[0] = static_cast<std::byte>(i + 1);
    ASSERT_EQ(p.server.post(op{op_kind::send, op_channel::data, ss.data(), 64, 300 + i}), 0);
    const auto at_client = wait_for(p.client, 2);
    ASSERT_EQ(at_client.size(), 2U) << "round " << i;
    EXPECT_EQ(cr[0], static_cast<std::byte>(i + 1));
    ASSERT_EQ(wait_for(p.server, 1).size(), 1U);
  }
  // A window of sends into slices of one buffer, received in posting order, then a sync message
  // posted after them arrives after them.
  for (std::uint64_t i = 0; i < 8; ++i) {
    ASSERT_EQ(p.server.post(op{op_kind::recv, op_channel::data, sr.data() + 512 * i, 512, i}), 0);
    cs[512 * i] = static_cast<std::byte>(0x40 + i);
  }
  ASSERT_EQ(p.server.post(op{op_kind::recv, op_channel::sync, ss.data(), 8, 99}), 0);
  for (std::uint64_t i = 0; i < 8; ++i)
    ASSERT_EQ(p.client.post(op{op_kind::send, op_channel::data, cs.data() + 512 * i, 512, i}), 0);
  cr[0] = std::byte{0x7f};
  ASSERT_EQ(p.client.post(op{op_kind::send, op_channel::sync, cr.data(), 8, 99}), 0);
  const auto got = wait_for(p.server, 9);
  ASSERT_EQ(got.size(), 9U);
  for (std::uint64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i].cookie, i);
    EXPECT_EQ(sr[512 * i], static_cast<std::byte>(0x40 + i));
  }
  EXPECT_EQ(got[8].cookie, 99U);
  EXPECT_EQ(ss[0], std::byte{0x7f});
  EXPECT_EQ(wait_for(p.client, 9).size(), 9U);

  const provenance d = p.client.describe();
  ASSERT_EQ(d.lanes.size(), 1U);
  EXPECT_EQ(d.lanes[0].transport, "tcp");
  EXPECT_EQ(d.lanes[0].device, "lo");
  EXPECT_NE(d.client.at("devices")[0].at("address").get<std::string>().find("127.0.0.1"),
            std::string::npos);
  EXPECT_NE(d.protocol.find("--iface lo"), std::string::npos) << d.protocol;
}

TEST(GlooTransport, GloosAllreduceRunsOverTheConnectedPair) {
  connected_pair p;
  std::array<float, 1024> a{}, b{};
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 1000.0F;
  }
  const auto reduce = [](gloo::transport::UnboundBuffer*, std::array<float, 1024>& data,
                         const std::shared_ptr<gloo::Context>& context) {
    gloo::AllreduceOptions opts(context);
    opts.setOutput(data.data(), data.size());
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    gloo::allreduce(opts);
  };
  auto server = std::async(std::launch::async,
                           [&] { reduce(nullptr, b, p.server.collective_context()); });
  reduce(nullptr, a, p.client.collective_context());
  server.get();
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i], static_cast<float>(i) + 1000.0F) << i;
    ASSERT_EQ(b[i], a[i]) << i;
  }
}

TEST(GlooTransport, AnInterfaceWithoutAnAddressIsGloosOwnError) {
  auto p = params_for(side::client);
  p.test.iface = "pairperf-none0";
  try {
    gloo_transport t(p);
    FAIL() << "a device on a missing interface was made";
  } catch (const step_error& e) {
    EXPECT_NE(std::string(e.what()).find("pairperf-none0"), std::string::npos) << e.what();
  }
}

TEST(GlooTransport, APeerWithAnotherNumberOfDevicesIsRefusedBeforeConnecting) {
  gloo_transport client(params_for(side::client));
  const std::string two =
      R"({"devices":[{"address":"[127.0.0.1]:1","bytes":"00"},{"address":"[127.0.0.1]:2","bytes":"00"}],"source":"GLOO_SOCKET_IFNAME=lo,lo"})";
  const std::span<const std::byte> peer(reinterpret_cast<const std::byte*>(two.data()), two.size());
  EXPECT_NO_THROW(client.check_peer_address(peer));
  try {
    client.connect(peer);
    FAIL() << "connected to a peer with two devices";
  } catch (const step_error& e) {
    EXPECT_NE(std::string(e.what()).find("the peer 2"), std::string::npos) << e.what();
  }
  const std::string bad = R"({"devices":[{"address":"x","bytes":"zz"}],"source":"s"})";
  EXPECT_THROW(client.check_peer_address(std::span<const std::byte>(
                   reinterpret_cast<const std::byte*>(bad.data()), bad.size())),
               std::invalid_argument);
}

}  // namespace
}  // namespace pairperf
