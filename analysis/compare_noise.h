#pragma once
// What compare reads from the runs' host noise (host/noise.h): each run's exposure, and whether
// it explains a regression-sized change (docs/commands/compare.md, "Not the host's noise").
#include <string>
#include <vector>

#include "analysis/compare.h"
#include "core/result.h"

namespace pairperf {

// The repetition figure a metric ("bandwidth", "latency p50", "latency p99") reads.
headline headline_for(const std::string& metric);

// Each run's repetition values for `metric` (runs without one left out), as run_values reads them.
std::vector<std::vector<double>> repetitions_by_run(
    const std::vector<std::vector<const case_result*>>& runs, const std::string& metric);

// Why the new runs' host noise, beyond the baseline runs', could have made the regression-sized
// change `m` holds; empty when it could not (the change is then the build's).
std::string noise_explanation(const metric_change& m);

}  // namespace pairperf
