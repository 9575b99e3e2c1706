#pragma once
// The client's results: a case's figures composed from both sides' outcomes, repetitions merged,
// and the run's verdict under the exit-code contract. Internal to the harness (client.cpp).
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/result.h"
#include "core/socket.h"
#include "harness/case_session.h"
#include "harness/case_worker.h"

namespace pairperf {

struct server_view {
  nlohmann::json body;  // the server's `results` message
  [[nodiscard]] double seconds(const char* key) const {
    return body.at("outcome").at(key).get<double>();
  }
};

// Fills r's figures (latency, bandwidth, rates, provenance, validation, GPU path) from this
// side's outcome of a measured phase and the server's `results`.
void compose_result(case_result& r, case_session& s, const pattern_outcome& mine,
                    const server_view& theirs);

// The headline of a repeated case: latency over every sample of every repetition, bandwidth
// and message rate the median of the repetitions', elapsed time their sum.
void merge_repetitions(case_result& r, std::vector<std::int64_t>& pooled_round_trips);

// The result of a case its worker did not finish (w.how is not `finished`): interrupted, ended
// for outliving its stage's bound, or dead, with the stage and the library's last words. `server`
// and `iface` name the control connection in the message.
case_result unfinished_case(const test_case& c, const worker_outcome& w, const std::string& server,
                            const std::string& iface);

// Whether case `b` may run in the worker process that ran `a` just before it: the same transport
// (one that loaded libfabric never runs raw verbs: ofi_handles.h), and `a` ended ok or skipped
// (one that failed may have left its library in a state the next case should not inherit).
bool shares_worker(const test_case& a, const case_result& a_result, const test_case& b);

// Seconds on the steady clock since t.
inline double seconds_since(steady::time_point t) {
  return std::chrono::duration<double>(steady::now() - t).count();
}

// A sweep's fixed cost, for the results' context ("overhead"): each measured case's wall time
// minus its measured phases (set-up, data connect, warm-up, calibration, control round trips,
// teardown), and the run's start before its first case (control connection and hello).
class overhead_meter {
 public:
  void setup_done(double seconds) { m_setup_s = seconds; }
  // Cases that measured something (ok or fail) with a wall time count; the others do not.
  void add(const case_result& r);
  [[nodiscard]] nlohmann::json summary(double run_wall_s) const;

 private:
  double m_setup_s = 0;
  double m_measured_s = 0;
  std::vector<double> m_per_case_s;
};

}  // namespace pairperf
