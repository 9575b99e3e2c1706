#pragma once
// `pairperf history DIR...`: a series of runs over time (one results file a run, ordered by the
// time in its context), each case's metrics read for change points (e_divisive.h), and the
// newest run judged against the runs since the last change point (run_test.h): a step the
// history has located is the level that follows it, not a regression again every night.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analysis/compare.h"
#include "analysis/e_divisive.h"

namespace pairperf {

struct history_options {
  compare_options judge;      // threshold, tail threshold, alpha of the newest run's verdict
  e_divisive_options change;  // alpha, permutations, min segment of the change points
  std::size_t window = 20;    // the most baseline runs the newest run is judged against
  // The newest runs judged together (a nightly job's runs of one night: two short runs tell a
  // regression from one run's fluke better than one long run does).
  std::size_t judged = 1;
  std::size_t last = 100;  // the most recent runs read (change points are O(n^2))
};

struct history_run {
  std::string file;
  std::string time_utc;  // the context's; empty when the file has none
  std::string label;     // context.label or the commit, when the run recorded one
};

struct history_change {
  std::size_t run = 0;           // index into history::runs of the first run at the new level
  double before = 0, after = 0;  // medians of the segments on either side
  double change = 0;             // after / before - 1
  double p_value = 1;
  std::string verdict;  // "regression", "improvement", or "shift" (within the threshold)
};

struct history_series {
  std::string key;
  test_case test;
  std::string metric;
  bool higher_is_better = false;
  std::vector<std::optional<double>> values;  // one per run (none: the run lacks it)
  std::vector<history_change> changes;
  // The newest run(s) (options.judged) against the runs of their level (since the last change
  // point, at most `window`); none when the newest run lacks this series.
  std::optional<metric_change> latest;
  std::optional<std::size_t> level_since;  // the run the newest run's level starts at
  bool newest_noisy = false;               // a judged run's host took the CPU
};

struct history {
  history_options options;
  std::vector<history_run> runs;
  std::vector<history_series> series;
  std::vector<std::string> status_changes;      // newest run: ok before, not ok now (keys)
  std::vector<std::string> provenance_changes;  // newest run: lanes differ from the previous run
  std::size_t regressions = 0, improvements = 0, inconclusive = 0, change_points = 0;
  std::string ordered_by;  // "time" or, when a file had no time, "file name"
  [[nodiscard]] int exit_code() const;
  [[nodiscard]] std::string inconclusive_reason() const;
};

// `runs`: every file is one run (load_results of each input, then result_set::add).
history read_history(const result_set& runs, const history_options& options);

void to_json(nlohmann::json& j, const history& h);
void print_history(std::FILE* out, const history& h, bool all_rows);

}  // namespace pairperf
