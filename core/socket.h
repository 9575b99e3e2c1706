#pragma once
// Sockets with deadlines. Every blocking call here waits at most until its deadline and throws a
// step_error naming the step, the peer and the interface when it fails.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.h"

namespace pairperf {

using steady = std::chrono::steady_clock;
using deadline_t = steady::time_point;

inline deadline_t deadline_in(std::chrono::nanoseconds d) { return steady::now() + d; }

// Owns a file descriptor.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : m_fd(fd) {}
  unique_fd(unique_fd&& other) noexcept : m_fd(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  [[nodiscard]] int get() const noexcept { return m_fd; }
  [[nodiscard]] bool valid() const noexcept { return m_fd >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int m_fd = -1;
};

// host:port, with IPv6 hosts in brackets when formatted.
struct endpoint {
  std::string host;
  std::uint16_t port = 0;
  [[nodiscard]] std::string to_string() const;
};

// "host", "host:port", "[v6]:port". Throws usage_error.
endpoint parse_endpoint(std::string_view text, std::uint16_t default_port);

struct connect_options {
  std::string iface;  // bind to this interface (SO_BINDTODEVICE and its address); "" = route
  std::string source_address;  // bind to this local address; "" = any (or the iface's)
  std::chrono::nanoseconds timeout = std::chrono::seconds(3);
  // Zero: one attempt, its SYN retried by the kernel (after 1 s, then 2 s more). Else a new
  // attempt this often within `timeout` while the earlier ones stay pending, the first to connect
  // kept (RFC 8305's connection attempt delay): on a path that drops 30% of packets a handshake
  // fails 1 time in 2, and one attempt's 3 SYNs within 4 s all fail 1 time in 8; an attempt every
  // 0.5 s makes it 1 in 200. Only where the peer takes any of them (a control connection: the
  // server serves whichever arrives; never a data connection the server accepts once).
  std::chrono::nanoseconds attempt_every{0};
};

// Connects a TCP socket; the returned socket is blocking. Failures to reach the peer throw
// step_error with kind unreachable (ENETUNREACH, EHOSTUNREACH, ECONNREFUSED, timeout).
unique_fd connect_tcp(const endpoint& peer, const connect_options& options, const where& place);

// A listening TCP socket on host:port (port 0 = ephemeral; host "" = all IPv4 and IPv6), with
// room for `backlog` connections not yet accepted.
unique_fd listen_tcp(const std::string& host, std::uint16_t port, const where& place,
                     int backlog = 16);

// Waits for one connection until the deadline; throws step_error(timeout) when none came.
unique_fd accept_until(const unique_fd& listener, deadline_t deadline, const where& place);

// Takes one connection a non-blocking listener has ready, non-blocking itself, with TCP_NODELAY (as
// every control socket: a reply written while the last is unacknowledged would otherwise wait ~40
// ms for the peer's delayed ACK, on every phase of every case). Invalid when none is ready (EAGAIN)
// or accept failed transiently; the caller's poll says when to try again.
unique_fd accept_ready(const unique_fd& listener);

// Whether TCP_NODELAY is set on a socket.
bool has_nodelay(int fd);

// Writes every byte or throws (timeout, closed, error).
void write_all(int fd, const void* data, std::size_t len, deadline_t deadline, const where& place);

// Reads at least one byte, at most len; returns 0 when the peer closed. Throws on timeout.
std::size_t read_some(int fd, void* data, std::size_t len, deadline_t deadline, const where& place);

// Numeric "ip:port" of either end of a connected socket; numeric ip alone with address_only.
std::string local_endpoint(int fd);
std::string peer_endpoint(int fd);
std::string local_ip(int fd);
std::string peer_ip(int fd);
std::uint16_t local_port(int fd);

void set_nonblocking(int fd, bool on);

}  // namespace pairperf
