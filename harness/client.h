#pragma once
// The client side of a run: connects the control channel, says hello, then drives the server
// through each case of the matrix and hands every result to the reporter as it finishes.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/exit_codes.h"
#include "core/socket.h"
#include "harness/client_hello.h"
#include "harness/expect.h"
#include "harness/reporter.h"

namespace pairperf {

struct client_options {
  endpoint server;
  std::string token;  // must match the server's --token, if it has one
  run_config config;
  std::vector<test_case> cases;           // the expanded matrix
  std::vector<expectation> expectations;  // --expect, checked on every ok result
  std::vector<std::string> argv;          // recorded in the context block
  // Each case runs in a supervised child process (case_worker.h): a library abort or a stuck
  // library call costs that case, not the sweep. Off where forking is unsafe (an MPI process).
  bool isolate = true;
  // Set (to the signal number) by a SIGINT/SIGTERM handler: the current case is abandoned within
  // a second and no further case starts.
  const std::atomic<int>* interrupted = nullptr;
  // How long to wait out a busy server (its queue full): it says when to come back, and its
  // ticket keeps this client's place in line. 0 = give up at the first `busy`.
  std::chrono::nanoseconds wait_busy = std::chrono::minutes(2);
  std::FILE* busy_progress = stderr;  // the one "waiting" line; nullptr = silent
  // Ask the server for NCCL's own answer on its host in its hello reply (doctor, mesh), granting
  // it this long to ask its libraries; zero = do not ask.
  std::chrono::nanoseconds nccl_budget{0};
  // The server went away mid-sweep (it died or was restarted): how long to try to reach it
  // again before the remaining cases are not run. The case it took with it stays an error; the
  // same host must answer (its hostname), and each return is recorded in the context
  // ("reconnects"). Zero = the remaining cases are not run at once.
  std::chrono::nanoseconds reconnect{0};
};

// What the cases should take, in seconds, as the server's queue estimate counts them: per case,
// the warm-up and the measured phases' budgets and its setup. An estimate, never a bound.
double planned_seconds(const client_options& options);
// One case's share of it: the measured phases, the warm-up and pilot, the set-up.
double planned_case_seconds(const run_config& config);

// The hello this client says: its token, its planned time, and how long it waits its turn.
hello_request hello_of(const client_options& options);

struct run_summary {
  std::size_t ok = 0, skipped = 0, error = 0, unreachable = 0, fail = 0, noisy = 0;
  bool aborted = false;        // the control channel was lost; later cases were not run
  std::size_t reconnects = 0;  // the server went away and answered again (client_options)
  int interrupted = 0;         // the signal that stopped the run; later cases were not run
  std::size_t planned = 0;     // cases in the matrix
  std::string fatal;           // why the run could not start (control connect or hello failed)
  std::string busy;            // why it did not start: the server stayed busy past --wait-busy
  // Outputs that could not be written during the run (a results stream on a disk that filled):
  // the run failed to keep what it promised, though it measured on.
  std::vector<std::string> lost_output;
  std::vector<std::string> unjudged;  // expectations that judged no case, with the reasons

  // The exit-code contract (exit_codes.h): failed when a case errored, was unreachable or the
  // run stopped; missed when a check failed; inconclusive when nothing was measured (every case
  // skipped) or an expectation judged no case; else held. With the reasons.
  [[nodiscard]] verdict_outcome outcome() const;
  // The process exit code: outcome()'s, or 128 + the signal for an interrupted run (130, 143).
  [[nodiscard]] int exit_code() const;
  // Counts a finished case under its status (and as noisy, where it was).
  void count(const case_result& r);
};

// The results file's "outcome" block: exit code, its word, the reasons and the counts.
nlohmann::json to_json(const run_summary& s);

// Runs every case. When the run cannot start (control connect or hello failed) the reporter
// still gets a context with what this side knows, and the summary says why in `fatal`;
// failures of single cases become their results.
run_summary run_client(const client_options& options, reporter& out);

// Asks the pairperf server at `driver` to run `options.cases` as a client of `target` (the
// `drive` message; `pairperf mesh --hosts`) and returns its results. Bounded by `wait` for the
// whole exchange; throws step_error when the driver cannot be reached or cannot reach the target.
std::vector<case_result> drive_remote(const endpoint& driver, const std::string& target,
                                      const client_options& options, std::chrono::nanoseconds wait);

}  // namespace pairperf
