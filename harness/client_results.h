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
