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

  worker_outcome out;
  std::string reported, err_text;
  std::optional<steady::time_point> stage_end;
  bool report_open = true, errors_open = true;
  std::optional<worker_outcome::end> ended_by;
  std::exception_ptr message_failed;
  // Stage lines "S<ns> <name>\n" and message lines "M<text>\n"; then the result, "R<text>" up to
  // the end of the stream.
  const auto take_lines = [&] {
    for (std::size_t nl; (reported.rfind('S', 0) == 0 || reported.rfind('M', 0) == 0) &&
                         (nl = reported.find('\n')) != std::string::npos;) {
      const char kind = reported[0];
      const std::string line = reported.substr(1, nl - 1);
      reported.erase(0, nl + 1);
      if (kind == 'M') {
        if (on_message && !message_failed) {
          try {
            on_message(line);
          } catch (...) {
            message_failed = std::current_exception();
          }
        }
        continue;
      }
      const auto space = line.find(' ');
      out.stage_bound = std::chrono::nanoseconds(std::stoll(line.substr(0, space)));
      out.stage = line.substr(space + 1);
      stage_end = steady::now() + out.stage_bound + grace;
    }
  };
  for (;;) {
    std::array<pollfd, 2> fds{{{report.read.get(), POLLIN, 0}, {errors.read.get(), POLLIN, 0}}};
    if (report_open || errors_open) {
      if (!report_open) fds[0].fd = -1;
      if (!errors_open) fds[1].fd = -1;
      ::poll(fds.data(), fds.size(), 100);
    }
    if (report_open) report_open = drain(report.read.get(), reported);
    if (errors_open) {
      const std::size_t before = err_text.size();
      errors_open = drain(errors.read.get(), err_text);
      if (err_text.size() > before) {  // pass it through: the user sees the library's words
        [[maybe_unused]] const auto n =
            ::write(STDERR_FILENO, err_text.data() + before, err_text.size() - before);
      }
      if (err_text.size() > 4 * last_words_bytes)
        err_text.erase(0, err_text.size() - last_words_bytes);
    }
    take_lines();
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      // Take what is left in the pipes, then judge.
      if (report_open) drain(report.read.get(), reported);
      if (errors_open) drain(errors.read.get(), err_text);
      take_lines();
      if (ended_by) {
        out.how = *ended_by;
      } else if (interrupted != nullptr && interrupted->load() != 0) {
        out.how = worker_outcome::end::interrupted;
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && reported.rfind('R', 0) == 0) {
        out.how = worker_outcome::end::finished;
        out.output = reported.substr(1);
      } else {
        out.how = worker_outcome::end::died;
        out.died_how = describe_wait_status(status);
      }
      break;
    }
    if (ended_by) continue;  // killed: wait for it to go
    if (message_failed) {
      ended_by = worker_outcome::end::died;
      ::kill(pid, SIGKILL);
    } else if (interrupted != nullptr && interrupted->load() != 0) {
      ended_by = worker_outcome::end::interrupted;
      ::kill(pid, SIGKILL);
    } else if (stage_end && steady::now() > *stage_end) {
      ended_by = worker_outcome::end::overran;
      ::kill(pid, SIGKILL);
    }
  }
  if (message_failed) std::rethrow_exception(message_failed);
  if (err_text.size() > last_words_bytes) err_text.erase(0, err_text.size() - last_words_bytes);
  out.last_words = std::move(err_text);
  return out;
}

}  // namespace pairperf
