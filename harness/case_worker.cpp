#include "harness/case_worker.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <optional>

#include "core/errors.h"
#include "core/self_probe.h"
#include "core/socket.h"

namespace pairperf {
namespace {

constexpr std::size_t last_words_bytes = 2048;
int g_stage_fd = -1;  // the child's end of the report pipe; -1 outside a worker

void write_line(int fd, const std::string& line) {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Reads what is there without blocking; false at end of stream.
bool drain(int fd, std::string& into) {
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n > 0) {
      into.append(chunk.data(), static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

struct pipe_pair {
  unique_fd read, write;
};

pipe_pair make_pipe() {
  std::array<int, 2> fds{};
  if (::pipe2(fds.data(), O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

[[noreturn]] void child(const std::function<std::string()>& work, pipe_pair& report,
                        pipe_pair& errors, pid_t parent) {
  // The case dies with the process that runs the sweep (a client killed by SIGKILL must not
  // leave its case measuring, holding the server, until the case timeout).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(70);  // it died before prctl took effect
  report.read.reset();
  errors.read.reset();
  // A terminal's Ctrl-C reaches the whole process group: the sweep's process decides, and it
  // ends this worker itself (SIGKILL) after noting which case the signal cut short.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stop, nullptr);
  std::fflush(stderr);
  ::dup2(errors.write.get(), STDERR_FILENO);
  errors.write.reset();
  g_stage_fd = report.write.get();
  int code = 0;
  try {
    write_line(g_stage_fd, "R" + work());
  } catch (const std::exception& e) {
    fmt::print(stderr, "pairperf: the case worker failed: {}\n", e.what());
    code = 70;
  }
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

void report_stage(const std::string& name, std::chrono::nanoseconds bound) {
  if (g_stage_fd < 0) return;
  write_line(g_stage_fd, fmt::format("S{} {}\n", bound.count(), name));
}

void report_message(const std::string& line) {
  if (g_stage_fd < 0) return;
  write_line(g_stage_fd, "M" + line + "\n");
}

namespace {

// The supervisor's side of one worker: its two pipes read as they fill, the stage and message
// lines taken off the report as they arrive, its stderr passed through with its end kept.
class worker_watch {
 public:
  worker_watch(int report_fd, int errors_fd, std::chrono::nanoseconds grace,
               const worker_messages& on_message)
      : m_report_fd(report_fd), m_errors_fd(errors_fd), m_grace(grace), m_on_message(on_message) {}

  // Waits (at most 100 ms) for either pipe, then takes what arrived.
  void poll_pipes() {
    std::array<pollfd, 2> fds{{{m_report_fd, POLLIN, 0}, {m_errors_fd, POLLIN, 0}}};
    if (m_report_open || m_errors_open) {
      if (!m_report_open) fds[0].fd = -1;
      if (!m_errors_open) fds[1].fd = -1;
      ::poll(fds.data(), fds.size(), 100);
    }
    if (m_report_open) m_report_open = drain(m_report_fd, m_reported);
    if (m_errors_open) {
      const std::size_t before = m_err_text.size();
      m_errors_open = drain(m_errors_fd, m_err_text);
      if (m_err_text.size() > before) {  // pass it through: the user sees the library's words
        [[maybe_unused]] const auto n =
            ::write(STDERR_FILENO, m_err_text.data() + before, m_err_text.size() - before);
      }
      if (m_err_text.size() > 4 * last_words_bytes)
        m_err_text.erase(0, m_err_text.size() - last_words_bytes);
    }
    take_lines();
  }

  // The worker is gone: what is left in the pipes.
  void drain_rest() {
    if (m_report_open) drain(m_report_fd, m_reported);
    if (m_errors_open) drain(m_errors_fd, m_err_text);
    take_lines();
  }

  // How the worker ended, from its wait status: as the supervisor ended it (`ended_by`), by a
  // signal to the run, with its result, or dead.
  void judge(int status, std::optional<worker_outcome::end> ended_by,
             const std::atomic<int>* interrupted) {
    if (ended_by) {
      m_out.how = *ended_by;
    } else if (interrupted != nullptr && interrupted->load() != 0) {
      m_out.how = worker_outcome::end::interrupted;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && m_reported.rfind('R', 0) == 0) {
      m_out.how = worker_outcome::end::finished;
      m_out.output = m_reported.substr(1);
    } else {
      m_out.how = worker_outcome::end::died;
      m_out.died_how = describe_wait_status(status);
    }
  }

  // Whether the worker outlived its stage's bound and grace period.
  [[nodiscard]] bool overran() const { return m_stage_end && steady::now() > *m_stage_end; }
  [[nodiscard]] bool message_failed() const { return static_cast<bool>(m_message_failed); }

  // The outcome, with the end of its stderr; rethrows what on_message threw.
  worker_outcome finish() {
    if (m_message_failed) std::rethrow_exception(m_message_failed);
    if (m_err_text.size() > last_words_bytes)
      m_err_text.erase(0, m_err_text.size() - last_words_bytes);
    m_out.last_words = std::move(m_err_text);
    return std::move(m_out);
  }

 private:
  // Stage lines "S<ns> <name>\n" and message lines "M<text>\n"; then the result, "R<text>" up to
  // the end of the stream.
  void take_lines() {
    for (std::size_t nl; (m_reported.rfind('S', 0) == 0 || m_reported.rfind('M', 0) == 0) &&
                         (nl = m_reported.find('\n')) != std::string::npos;) {
      const char kind = m_reported[0];
      const std::string line = m_reported.substr(1, nl - 1);
      m_reported.erase(0, nl + 1);
      if (kind == 'M') {
        if (m_on_message && !m_message_failed) {
          try {
            m_on_message(line);
          } catch (...) {
            m_message_failed = std::current_exception();
          }
        }
        continue;
      }
      const auto space = line.find(' ');
      m_out.stage_bound = std::chrono::nanoseconds(std::stoll(line.substr(0, space)));
      m_out.stage = line.substr(space + 1);
      m_stage_end = steady::now() + m_out.stage_bound + m_grace;
    }
  }

  int m_report_fd, m_errors_fd;
  std::chrono::nanoseconds m_grace;
  const worker_messages& m_on_message;
  worker_outcome m_out;
  std::string m_reported, m_err_text;
  std::optional<steady::time_point> m_stage_end;
  bool m_report_open = true, m_errors_open = true;
  std::exception_ptr m_message_failed;
};

}  // namespace

worker_outcome run_in_worker(const std::function<std::string()>& work,
                             const std::atomic<int>* interrupted, std::chrono::nanoseconds grace,
                             const worker_messages& on_message) {
  pipe_pair report = make_pipe();
  pipe_pair errors = make_pipe();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) child(work, report, errors, parent);
  report.write.reset();
  errors.write.reset();
  set_nonblocking(report.read.get(), true);
  set_nonblocking(errors.read.get(), true);

  worker_watch watch(report.read.get(), errors.read.get(), grace, on_message);
  std::optional<worker_outcome::end> ended_by;
  for (;;) {
    watch.poll_pipes();
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      // Take what is left in the pipes, then judge.
      watch.drain_rest();
      watch.judge(status, ended_by, interrupted);
      break;
    }
    if (ended_by) continue;  // killed: wait for it to go
    if (watch.message_failed()) {
      ended_by = worker_outcome::end::died;
      ::kill(pid, SIGKILL);
    } else if (interrupted != nullptr && interrupted->load() != 0) {
      ended_by = worker_outcome::end::interrupted;
      ::kill(pid, SIGKILL);
    } else if (watch.overran()) {
      ended_by = worker_outcome::end::overran;
      ::kill(pid, SIGKILL);
    }
  }
  return watch.finish();
}

}  // namespace pairperf
