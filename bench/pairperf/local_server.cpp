#include "bench/pairperf/local_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/socket.h"

namespace pairperf::cli {
namespace {

bool reap_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto end = steady::now() + limit;
  while (steady::now() < end) {
    const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

local_server::local_server(std::chrono::nanoseconds timeout, bool once,
                           std::vector<std::string> extra)
    : m_once(once) {
  std::vector<std::string> words{
      "pairperf",   "server", "--listen", "127.0.0.1",      "--port", "0",
      "--ready-fd", "3",      "--quiet",  "--timeout-idle", "30s"};
  if (once) words.emplace_back("--once");
  words.insert(words.end(), extra.begin(), extra.end());
  std::vector<char*> args;
  for (auto& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  std::array<int, 2> pipe_fds{};
  if (::pipe2(pipe_fds.data(), O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  unique_fd read_end(pipe_fds[0]);
  unique_fd write_end(pipe_fds[1]);
  m_pid = ::fork();
  if (m_pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (m_pid == 0) {
    // Child: fd 3 is the ready pipe (dup2 clears close-on-exec); run this same binary.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the client that started us
    // Out of the client's process group: a terminal's Ctrl-C reaches the client alone, which
    // ends its case and then this server (the destructor), not a server that vanished mid-case.
    ::setpgid(0, 0);
    ::dup2(write_end.get(), 3);
    ::execv("/proc/self/exe", args.data());
    ::_exit(127);
  }
  write_end.reset();
  try {
    m_port = wait_for_port(read_end.get(), timeout);
  } catch (...) {
    ::kill(m_pid, SIGKILL);
    reap_within(m_pid, std::chrono::milliseconds(1000));
    throw;
  }
}

std::uint16_t local_server::wait_for_port(int fd, std::chrono::nanoseconds timeout) {
  std::string text;
  const deadline_t deadline = deadline_in(timeout);
  std::array<char, 16> chunk{};
  const where place{"local server start", "127.0.0.1", "lo"};
  while (text.find('\n') == std::string::npos) {
    const std::size_t n = read_some(fd, chunk.data(), chunk.size(), deadline, place);
    if (n == 0) break;
    text.append(chunk.data(), n);
  }
  unsigned port = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || port == 0 || port > 65535)
    throw step_error(error_kind::error, place, "the local server did not report its port");
  return static_cast<std::uint16_t>(port);
}

local_server::~local_server() {
  if (m_pid <= 0) return;
  if (m_once && reap_within(m_pid, std::chrono::milliseconds(1500))) return;
  ::kill(m_pid, SIGTERM);
  if (reap_within(m_pid, std::chrono::milliseconds(1000))) return;
  ::kill(m_pid, SIGKILL);
  reap_within(m_pid, std::chrono::milliseconds(1000));
}

}  // namespace pairperf::cli
