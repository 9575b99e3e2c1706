#include "transports/tcp/tcp_stream.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace pairperf {

int tcp_stream::progress(std::span<completion> out, int n, std::string& error,
                         bool& peer_gone) noexcept {
  const auto fail = [&](const char* what, int err) {
    peer_gone = err == 0 || err == ECONNRESET || err == EPIPE;
    error = err == 0 ? fmt::format("{}: peer closed the connection", what)
                     : fmt::format("{}: {} ({})", what, std::strerror(err), errno_name(err));
    return -1;
  };
  while (!m_sends.empty() && static_cast<std::size_t>(n) < out.size()) {
    pending_op& op = m_sends.front();
    const ssize_t r =
        ::send(m_fd.get(), op.data + op.done, op.length - op.done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      return fail("send", errno);
    }
    op.done += static_cast<std::size_t>(r);
    if (op.done < op.length) break;  // the socket buffer is full
    out[n++] = completion{op.cookie, op_kind::send};
    m_sends.pop();
  }
  while (!m_recvs.empty() && static_cast<std::size_t>(n) < out.size()) {
    pending_op& op = m_recvs.front();
    const ssize_t r = ::recv(m_fd.get(), op.data + op.done, op.length - op.done, MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      return fail("recv", errno);
    }
    if (r == 0) return fail("recv", 0);
    op.done += static_cast<std::size_t>(r);
    if (op.done < op.length) break;  // nothing more queued in the kernel right now
    out[n++] = completion{op.cookie, op_kind::recv};
    m_recvs.pop();
  }
  return n;
}

short tcp_stream::wanted_events() const noexcept {
  short events = 0;
  if (!m_sends.empty()) events |= POLLOUT;
  if (!m_recvs.empty()) events |= POLLIN;
  return events;
}

}  // namespace pairperf
