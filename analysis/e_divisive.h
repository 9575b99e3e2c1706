#pragma once
// Change points of one series by E-divisive means (Matteson & James, "A Nonparametric Approach
// for Multiple Change Point Analysis of Multivariate Data", JASA 109(505), 2014), the method
// MongoDB runs over its CI performance history (Daly et al., "The Use of Change Point Detection
// to Identify Software Performance Regressions in a Continuous Integration System", ICPE 2020).
//
// Hierarchical: the split that maximizes the energy statistic
//   Q(X, Y) = mn/(m+n) * (2/(mn) sum|x-y| - 1/C(m,2) sum|x-x'| - 1/C(n,2) sum|y-y'|)
// (exponent 1) over every segment found so far is kept when a permutation test (values shuffled
// within each current segment) says it is significant; then the next is sought. Deterministic:
// the permutations come from a seeded generator.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pairperf {

struct e_divisive_options {
  double alpha = 0.05;             // significance of each new change point
  std::size_t permutations = 199;  // p-values resolve to 1/(permutations+1)
  std::size_t min_segment = 3;     // the fewest values on each side of a change point
  std::uint64_t seed = 1;
};

struct change_point {
  std::size_t index = 0;  // the first value of the new segment
  double q = 0;           // the energy statistic of the split
  double p_value = 1;     // permutation p-value when it was accepted
};

// Change points of `values` in index order; none for series shorter than 2 * min_segment.
std::vector<change_point> e_divisive(std::span<const double> values,
                                     const e_divisive_options& options);

}  // namespace pairperf
