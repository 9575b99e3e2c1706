#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "core/interfaces.h"
#include "core/socket.h"

namespace pairperf {
namespace {

using namespace std::chrono_literals;

TEST(Endpoint, ParsesHostsPortsAndIpv6) {
  auto e = parse_endpoint("10.0.0.2", 18515);
  EXPECT_EQ(e.host, "10.0.0.2");
  EXPECT_EQ(e.port, 18515);
  e = parse_endpoint("node7:9000", 1);
  EXPECT_EQ(e.host, "node7");
  EXPECT_EQ(e.port, 9000);
  e = parse_endpoint("[fe80::1]:77", 1);
  EXPECT_EQ(e.host, "fe80::1");
  EXPECT_EQ(e.port, 77);
  e = parse_endpoint("::1", 5);  // bare IPv6, default port
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 5);
  EXPECT_EQ((endpoint{"::1", 5}).to_string(), "[::1]:5");
  EXPECT_THROW(parse_endpoint("host:0", 1), usage_error);
  EXPECT_THROW(parse_endpoint("host:99999", 1), usage_error);
  EXPECT_THROW(parse_endpoint("host:abc", 1), usage_error);
  EXPECT_THROW(parse_endpoint(":80", 1), usage_error);
  EXPECT_THROW(parse_endpoint("[::1", 1), usage_error);
}

TEST(Socket, RefusedConnectionIsUnreachableAndNamed) {
  std::uint16_t port = 0;
  {
    const unique_fd l = listen_tcp("127.0.0.1", 0, where{});
    port = local_port(l.get());
  }  // closed: nothing listens there now
  try {
    connect_tcp(endpoint{"127.0.0.1", port}, connect_options{},
                where{"control connect", "127.0.0.1", ""});
    FAIL() << "expected refusal";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::unreachable);
    EXPECT_EQ(e.sys_errno(), ECONNREFUSED);
    EXPECT_NE(std::string(e.what()).find("ECONNREFUSED"), std::string::npos) << e.what();
  }
}

// A listener whose accept queue is full drops every SYN (Linux: ListenOverflows), as a lossy
// path drops them. One attempt's SYN is sent again only after 1 s (the kernel's initial RTO);
// attempts every 50 ms get through within 50 ms of the queue's room coming back, well inside a
// bound of 0.9 s that one attempt could not meet. The losing attempts are closed, never kept.
TEST(Socket, ConnectionAttemptsGetThroughWhereSynsAreDropped) {
  const unique_fd l = listen_tcp("127.0.0.1", 0, where{}, 0);
  const endpoint at{"127.0.0.1", local_port(l.get())};
  const unique_fd queued = connect_tcp(at, connect_options{}, where{});  // fills the queue
  const auto attempt = [&](std::chrono::nanoseconds every) {
    connect_options o;
    o.timeout = 900ms;
    o.attempt_every = every;
    std::thread room([&] {
      std::this_thread::sleep_for(100ms);
      unique_fd first = accept_until(l, deadline_in(1s), where{});  // room for one more
      first.reset();
    });
    try {
      unique_fd c = connect_tcp(at, o, where{"control connect", at.to_string(), ""});
      room.join();
      return c;
    } catch (...) {
      room.join();
      throw;
    }
  };
  unique_fd c = attempt(50ms);
  ASSERT_TRUE(c.valid());
  EXPECT_TRUE(has_nodelay(c.get()));
  EXPECT_EQ(::fcntl(c.get(), F_GETFL) & O_NONBLOCK, 0);
  unique_fd s = accept_until(l, deadline_in(1s), where{});
  write_all(c.get(), "ping", 4, deadline_in(1s), where{});
  char buf[8] = {};
  EXPECT_EQ(read_some(s.get(), buf, sizeof(buf), deadline_in(1s), where{}), 4U);
  // One attempt: its SYN waits for the kernel's retry at 1 s, past the bound.
  const unique_fd refill = connect_tcp(at, connect_options{}, where{});
  try {
    attempt(0ns);
    FAIL() << "one attempt connected within 0.9 s although its only SYN was dropped";
  } catch (const step_error& e) {
    EXPECT_EQ(e.sys_errno(), ETIMEDOUT) << e.what();
  }
}

TEST(Socket, ConnectsAcceptsAndMovesBytes) {
  const unique_fd l = listen_tcp("127.0.0.1", 0, where{});
  connect_options o;
  o.iface = "lo";
  unique_fd c = connect_tcp(endpoint{"127.0.0.1", local_port(l.get())}, o, where{});
  unique_fd s = accept_until(l, deadline_in(1s), where{});
  write_all(c.get(), "ping", 4, deadline_in(1s), where{});
  char buf[8] = {};
  EXPECT_EQ(read_some(s.get(), buf, sizeof(buf), deadline_in(1s), where{}), 4U);
  EXPECT_EQ(std::string(buf), "ping");
  EXPECT_EQ(local_ip(c.get()), "127.0.0.1");
  EXPECT_EQ(peer_endpoint(s.get()), local_endpoint(c.get()));
  c.reset();
  EXPECT_EQ(read_some(s.get(), buf, sizeof(buf), deadline_in(1s), where{}), 0U);  // EOF
}

// Control messages are request/response: without TCP_NODELAY on both ends a reply written while
// the last is unacknowledged waits for the delayed ACK (~40 ms a phase; it once cost every case
// of a sweep 80 ms when the server's accept path lost it).
TEST(Socket, EveryControlSocketHasNoDelay) {
  const unique_fd l = listen_tcp("127.0.0.1", 0, where{});
  set_nonblocking(l.get(), true);         // as the server's listener
  EXPECT_FALSE(accept_ready(l).valid());  // nothing waiting: EAGAIN, not a block
  unique_fd c1 =
      connect_tcp(endpoint{"127.0.0.1", local_port(l.get())}, connect_options{}, where{});
  unique_fd s1 = accept_until(l, deadline_in(1s), where{});
  unique_fd c2 =
      connect_tcp(endpoint{"127.0.0.1", local_port(l.get())}, connect_options{}, where{});
  unique_fd s2;
  for (int i = 0; i < 1000 && !s2.valid(); ++i) {
    s2 = accept_ready(l);
    if (!s2.valid()) std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(s2.valid());
  EXPECT_TRUE(has_nodelay(c1.get()));
  EXPECT_TRUE(has_nodelay(s1.get()));
  EXPECT_TRUE(has_nodelay(c2.get()));
  EXPECT_TRUE(has_nodelay(s2.get()));
  EXPECT_NE(::fcntl(s2.get(), F_GETFL) & O_NONBLOCK, 0);
  const unique_fd plain(::socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_FALSE(has_nodelay(plain.get()));
}

TEST(Socket, AcceptTimesOut) {
  const unique_fd l = listen_tcp("127.0.0.1", 0, where{});
  const auto start = steady::now();
  try {
    accept_until(l, deadline_in(150ms), where{"data accept", "", ""});
    FAIL();
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::timeout);
  }
  EXPECT_LT(steady::now() - start, 1s);
}

TEST(Socket, BindingToAMissingInterfaceIsAClearError) {
  connect_options o;
  o.iface = "nosuchif0";
  try {
    connect_tcp(endpoint{"127.0.0.1", 9}, o, where{"data connect", "127.0.0.1:9", "nosuchif0"});
    FAIL();
  } catch (const step_error& e) {
    EXPECT_NE(std::string(e.what()).find("no interface named 'nosuchif0'"), std::string::npos)
        << e.what();
  }
}

TEST(Interfaces, LoopbackIsFoundAndSubnetsMatch) {
  EXPECT_EQ(interface_of_address("127.0.0.1"), "lo");
  const auto lo = find_interface("lo");
  ASSERT_TRUE(lo.has_value());
  EXPECT_TRUE(lo->loopback);
  EXPECT_GT(lo->mtu, 0U);
  EXPECT_TRUE(in_subnet({AF_INET, "10.0.1.1", 24}, "10.0.1.200"));
  EXPECT_FALSE(in_subnet({AF_INET, "10.0.1.1", 24}, "10.0.2.1"));
  EXPECT_TRUE(in_subnet({AF_INET, "10.0.1.1", 20}, "10.0.14.9"));
  EXPECT_FALSE(in_subnet({AF_INET, "10.0.1.1", 24}, "fd00::1"));
  EXPECT_TRUE(in_subnet({AF_INET6, "fd00:1::1", 64}, "fd00:1::99"));
  EXPECT_FALSE(in_subnet({AF_INET6, "fd00:1::1", 64}, "fd00:2::1"));
  EXPECT_FALSE(in_subnet({AF_INET, "10.0.1.1", 24}, "not-an-address"));
}

}  // namespace
}  // namespace pairperf
