#pragma once
// `pairperf compare BASE NEW...`: cases matched on their key; each metric judged with runs as the
// unit (run_test.h): one value per run (the median of its repetitions), the new run(s) against
// the baseline runs' spread, p-values adjusted over every metric of the comparison
// (Benjamini-Hochberg); a regression only when significant and beyond the threshold. A metric
// whose runs could not show a change of the threshold is inconclusive and says how many runs it
// needs. A change of provenance or status is always a finding.
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/run_test.h"
#include "core/result.h"
#include "host/noise.h"

namespace pairperf {

// A file or folder that cannot be compared (missing, not JSON, another schema); exit code 2.
class compare_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One results file is one run. `run_of[i]` is the index in `files` of `results[i]`'s run.
struct result_set {
  std::vector<std::string> files;
  std::vector<nlohmann::json> contexts;  // one per file
  std::vector<case_result> results;      // every file's, in order
  std::vector<std::size_t> run_of;
  // Appends another set's runs after this one's.
  void add(const result_set& more);
};

// Reads a results file (schema pairperf.result 1.x; .json or .jsonl), or every *.json and
// *.jsonl in a folder (sorted by name). Throws compare_error naming the file and what is wrong.
result_set load_results(const std::string& path);

// The identity of a case across runs: transport, test, pattern, TLS set, interface, target,
// memory types and size.
std::string case_key(const test_case& c);

struct compare_options {
  double threshold = 0.05;       // relative change that matters: bandwidth, latency p50
  double tail_threshold = 0.20;  // for latency p99, which moves 5-25% between runs by itself
  double alpha = 0.05;           // significance level
};

// Each run's noise exposure for the results `runs` hold (the largest of a run's results).
std::vector<noise_exposure> run_exposures(const std::vector<std::vector<const case_result*>>& runs,
                                          const std::string& metric);

// Each run's lowest and highest repetition value for `metric`, as run_values.
std::vector<std::pair<double, double>> run_ranges(
    const std::vector<std::vector<const case_result*>>& runs, const std::string& metric);

// One value per run for `metric` of the results `runs` hold (the median of each run's
// repetitions; a run without repetitions gives its headline figure); runs without one are left
// out. `headline` names: "bandwidth", "latency p50", "latency p99".
std::vector<double> run_values(const std::vector<std::vector<const case_result*>>& runs,
                               const std::string& metric);

struct metric_change {
  std::string metric;  // "bandwidth", "latency p50", "latency p99"
  bool higher_is_better = false;
  std::vector<double> base, next;          // one value per run: the median of its repetitions
  double base_median = 0, new_median = 0;  // of the run values
  std::size_t base_noisy_runs = 0;         // left out of `base`: their host took the CPU
  std::vector<noise_exposure> next_noise;  // each new run's (host/noise.h), as `next`
  std::vector<noise_exposure> base_noise;  // each baseline run's, as `base`
  // The noisy baseline runs left out of `base`, and their noise: how this figure moved when the
  // host took the CPU away, the evidence of how far waits explain a change of it.
  std::vector<double> base_loaded;
  std::vector<noise_exposure> base_loaded_noise;
  std::vector<std::pair<double, double>>
      base_loaded_range;          // each one's lowest, highest repetition
  run_test test;                  // change, p, spread, MDE, runs needed
  std::optional<double> q_value;  // p adjusted over the whole comparison (Benjamini-Hochberg)
  bool significant = false;
  bool regression = false;
  bool improvement = false;
  // No finding, but the runs could not have shown one: fewer than 2 baseline runs, or a minimum
  // detectable change beyond the threshold, or a noisy new run.
  bool inconclusive = false;
  double threshold = 0;  // the one that applies to this metric
  std::string note;
};

struct case_comparison {
  std::string key;
  test_case test;
  std::string base_status, new_status;
  std::vector<std::string> base_lanes, new_lanes;  // data lanes, sorted, over all files
  bool provenance_changed = false;
  bool status_regressed = false;  // ok before, not ok now
  // Why a side's measurement was noisy (noise.h), e.g. "new: the client was descheduled 40% ...";
  // empty when both were quiet. A noisy case's "no change" is inconclusive.
  std::string noisy;
  std::vector<metric_change> metrics;
};

struct comparison {
  compare_options options;
  std::vector<std::string> base_files, new_files;
  std::vector<case_comparison> cases;
  std::vector<std::string> missing;  // in BASE only
  std::vector<std::string> added;    // in NEW only
  std::size_t regressions = 0, improvements = 0, provenance_changes = 0, status_changes = 0;
  std::size_t inconclusive = 0;  // metrics that could not be judged
  [[nodiscard]] bool has_finding() const {
    return regressions + provenance_changes + status_changes > 0;
  }
  // The exit-code contract: 3 findings; else 4 when nothing matched or a metric could not be
  // judged; else 0.
  [[nodiscard]] int exit_code() const;
  // Why the comparison is inconclusive (empty when it is not), for the summary.
  [[nodiscard]] std::string inconclusive_reason() const;
};

comparison compare_results(const result_set& base, const result_set& next,
                           const compare_options& options);

// Benjamini-Hochberg over every metric with a p-value, then each metric's verdict: significant,
// regression or improvement beyond its threshold, or inconclusive with what it needs. Shared by
// compare and history. Returns the counts of regressions and improvements.
struct judged_counts {
  std::size_t regressions = 0, improvements = 0, inconclusive = 0;
};
judged_counts judge_metrics(const std::vector<metric_change*>& metrics, const compare_options& o);

// What compare and history say in words for their exit code (0, 3, 4), and a metric's value with
// its unit (GB/s for bandwidth, time for latency): one wording for both.
std::string verdict_for_exit(int exit_code);
std::string metric_value_text(bool higher_is_better, double v);

void to_json(nlohmann::json& j, const comparison& c);
void print_comparison(std::FILE* out, const comparison& c, bool all_rows);
std::string markdown(const comparison& c);

}  // namespace pairperf
