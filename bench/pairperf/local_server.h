#pragma once
// `pairperf run` without a peer: a server in a separate process on 127.0.0.1, started from this
// very binary, serving one client (run) or several in turn (doctor).
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pairperf::cli {

class local_server {
 public:
  // Starts the server and waits (at most `timeout`) for it to report its port.
  // `once`: it serves one client and exits; otherwise it serves clients until destroyed.
  // `extra` are more server arguments (e.g. --gpu).
  explicit local_server(std::chrono::nanoseconds timeout, bool once = true,
                        std::vector<std::string> extra = {});
  local_server(const local_server&) = delete;
  local_server& operator=(const local_server&) = delete;
  // Waits up to 1.5 s for a --once server to exit after its client, then ends it by PID (at
  // once for a server of several clients).
  ~local_server();

  [[nodiscard]] std::uint16_t port() const noexcept { return m_port; }

 private:
  static std::uint16_t wait_for_port(int fd, std::chrono::nanoseconds timeout);
  pid_t m_pid = -1;
  bool m_once = true;
  std::uint16_t m_port = 0;
};

}  // namespace pairperf::cli
