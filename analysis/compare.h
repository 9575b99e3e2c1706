#pragma once
// `pairperf compare BASE NEW`: cases matched on their key, bandwidth and latency p50/p99 compared
// across repetitions with a Mann-Whitney U test, a regression only when the change is both
// significant and beyond a threshold; a change of provenance or status is always a finding.
//
// The test: two-sided Mann-Whitney U (Wilcoxon rank-sum) on the per-repetition values of each
// side, exact (the distribution of U by the q-binomial recurrence) when both sides have at most
// 25 values and no ties, else the normal approximation with tie and continuity corrections.
// The p-values of every metric in one comparison are adjusted together (Benjamini-Hochberg), so
// a sweep of hundreds of cases does not raise false alarms from noise alone; the change is the
// Hodges-Lehmann estimate (the median of every new/base ratio).
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/result.h"

namespace pairperf {

// A file or folder that cannot be compared (missing, not JSON, another schema); exit code 2.
class compare_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The smallest relative change the comparison of these values could detect: a two-sided test at
// `alpha` with 80% power, from the pooled spread of the log values within each side, the sizes,
// and the Mann-Whitney test's efficiency relative to the t-test (3/pi). `noise` is that spread
// (a relative standard deviation). `needed` is the repetitions a side that would detect
// `threshold`. No `mde` (infinite) when a side has fewer than 2 values or the exact test cannot
// reach `alpha` at these sizes.
struct detectability {
  std::optional<double> mde;
  std::optional<double> noise;
  std::size_t needed = 0;
};
detectability detectable_change(std::span<const double> base, std::span<const double> next,
                                double alpha, double threshold);

// Two-sided p-value of the Mann-Whitney U test; 1 when either side is empty.
double mann_whitney_p(std::span<const double> a, std::span<const double> b);
// The smallest two-sided p the exact test can give for these sizes (0 for large ones): with 3
// values a side it is 0.1, so no change can be significant at 0.05.
double mann_whitney_min_p(std::size_t n1, std::size_t n2);

struct result_set {
  std::vector<std::string> files;
  std::vector<nlohmann::json> contexts;
  std::vector<case_result> results;  // every file's, in order
};

// Reads a results file (schema pairperf.result 1.x; .json or .jsonl), or every *.json in a
// folder. Throws compare_error naming the file and what is wrong.
result_set load_results(const std::string& path);

// The identity of a case across runs: transport, test, pattern, TLS set, interface, target,
// memory types and size.
std::string case_key(const test_case& c);

struct compare_options {
  double threshold = 0.05;       // relative change that matters: bandwidth, latency p50
  double tail_threshold = 0.20;  // for latency p99, which moves 5-25% between runs by itself
  double alpha = 0.05;           // significance level
};

struct metric_change {
  std::string metric;  // "bandwidth", "latency p50", "latency p99"
  bool higher_is_better = false;
  std::vector<double> base, next;  // per repetition (a file without repetitions gives one)
  double base_median = 0, new_median = 0;
  double change = 0;              // Hodges-Lehmann: median of every new/base ratio, minus 1
  std::optional<double> p_value;  // none: too few values to test
  std::optional<double> q_value;  // p adjusted over the whole comparison (Benjamini-Hochberg)
  bool significant = false;
  bool regression = false;
  bool improvement = false;
  // No finding, but the data could not have shown one: a side with one value, sizes the exact
  // test cannot judge at alpha, or a minimum detectable change beyond the threshold.
  bool inconclusive = false;
  detectability detect;
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

void to_json(nlohmann::json& j, const comparison& c);
void print_comparison(std::FILE* out, const comparison& c, bool all_rows);
std::string markdown(const comparison& c);

}  // namespace pairperf
