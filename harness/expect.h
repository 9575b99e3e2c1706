#pragma once
// --expect: per-case expectations checked against what was measured and what really carried the
// bytes (the provenance's data lanes, not the configuration asked for).
//   transport=cma        a data lane of that transport carried the case
//   transport!=tcp       no data lane of that transport did
//   bw>=8GB/s@1M         bandwidth (the receiver's, else the sender's) at 1 MiB messages
//   lat<=5us@8           one-way latency p50 at 8 B (lat.p99, lat.avg, lat.max ... pick another)
// Without "@SIZE" a check applies to every case it can apply to. A result that misses one gets
// status fail and a verdict saying what was expected, what was seen and why.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace pairperf {

struct expectation {
  enum class metric { transport, bandwidth, latency };
  enum class op { eq, ne, ge, le, gt, lt };
  std::string text;  // as the user wrote it
  metric what = metric::transport;
  op how = op::eq;
  std::string name;                   // transport name
  std::string statistic = "p50";      // latency statistic
  double value = 0;                   // bytes per second, or seconds
  std::optional<std::uint64_t> size;  // "@SIZE"
};

// Throws usage_error with the accepted forms.
expectation parse_expectation(const std::string& text);

// Whether the expectation can say anything about this case (size and pattern fit).
bool applies(const expectation& e, const test_case& c);

// What the pair's facts say about a missed transport expectation (host/pair.h): on one host,
// namespaces that forbid shared memory explain a tcp fallback.
struct expectation_hint {
  std::string cause;
  std::string fix;
};

// Over a run: how many cases each expectation judged, and why the cases it covered but could
// not judge were not judged (skipped, errored, no such figure). An expectation that judged no
// case passed nothing: the run is inconclusive (exit 4), never green.
struct expectation_tally {
  explicit expectation_tally(std::size_t expectations)
      : judged(expectations, 0), noisy_misses(expectations, 0), why_not(expectations) {}
  std::vector<std::size_t> judged;
  // Misses on noisy cases, not judged: each makes the run inconclusive even where the
  // expectation judged other cases (the miss may be real).
  std::vector<std::size_t> noisy_misses;
  // Per expectation: (case number, why that case could not be judged).
  std::vector<std::vector<std::pair<std::size_t, std::string>>> why_not;
  // One line per expectation that judged no case or missed on a noisy one, with the reasons;
  // empty when every expectation judged at least one case and no miss was noisy.
  [[nodiscard]] std::vector<std::string> unjudged(
      const std::vector<expectation>& expectations) const;
};

// Checks every applicable expectation against an ok result; on a miss sets status fail and its
// message. A bandwidth or latency miss on a noisy case (noise.h) is not judged instead: the host,
// not the path, may have missed it. Always fills r.verdict when any expectation applied, and
// r.unjudged when one covered the case but could not judge it. A missed transport expectation about
// shared memory (transport= a shared-memory lane, e.g. cma; transport!= a network lane, e.g. tcp:
// kinds as the case's transport classifies its lanes) carries `hint` when given. `tally` (may be
// null) counts per expectation.
void apply_expectations(const std::vector<expectation>& expectations, case_result& r,
                        const std::optional<expectation_hint>& hint = std::nullopt,
                        expectation_tally* tally = nullptr);

}  // namespace pairperf
