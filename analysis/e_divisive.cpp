#include "analysis/e_divisive.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace pairperf {
namespace {

struct best_split {
  std::size_t index = 0;  // absolute; 0: none
  double q = -INFINITY;
};

// The best split of v[begin, end): O(L^2) by moving one value at a time from right to left.
best_split best_in(std::span<const double> v, std::size_t begin, std::size_t end,
                   std::size_t min_segment) {
  best_split best;
  const std::size_t len = end - begin;
  if (len < 2 * min_segment) return best;
  double within_right = 0;
  for (std::size_t i = begin; i < end; ++i) {
    for (std::size_t j = i + 1; j < end; ++j) within_right += std::abs(v[i] - v[j]);
  }
  double within_left = 0;
  double between = 0;
  for (std::size_t t = begin; t + 1 < end; ++t) {
    // Move v[t] from the right side to the left.
    double to_left = 0;
    for (std::size_t i = begin; i < t; ++i) to_left += std::abs(v[i] - v[t]);
    double to_right = 0;
    for (std::size_t j = t + 1; j < end; ++j) to_right += std::abs(v[t] - v[j]);
    within_left += to_left;
    within_right -= to_right;
    between += to_right - to_left;
    const auto m = static_cast<double>(t + 1 - begin);
    const auto n = static_cast<double>(end - t - 1);
    if (t + 1 - begin < min_segment || end - t - 1 < min_segment) continue;
    const double energy =
        2 * between / (m * n) - within_left / (m * (m - 1) / 2) - within_right / (n * (n - 1) / 2);
    const double q = m * n / (m + n) * energy;
    if (q > best.q) best = {t + 1, q};
  }
  return best;
}

// The best split over every segment between consecutive `cuts` (which start with 0 and end with
// the size).
best_split best_over(std::span<const double> v, const std::vector<std::size_t>& cuts,
                     std::size_t min_segment) {
  best_split best;
  for (std::size_t s = 0; s + 1 < cuts.size(); ++s) {
    const best_split here = best_in(v, cuts[s], cuts[s + 1], min_segment);
    if (here.index != 0 && here.q > best.q) best = here;
  }
  return best;
}

}  // namespace

std::vector<change_point> e_divisive(std::span<const double> values,
                                     const e_divisive_options& options) {
  std::vector<change_point> found;
  const std::size_t min_segment = std::max<std::size_t>(options.min_segment, 2);
  std::vector<std::size_t> cuts{0, values.size()};
  std::mt19937_64 rng(options.seed);
  std::vector<double> shuffled(values.begin(), values.end());
  // A change point needs its p-value under alpha: stop counting once that cannot happen.
  const auto most_exceeding = static_cast<std::size_t>(
      std::floor(options.alpha * static_cast<double>(options.permutations + 1)));
  while (true) {
    const best_split observed = best_over(values, cuts, min_segment);
    if (observed.index == 0) break;
    std::size_t exceeding = 0;
    std::size_t done = 0;
    for (; done < options.permutations && exceeding + 1 <= most_exceeding; ++done) {
      std::copy(values.begin(), values.end(), shuffled.begin());
      for (std::size_t s = 0; s + 1 < cuts.size(); ++s) {
        std::shuffle(shuffled.begin() + static_cast<long>(cuts[s]),
                     shuffled.begin() + static_cast<long>(cuts[s + 1]), rng);
      }
      if (best_over(shuffled, cuts, min_segment).q >= observed.q) ++exceeding;
    }
    const double p =
        static_cast<double>(exceeding + 1) / static_cast<double>(options.permutations + 1);
    if (done < options.permutations || p >= options.alpha) break;
    found.push_back({observed.index, observed.q, p});
    cuts.insert(std::upper_bound(cuts.begin(), cuts.end(), observed.index), observed.index);
  }
  std::sort(found.begin(), found.end(),
            [](const change_point& a, const change_point& b) { return a.index < b.index; });
  return found;
}

}  // namespace pairperf
