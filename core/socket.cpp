#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <vector>

#include "core/interfaces.h"

namespace pairperf {
namespace {

int remaining_ms(deadline_t deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
  // Round up so that a sub-millisecond remainder still waits instead of spinning.
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count() + 1, 60'000));
}

// How long a wait for input polls without sleeping before it sleeps in poll(2). The control
// channel's replies mostly come within this (a peer's reply to `run`, its session built for a
// case): waking a process that slept costs tens of microseconds on a VM, several times per case
// of a sweep, and the spin costs at most this much CPU per wait.
constexpr auto input_spin = std::chrono::microseconds(200);

// Waits for `events` on fd until the deadline; returns false on timeout.
bool wait_for(int fd, short events, deadline_t deadline, const where& place) {
  if (events == POLLIN) {
    const deadline_t spin_end = std::min(deadline, steady::now() + input_spin);
    do {
      pollfd p{fd, events, 0};
      if (::poll(&p, 1, 0) > 0) return true;
    } while (steady::now() < spin_end);
  }
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (steady::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) throw step_error(error_kind::error, place, std::strerror(errno), errno);
  }
}

std::string format_sockaddr(const sockaddr_storage& ss, bool with_port) {
  std::array<char, INET6_ADDRSTRLEN> buf{};
  std::uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, buf.data(), buf.size());
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    // An IPv4 peer on a dual-stack socket shows as ::ffff:a.b.c.d; report the IPv4 form.
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], buf.data(), buf.size());
    } else {
      inet_ntop(AF_INET6, &in6->sin6_addr, buf.data(), buf.size());
    }
    port = ntohs(in6->sin6_port);
  } else {
    return "?";
  }
  if (!with_port) return buf.data();
  return endpoint{buf.data(), port}.to_string();
}

struct addrinfo_deleter {
  void operator()(addrinfo* ai) const noexcept { freeaddrinfo(ai); }
};
using addrinfo_ptr = std::unique_ptr<addrinfo, addrinfo_deleter>;

addrinfo_ptr resolve(const std::string& host, std::uint16_t port, bool passive,
                     const where& place) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* raw = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &raw);
  if (rc != 0) {
    throw step_error(error_kind::unreachable, place,
                     fmt::format("cannot resolve '{}': {}", host, gai_strerror(rc)));
  }
  return addrinfo_ptr(raw);
}

// A socket for one resolved address; invalid (with last_err set) when the kernel refuses.
unique_fd socket_for(const addrinfo* ai, int& last_err) {
  unique_fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
  if (!fd.valid()) last_err = errno;
  return fd;
}

// Control messages are small request/response frames: Nagle's algorithm with delayed ACKs would
// add ~40 ms to every exchange.
void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool is_unreachable(int err) {
  return err == ENETUNREACH || err == EHOSTUNREACH || err == ECONNREFUSED || err == ETIMEDOUT ||
         err == EADDRNOTAVAIL || err == ENONET;
}

// Binds a socket to the interface and (if it has one of the right family) its address.
void bind_source(int fd, int family, const connect_options& options, const where& place) {
  std::string source = options.source_address;
  if (!options.iface.empty()) {
    const auto info = find_interface(options.iface);
    if (!info)
      throw step_error(error_kind::error, place,
                       fmt::format("no interface named '{}'", options.iface));
    if (::setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, options.iface.c_str(),
                     static_cast<socklen_t>(options.iface.size())) != 0) {
      // Without CAP_NET_RAW on old kernels: binding the source address is the best we can do.
      if (errno != EPERM)
        throw step_error(error_kind::error, place,
                         fmt::format("SO_BINDTODEVICE: {}", std::strerror(errno)), errno);
    }
    if (source.empty()) {
      for (const auto& a : info->addresses) {
        if (a.family == family && a.address.rfind("fe80", 0) != 0) {
          source = a.address;
          break;
        }
      }
    }
  }
  if (source.empty()) return;
  auto ai = resolve(source, 0, true, place);
  for (const addrinfo* it = ai.get(); it != nullptr; it = it->ai_next) {
    if (it->ai_family != family) continue;
    if (::bind(fd, it->ai_addr, it->ai_addrlen) == 0) return;
    throw step_error(error_kind::unreachable, place,
                     fmt::format("bind to {}: {}", source, std::strerror(errno)), errno);
  }
}

}  // namespace

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) {
    reset();
    m_fd = other.release();
  }
  return *this;
}

int unique_fd::release() noexcept {
  const int fd = m_fd;
  m_fd = -1;
  return fd;
}

void unique_fd::reset() noexcept {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = -1;
}

std::string endpoint::to_string() const {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

endpoint parse_endpoint(std::string_view text, std::uint16_t default_port) {
  endpoint ep{std::string(text), default_port};
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos)
      throw usage_error(fmt::format("invalid address '{}': missing ']'", text));
    ep.host = std::string(text.substr(1, close - 1));
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw usage_error(fmt::format("invalid address '{}'", text));
      port_text = text.substr(close + 2);
    }
  } else if (const auto colon = text.find(':');
             colon != std::string_view::npos &&
             text.find(':', colon + 1) == std::string_view::npos) {
    ep.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
  }
  if (!port_text.empty() || (text.size() > 0 && text.back() == ':')) {
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value == 0 ||
        value > 65535) {
      throw usage_error(fmt::format("invalid port in '{}': expected 1-65535", text));
    }
    ep.port = static_cast<std::uint16_t>(value);
  }
  if (ep.host.empty()) throw usage_error(fmt::format("invalid address '{}': no host", text));
  return ep;
}

namespace {

// Connection attempts to one address until the deadline (connect_options::attempt_every): the
// first that connects, or invalid with `last_err` (ETIMEDOUT when none answered in time; a
// refusal or an unreachable network ends them at once: another SYN would get the same answer).
unique_fd connect_attempts(const addrinfo* it, const connect_options& options, deadline_t deadline,
                           const where& place, int& last_err) {
  constexpr std::size_t most_pending = 16;
  std::vector<unique_fd> pending;
  deadline_t next_attempt = steady::now();
  for (;;) {
    const deadline_t now = steady::now();
    if (now >= deadline) {
      last_err = ETIMEDOUT;
      return {};
    }
    if (now >= next_attempt) {
      next_attempt = options.attempt_every > std::chrono::nanoseconds::zero()
                         ? now + options.attempt_every
                         : deadline;
      bool started = false;
      unique_fd fd = socket_for(it, last_err);
      if (fd.valid()) {
        bind_source(fd.get(), it->ai_family, options, place);
        set_nonblocking(fd.get(), true);
        if (::connect(fd.get(), it->ai_addr, it->ai_addrlen) == 0) return fd;
        if (errno == EINPROGRESS) {
          pending.push_back(std::move(fd));
          started = true;
          if (pending.size() == most_pending) next_attempt = deadline;
        } else {
          last_err = errno;
        }
      }
      // A later attempt that cannot start (no descriptor, no port left) leaves the earlier ones
      // to answer.
      if (!started) {
        if (pending.empty()) return {};
        next_attempt = deadline;
      }
    }
    std::vector<pollfd> polled;
    for (const auto& fd : pending) polled.push_back(pollfd{fd.get(), POLLOUT, 0});
    const int rc =
        ::poll(polled.data(), polled.size(), remaining_ms(std::min(deadline, next_attempt)));
    if (rc < 0 && errno != EINTR)
      throw step_error(error_kind::error, place, std::strerror(errno), errno);
    if (rc <= 0) continue;
    for (std::size_t i = 0; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(polled[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) return std::move(pending[i]);  // the others close as `pending` goes
      last_err = err;
      return {};
    }
  }
}

}  // namespace

unique_fd connect_tcp(const endpoint& peer, const connect_options& options, const where& place) {
  const deadline_t deadline = deadline_in(options.timeout);
  auto ai = resolve(peer.host, peer.port, false, place);
  int last_err = 0;
  for (const addrinfo* it = ai.get(); it != nullptr; it = it->ai_next) {
    unique_fd fd = connect_attempts(it, options, deadline, place, last_err);
    if (!fd.valid()) {
      if (last_err != ETIMEDOUT) continue;
      throw step_error(error_kind::unreachable, place,
                       fmt::format("no answer within {:.1f} s (timeout)",
                                   std::chrono::duration<double>(options.timeout).count()),
                       ETIMEDOUT);
    }
    set_nonblocking(fd.get(), false);
    set_nodelay(fd.get());
    return fd;
  }
  throw step_error(is_unreachable(last_err) ? error_kind::unreachable : error_kind::error, place,
                   fmt::format("{} ({})", std::strerror(last_err), errno_name(last_err)), last_err);
}

unique_fd listen_tcp(const std::string& host, std::uint16_t port, const where& place, int backlog) {
  auto ai = resolve(host.empty() ? "::" : host, port, true, place);
  int last_err = 0;
  for (const addrinfo* it = ai.get(); it != nullptr; it = it->ai_next) {
    unique_fd fd = socket_for(it, last_err);
    if (!fd.valid()) continue;
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (it->ai_family == AF_INET6 && host.empty()) {
      const int zero = 0;  // dual-stack: the wildcard also takes IPv4
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (::bind(fd.get(), it->ai_addr, it->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last_err = errno;
      continue;
    }
    return fd;
  }
  throw step_error(
      error_kind::error, place,
      fmt::format("cannot listen: {} ({})", std::strerror(last_err), errno_name(last_err)),
      last_err);
}

unique_fd accept_until(const unique_fd& listener, deadline_t deadline, const where& place) {
  for (;;) {
    if (!wait_for(listener.get(), POLLIN, deadline, place)) {
      throw step_error(error_kind::timeout, place, "no connection arrived before the timeout",
                       ETIMEDOUT);
    }
    const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      return unique_fd(fd);
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      throw step_error(error_kind::error, place, fmt::format("accept: {}", std::strerror(errno)),
                       errno);
    }
  }
}

unique_fd accept_ready(const unique_fd& listener) {
  const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd >= 0) set_nodelay(fd);
  return unique_fd(fd);
}

bool has_nodelay(int fd) {
  int on = 0;
  socklen_t len = sizeof(on);
  return ::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 && on != 0;
}

void write_all(int fd, const void* data, std::size_t len, deadline_t deadline, const where& place) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, deadline, place))
        throw step_error(error_kind::timeout, place, "send timed out", ETIMEDOUT);
      continue;
    }
    const int err = errno;
    throw step_error(err == EPIPE || err == ECONNRESET ? error_kind::closed : error_kind::error,
                     place, fmt::format("send: {} ({})", std::strerror(err), errno_name(err)), err);
  }
}

std::size_t read_some(int fd, void* data, std::size_t len, deadline_t deadline,
                      const where& place) {
  for (;;) {
    if (!wait_for(fd, POLLIN, deadline, place))
      throw step_error(error_kind::timeout, place, "no reply before the timeout", ETIMEDOUT);
    const ssize_t n = ::read(fd, data, len);  // read(), not recv(): pipes come here too
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    const int err = errno;
    throw step_error(err == ECONNRESET ? error_kind::closed : error_kind::error, place,
                     fmt::format("read: {} ({})", std::strerror(err), errno_name(err)), err);
  }
}

namespace {
std::string name_of(int fd, bool peer, bool with_port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  return rc == 0 ? format_sockaddr(ss, with_port) : std::string("?");
}
}  // namespace

std::string local_endpoint(int fd) { return name_of(fd, false, true); }
std::string peer_endpoint(int fd) { return name_of(fd, true, true); }
std::string local_ip(int fd) { return name_of(fd, false, false); }
std::string peer_ip(int fd) { return name_of(fd, true, false); }

std::uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_port);
}

void set_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

}  // namespace pairperf
