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
  std::array<int, 2> out_fds{};
  std::array<int, 2> err_fds{};
  if (::pipe2(out_fds.data(), O_CLOEXEC) != 0)
    return {"", fmt::format("pipe: {}", std::strerror(errno))};
  const unique_fd out_read(out_fds[0]);
  unique_fd out_write(out_fds[1]);
  if (::pipe2(err_fds.data(), O_CLOEXEC) != 0)
    return {"", fmt::format("pipe: {}", std::strerror(errno))};
  const unique_fd err_read(err_fds[0]);
  unique_fd err_write(err_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
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
  out_write.reset();
  err_write.reset();
  if (rc != 0) return {"", fmt::format("spawning {}: {}", q.what, std::strerror(rc))};
  // Its answer on stdout; its last words on stderr, kept for the error when it fails (a library
  // that aborts, a sanitizer's report).
  std::string text;
  std::string said;
  constexpr std::size_t said_limit = 2048;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  bool out_open = true;
  bool err_open = true;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    std::array<pollfd, 2> p{{{out_open ? out_read.get() : -1, POLLIN, 0},
                             {err_open ? err_read.get() : -1, POLLIN, 0}}};
    const int ready = ::poll(p.data(), p.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out = true;
      break;
    }
    std::array<char, 4096> buf{};
    if (out_open && p[0].revents != 0) {
      const ssize_t n = ::read(out_read.get(), buf.data(), buf.size());
      if (n > 0) text.append(buf.data(), static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EINTR)) out_open = false;
    }
    if (err_open && p[1].revents != 0) {
      const ssize_t n = ::read(err_read.get(), buf.data(), buf.size());
      if (n > 0) {
        said.append(buf.data(), static_cast<std::size_t>(n));
        if (said.size() > 2 * said_limit) said.erase(0, said.size() - said_limit);
      }
      if (n == 0 || (n < 0 && errno != EINTR)) err_open = false;
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (said.size() > said_limit) said.erase(0, said.size() - said_limit);
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  const std::string last_words = said.empty() ? std::string() : fmt::format(": {}", said);
  if (timed_out)
    return {"", fmt::format("{} did not finish within {:.0f} s{}", q.what,
                            std::chrono::duration<double>(limit).count(), last_words)};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how =
        WIFEXITED(status) ? fmt::format("exit {}", WEXITSTATUS(status))
        : WIFSIGNALED(status)
            ? fmt::format("signal {}", sigabbrev_np(WTERMSIG(status)) != nullptr
                                           ? std::string("SIG") + sigabbrev_np(WTERMSIG(status))
                                           : std::to_string(WTERMSIG(status)))
            : fmt::format("status {}", status);
    return {"", fmt::format("{} failed (its process ended abnormally: {}){}", q.what, how,
                            last_words)};
  }
  return {std::move(text), ""};
}

}  // namespace pairperf
