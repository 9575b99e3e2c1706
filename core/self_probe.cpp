#include "core/self_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "core/socket.h"

extern char** environ;  // NOLINT

namespace pairperf {

std::string signal_name(int sig) {
  const char* name = sigabbrev_np(sig);
  return fmt::format("SIG{}", name != nullptr ? name : std::to_string(sig));
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "signal " + signal_name(WTERMSIG(status));
  return fmt::format("status {}", status);
}

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

namespace {

// What the child wrote, read from both pipes until they close or the deadline passes: its answer
// on stdout, the last 2 KiB of its stderr.
struct child_output {
  std::string text;
  std::string said;
  bool timed_out = false;
};

child_output read_child(int out_fd, int err_fd, std::chrono::milliseconds limit) {
  constexpr std::size_t said_limit = 2048;
  child_output c;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::array<int, 2> fds{out_fd, err_fd};
  std::array<std::string*, 2> into{&c.text, &c.said};
  while (fds[0] >= 0 || fds[1] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::array<pollfd, 2> p{{{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}}};
    const int ready =
        left.count() > 0 ? ::poll(p.data(), p.size(), static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      c.timed_out = true;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      std::array<char, 4096> buf{};
      const ssize_t n = ::read(fds[i], buf.data(), buf.size());
      if (n > 0) into[i]->append(buf.data(), static_cast<std::size_t>(n));
      if (n == 0 || (n < 0 && errno != EINTR)) fds[i] = -1;
    }
    if (c.said.size() > 2 * said_limit) c.said.erase(0, c.said.size() - said_limit);
  }
  if (c.said.size() > said_limit) c.said.erase(0, c.said.size() - said_limit);
  while (!c.said.empty() && (c.said.back() == '\n' || c.said.back() == ' ')) c.said.pop_back();
  return c;
}

}  // namespace

std::vector<std::string> child_environment(const std::vector<std::string>& set,
                                           const std::vector<std::string>& drop) {
  std::vector<std::string> env = set;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto named = [&](const std::string& x) {
      const auto eq = x.find('=');
      return entry.rfind(eq == std::string::npos ? x : x.substr(0, eq + 1), 0) == 0;
    };
    if (std::none_of(set.begin(), set.end(), named) &&
        std::none_of(drop.begin(), drop.end(), named))
      env.emplace_back(entry);
  }
  return env;
}

self_run run_self(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                  std::chrono::milliseconds limit) {
  self_run r;
  std::array<int, 2> out_fds{};
  std::array<int, 2> err_fds{};
  if (::pipe2(out_fds.data(), O_CLOEXEC) != 0) {
    r.spawn_error = fmt::format("pipe: {}", std::strerror(errno));
    return r;
  }
  const unique_fd out_read(out_fds[0]);
  unique_fd out_write(out_fds[1]);
  if (::pipe2(err_fds.data(), O_CLOEXEC) != 0) {
    r.spawn_error = fmt::format("pipe: {}", std::strerror(errno));
    return r;
  }
  const unique_fd err_read(err_fds[0]);
  unique_fd err_write(err_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> env_text = env;
  std::vector<char*> envp;
  envp.reserve(env_text.size() + 1);
  for (auto& t : env_text) envp.push_back(t.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  argp.reserve(args.size() + 1);
  for (auto& t : args) argp.push_back(t.data());
  argp.push_back(nullptr);
  // The probe ignores a terminal's Ctrl-C (sent to the whole process group): the process that
  // asked decides what a signal means, and a probe is bounded by `limit` anyway.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &stop);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, &attr, argp.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  out_write.reset();
  err_write.reset();
  if (rc != 0) {
    r.spawn_error = std::strerror(rc);
    return r;
  }
  child_output c = read_child(out_read.get(), err_read.get(), limit);
  if (c.timed_out) ::kill(pid, SIGKILL);
  while (::waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  r.out = std::move(c.text);
  r.err = std::move(c.said);
  r.timed_out = c.timed_out;
  return r;
}

self_probe_answer ask_self_probe(const self_probe_question& q, std::chrono::milliseconds limit,
                                 const std::vector<std::string>& drop) {
  const self_run r = run_self({std::string(q.program)},
                              child_environment({fmt::format("{}=1", q.variable)}, drop), limit);
  if (!r.spawn_error.empty()) return {"", fmt::format("spawning {}: {}", q.what, r.spawn_error)};
  const std::string last_words = r.err.empty() ? std::string() : fmt::format(": {}", r.err);
  if (r.timed_out)
    return {"", fmt::format("{} did not finish within {:.0f} s{}", q.what,
                            std::chrono::duration<double>(limit).count(), last_words)};
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
    return {"", fmt::format("{} failed (its process ended abnormally: {}){}", q.what,
                            describe_wait_status(r.status), last_words)};
  return {r.out, ""};
}

}  // namespace pairperf
