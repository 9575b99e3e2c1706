#include "core/self_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/socket.h"

extern char** environ;  // NOLINT

namespace pairperf {

bool is_self_probe_child(std::string_view variable) {
  const char* v = std::getenv(std::string(variable).c_str());
  return v != nullptr && std::strcmp(v, "1") == 0;
}

void answer_self_probe(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(1);
    done += static_cast<std::size_t>(n);
  }
  ::_exit(0);
}

self_probe_answer ask_self_probe(const self_probe_question& q, std::chrono::milliseconds limit,
                                 const std::vector<std::string>& drop) {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0)
    return {"", fmt::format("pipe: {}", std::strerror(errno))};
  const unique_fd read_end(fds[0]);
  unique_fd write_end(fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const std::string own = fmt::format("{}=", q.variable);
  std::vector<std::string> env_text{own + "1"};
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    bool keep = entry.rfind(own, 0) != 0;
    for (const auto& d : drop) keep = keep && entry.rfind(d, 0) != 0;
    if (keep) env_text.emplace_back(entry);
  }
  std::vector<char*> env;
  for (auto& t : env_text) env.push_back(t.data());
  env.push_back(nullptr);
  std::string arg0(q.program);
  std::array<char*, 2> argv{arg0.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  write_end.reset();
  if (rc != 0) return {"", fmt::format("spawning {}: {}", q.what, std::strerror(rc))};
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{read_end.get(), POLLIN, 0};
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    std::array<char, 4096> buf{};
    const ssize_t n = ::read(read_end.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf.data(), static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return {"", fmt::format("{} did not finish within {:.0f} s", q.what,
                            std::chrono::duration<double>(limit).count())};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return {"", fmt::format("{} failed (its process ended abnormally)", q.what)};
  return {std::move(text), ""};
}

}  // namespace pairperf
