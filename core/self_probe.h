#pragma once
// A question asked of a fresh copy of this binary. Some libraries change the rest of the process
// that loads or initializes them: CUDA (a child forked after cuInit cannot use the GPU, and the
// harness forks a worker per case and a session per client), libfabric's providers (signal
// handlers, verbs state). What such a library offers on this host is therefore asked in a child:
// this binary again, spawned (safe in a threaded process) with VARIABLE=1 in its environment.
// The child's answer comes from a [[gnu::constructor]] that checks is_self_probe_child(VARIABLE)
// before main and ends with answer_self_probe(TEXT).
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace pairperf {

struct self_probe_answer {
  std::string text;   // what the child wrote on stdout
  std::string error;  // why there is no answer ("" = the child answered and exited 0)
};

// What to ask: the child is /proc/self/exe with `variable`=1 in its environment and `program` as
// its argv[0] (what ps and strace show: "pairperf-ofi-discovery"); `what` names it in errors
// ("libfabric's discovery did not finish within 30 s").
struct self_probe_question {
  std::string_view variable;
  std::string_view program;
  std::string_view what;
};

// This process's environment with `set` (NAME=VALUE entries, each in place of that name's own
// value) and less the entries that start with one of `drop` (for example "NCCL_DEBUG_FILE="):
// what a child asked a question gets.
std::vector<std::string> child_environment(const std::vector<std::string>& set,
                                           const std::vector<std::string>& drop = {});

// Spawns the child with this process's environment, less the entries that start with one of
// `drop` (for example "FI_PROVIDER=": the child must see every provider); waits at most `limit`,
// then kills it. Its stderr is kept (the last 2 KiB) for the error when it fails.
self_probe_answer ask_self_probe(const self_probe_question& q, std::chrono::milliseconds limit,
                                 const std::vector<std::string>& drop = {});

// A run of this binary again (/proc/self/exe) with other arguments: what ask_self_probe does,
// and what `explain --check` does with a pairperf command. `argv[0]` names it (ps, strace);
// `env` is its whole environment; it reads /dev/null. It is waited for at most `limit`, then
// killed (by its PID).
struct self_run {
  std::string out;          // what it wrote on stdout
  std::string err;          // the last 2 KiB of its stderr, trailing blanks trimmed
  int status = 0;           // waitpid's status (describe_wait_status)
  bool timed_out = false;   // killed at `limit`
  std::string spawn_error;  // why it could not start ("" = it ran)
};
self_run run_self(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                  std::chrono::milliseconds limit);

// How a child process ended, from waitpid's status: "exit 3", "signal SIGKILL".
std::string describe_wait_status(int status);
// "SIGINT" for SIGINT: the signal's name as kill -l and strsignal's users write it.
std::string signal_name(int sig);

// In a constructor: whether this process is the child asked for `variable`.
bool is_self_probe_child(std::string_view variable);

// In the child: writes `text` on stdout and exits (0, or 1 when stdout is gone).
[[noreturn]] void answer_self_probe(const std::string& text);

}  // namespace pairperf
