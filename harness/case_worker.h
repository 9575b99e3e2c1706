#pragma once
// Runs one piece of work (one case) in a child process and watches it. A transport library that
// aborts (a UCX assertion), or a call inside one that ignores its timeouts (a blocking connect()
// in ucp_ep_create), ends that child, never the process that runs the sweep: the supervisor
// records how it ended, the stage it was in and the last lines the library wrote to stderr.
//
// The child reports the stage it enters and how long that stage may take (report_stage); the
// supervisor ends it (SIGKILL) when a stage outlives its bound by more than a grace period, or
// at once when `interrupted` holds a signal number.
#include <atomic>
#include <chrono>
#include <functional>
#include <string>

namespace pairperf {

struct worker_outcome {
  enum class end { finished, died, overran, interrupted };
  end how = end::finished;
  std::string output;    // what the work returned (finished)
  std::string died_how;  // "signal SIGABRT", "exit 70" (died)
  std::string stage;     // the stage it was in when it died, overran or was interrupted
  std::chrono::nanoseconds stage_bound{0};
  std::string last_words;  // the end of the child's stderr (also passed through to ours)
};

// In the child: tells the supervisor that a stage begins and bounds it. Outside a worker, does
// nothing.
void report_stage(const std::string& name, std::chrono::nanoseconds bound);

// Runs `work` in a forked child. The grace period is added to each stage's bound.
worker_outcome run_in_worker(const std::function<std::string()>& work,
                             const std::atomic<int>* interrupted,
                             std::chrono::nanoseconds grace = std::chrono::seconds(2));

}  // namespace pairperf
