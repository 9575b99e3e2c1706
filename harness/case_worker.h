#pragma once
// Runs one piece of work (one case, or several in a row) in a child process and watches it. A
// transport library that aborts (a UCX assertion), or a call inside one that ignores its timeouts
// (a blocking connect() in ucp_ep_create), ends that child, never the process that runs the sweep:
// the supervisor records how it ended, the stage it was in and the last lines the library wrote to
// stderr.
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

// In the child: hands one line of text (no newline in it) to the supervisor's `on_message`, in
// order, while the work goes on (a case's start, its result). Outside a worker, does nothing.
void report_message(const std::string& line);

using worker_messages = std::function<void(const std::string&)>;

// Runs `work` in a forked child. The grace period is added to each stage's bound. Every message
// the child reported reaches `on_message` before this returns, those of a child that died too;
// if `on_message` throws, the child is ended and the exception passed on once it is gone.
worker_outcome run_in_worker(const std::function<std::string()>& work,
                             const std::atomic<int>* interrupted,
                             std::chrono::nanoseconds grace = std::chrono::seconds(2),
                             const worker_messages& on_message = {});

}  // namespace pairperf
