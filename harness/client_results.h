#pragma once
// The client's results: a case's figures composed from both sides' outcomes, repetitions merged,
// and the run's verdict under the exit-code contract. Internal to the harness (client.cpp).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/result.h"
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

}  // namespace pairperf
