#pragma once
// One TCP connection of the tcp transport with its queues of posted sends and receives. Messages
// have no header: both sides agree on sizes and order, so a receive of n bytes takes exactly the
// next n bytes of the stream.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/socket.h"
#include "transports/fifo.h"
#include "transports/transport.h"

namespace pairperf {

struct pending_op {
  std::byte* data = nullptr;
  std::size_t length = 0;
  std::size_t done = 0;
  std::uint64_t cookie = 0;
};

class tcp_stream {
 public:
  explicit tcp_stream(unique_fd fd) : m_fd(std::move(fd)) {}

  void push(op_kind kind, const pending_op& item) {
    (kind == op_kind::send ? m_sends : m_recvs).push(item);
  }

  // Moves bytes without blocking and writes finished operations to out[n...]; returns the new
  // count, or -1 with `error` set (and `peer_gone` when the peer closed or reset).
  int progress(std::span<completion> out, int n, std::string& error, bool& peer_gone) noexcept;

  [[nodiscard]] int fd() const noexcept { return m_fd.get(); }
  // poll(2) events this stream waits for; 0 when it has nothing pending.
  [[nodiscard]] short wanted_events() const noexcept;

 private:
  unique_fd m_fd;
  fifo<pending_op> m_sends;
  fifo<pending_op> m_recvs;
};

}  // namespace pairperf
