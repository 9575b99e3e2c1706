#pragma once
// Results in the formats CI trackers read, each entry named by the case key (compare.h):
//   Bencher Metric Format: {"<key>": {"latency": {value, lower_value, upper_value}, ...}}, with
//     latency p50 and p99 in nanoseconds (Bencher's built-in latency unit) and bandwidth in B/s;
//     lower/upper are the extremes over repetitions when the case was repeated.
// A case present in several inputs (files, or a folder's files) is one entry: their repetitions
// pool, the value is their median and the extremes span them all.
//   github-action-benchmark: [{"name", "unit", "value", "range", "extra"}]; that tool fixes the
//     direction per file, so bandwidth (customBiggerIsBetter) and latency (customSmallerIsBetter)
//     are separate documents.
#include <nlohmann/json.hpp>

#include "analysis/compare.h"

namespace pairperf {

nlohmann::json to_bencher(const result_set& results);
nlohmann::json to_gab_bigger_is_better(const result_set& results);   // bandwidth, GB/s
nlohmann::json to_gab_smaller_is_better(const result_set& results);  // latency, us

}  // namespace pairperf
