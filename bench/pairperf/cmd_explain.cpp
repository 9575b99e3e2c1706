// `pairperf explain LOG...`: failure logs in, diagnoses and the checks that prove them out
// (diagnose/explain.h). --check runs the runnable checks here, as child pairperf processes with
// the same binary, each bounded, and folds their verdicts into the answer.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <map>
#include <sstream>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/private_files.h"
#include "core/errors.h"
#include "core/output.h"
#include "core/units.h"
#include "diagnose/explain.h"
#include "harness/context.h"
#include "harness/token.h"

extern char** environ;

namespace pairperf::cli {
namespace {

constexpr const char* catalog_name = "explain-catalog.json";
constexpr std::size_t tail_chars = 2000;

struct explain_args {
  std::vector<std::string> logs;
  std::string catalog;
  std::string json;
  bool check = false;
  int port = 18515;
  std::string check_timeout = "5m";
  token_options token;
};

std::string catalog_path(const explain_args& a) {
  if (!a.catalog.empty()) return a.catalog;
  if (const char* env = std::getenv("PAIRPERF_EXPLAIN_CATALOG"); env != nullptr && *env != '\0')
    return env;
  const std::string found = find_private_file(catalog_name, {}, false);
  if (found.empty())
    throw std::runtime_error(fmt::format(
        "explain's catalog {} is not installed (looked in {}); name one with --catalog",
        catalog_name, fmt::join(private_file_folders(), ", ")));
  return found;
}

// Runs one check: this binary with the command's arguments, its output captured, killed (by its
// PID) when it outlives `bound`.
check_run run_check(const std::string& command, std::chrono::nanoseconds bound,
                    const std::string& token) {
  check_run r;
  std::vector<std::string> args;
  std::istringstream words(command);
  for (std::string w; words >> w;) args.push_back(w);
  args.front() = "/proc/self/exe";
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PAIRPERF_TOKEN=", 15) != 0) env_store.emplace_back(*e);
  }
  if (!token.empty()) env_store.push_back("PAIRPERF_TOKEN=" + token);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw std::runtime_error(fmt::format("explain --check: pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    r.exit_code = 1;
    r.outcome = "failed";
    r.output_tail = fmt::format("cannot start: {}", std::strerror(rc));
    return r;
  }
  std::string output;
  bool timed_out = false;
  for (;;) {
    const auto left = bound - (std::chrono::steady_clock::now() - start);
    if (left <= std::chrono::nanoseconds::zero()) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{pipe_fds[0], POLLIN, 0};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(ms, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n <= 0) break;  // the child closed its output: it is ending
    output.append(buf, static_cast<std::size_t>(n));
    if (output.size() > 4 * tail_chars) output.erase(0, output.size() - tail_chars);
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (output.size() > tail_chars) output.erase(0, output.size() - tail_chars);
  r.output_tail = output;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (timed_out) {
    r.outcome = "failed";
    r.output_tail += fmt::format("\n(killed: it ran past --check-timeout, {:.0f} s)",
                                 std::chrono::duration<double>(bound).count());
  } else if (r.exit_code == 3) {
    r.outcome = "confirmed";  // the check finds what the log shows
  } else if (r.exit_code == 0) {
    r.outcome = "not reproduced";  // the path works now: the cause lies elsewhere or has passed
  } else if (r.exit_code == 4) {
    r.outcome = "inconclusive";
  } else {
    r.outcome = "failed";
  }
  return r;
}

int explain_command(const explain_args& a, const std::vector<std::string>& argv) {
  if (a.port < 1 || a.port > 65535) throw usage_error("--port must be 1-65535");
  const auto bound = parse_duration(a.check_timeout);
  if (bound <= std::chrono::nanoseconds::zero()) throw usage_error("--check-timeout must be > 0");
  if (!a.json.empty() && a.json != "-") check_output(a.json);
  explain_catalog catalog;
  try {
    catalog = load_catalog(catalog_path(a));
  } catch (const catalog_error& e) {
    throw usage_error(e.what());
  }
  std::vector<log_input> logs;
  for (const auto& name : a.logs) logs.push_back(read_log(name));
  explain_options o;
  o.pairperf_port = static_cast<std::uint16_t>(a.port);
  explanation e = explain_logs(catalog, logs, o);
  if (a.check) {
    e.checked = true;
    const std::string token = a.token.resolve();
    std::map<std::string, check_run> done;  // a command shared by diagnoses runs once
    for (auto& d : e.diagnoses) {
      for (auto& c : d.checks) {
        if (!c.runnable) continue;
        auto it = done.find(c.command);
        if (it == done.end()) {
          if (a.json != "-") fmt::print(stderr, "pairperf explain: checking: {}\n", c.command);
          it = done.emplace(c.command, run_check(c.command, bound, token)).first;
        }
        c.result = it->second;
      }
    }
  }
  const nlohmann::json j = e;
  nlohmann::json doc{{"schema", "pairperf.explain"},
                     {"schema_version", "1.0.0"},
                     {"context",
                      {{"tool", tool_context()},
                       {"argv", redact_argv(argv)},
                       {"time_utc", utc_timestamp()}}}};
  doc.update(j);
  if (a.json == "-") {
    fmt::print("{}\n", doc.dump(2));
  } else {
    print_explanation(stdout, e);
    if (!a.json.empty()) {
      write_output(a.json, doc.dump(2) + "\n");
      fmt::print("explanation: {}\n", a.json);
    }
  }
  return exit_code(e);
}

}  // namespace

command add_explain(CLI::App& root, const std::vector<std::string>& argv) {
  auto a = std::make_shared<explain_args>();
  CLI::App* app = root.add_subcommand(
      "explain",
      "Read an application's failure logs (gloo, torch.distributed, NCCL, UCX, libfabric, vLLM, "
      "pairperf; one per node, read together): what failed, the causes ranked by the evidence, "
      "the lines as log:line, and the pairperf commands that prove it (--check runs them)");
  app->add_option("logs", a->logs, "Log files ('-': standard input)")->required();
  app->add_option("--catalog", a->catalog,
                  "Signature catalog (default: the installed explain-catalog.json; also "
                  "$PAIRPERF_EXPLAIN_CATALOG)");
  app->add_option("--json", a->json, "Also write the explanation as JSON ('-': stdout only)");
  app->add_flag("--check", a->check,
                "Run the suggested checks that the logs fill in (doctor, mesh, run against "
                "pairperf servers on the named hosts) and fold their verdicts in");
  app->add_option("--port", a->port, "Control port of the pairperf servers the checks target")
      ->capture_default_str();
  app->add_option("--check-timeout", a->check_timeout, "Bound on each check")
      ->capture_default_str();
  a->token.add(app, "Token the pairperf servers of the checks require");
  return command{app, [a, argv] { return explain_command(*a, argv); }};
}

}  // namespace pairperf::cli
