#pragma once
// Statistics over all samples (not a window, unlike ucx_perftest's last 2,048). Samples are
// nanosecond ticks of the steady clock, recorded into preallocated storage; summarising scales
// them to seconds.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <vector>

namespace pairperf {

struct sample_stats {
  std::uint64_t count = 0;
  double min = 0, avg = 0, p50 = 0, p90 = 0, p99 = 0, p99_9 = 0, max = 0, stddev = 0;
};

void to_json(nlohmann::json& j, const sample_stats& s);
void from_json(const nlohmann::json& j, sample_stats& s);

// Percentile q in [0, 1] of sorted values by linear interpolation between the closest ranks
// (numpy's default, "type 7"). Empty input gives 0.
double percentile_sorted(std::span<const std::int64_t> sorted, double q) noexcept;

// The median of a handful of values (repetitions, per-pair figures); 0 for none.
double median_of(std::vector<double> v);

// Sorts `samples` in place and returns their statistics multiplied by `scale` (e.g. 1e-9 for
// seconds, 0.5e-9 for one-way seconds from round trips). stddev is the population deviation.
sample_stats summarize(std::span<std::int64_t> samples, double scale);

// Fixed-capacity sample storage: record() never allocates and never branches on configuration;
// samples past capacity are counted but dropped (capacity is sized from the iteration count).
class sample_recorder {
 public:
  // Makes room for n samples and forgets earlier ones. Allocates; call outside timed loops.
  void reset(std::size_t n);
  // Makes room for n more samples after those recorded so far (a phase that continues a
  // measurement). Allocates; call outside timed loops.
  void extend(std::size_t n);
  void record(std::int64_t ticks) noexcept {
    if (m_count < m_data.size()) m_data[m_count] = ticks;
    ++m_count;
  }
  [[nodiscard]] std::span<std::int64_t> samples() noexcept {
    return {m_data.data(), std::min<std::size_t>(m_count, m_data.size())};
  }
  [[nodiscard]] std::size_t recorded() const noexcept { return m_count; }

 private:
  std::vector<std::int64_t> m_data;
  std::size_t m_count = 0;
};

}  // namespace pairperf
