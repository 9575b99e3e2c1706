#pragma once
// Synthetic runs for compare's tests: one build's runs with realistic noise between runs and
// within them.
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "analysis/compare.h"

namespace pairperf {

// Noise like this VM's, inside one run. Measured with `pairperf run -t tcp,ucx --test
// tcp_bw,tcp_lat,tag_bw, tag_lat --tls tcp --tls posix,sysv,cma --sizes 8,1M --repeat 10` (0.2 s a
// repetition): the coefficient of variation over the 10 repetitions was 1.8-5.7% for 1 MiB
// bandwidth, 0.1-1.7% for latency p50 (one 9.8%), 0.7-24% for p99. So: bandwidth lognormal 4% with
// one repetition in twenty dipping by up to 15% (a neighbour took the CPU); p50 lognormal 1.5%; p99
// lognormal 15%.
struct synth {
  std::mt19937_64 rng;
  explicit synth(std::uint64_t seed) : rng(seed) {}
  double noisy(double mean, double sd = 0.04, double dip_chance = 0.05) {
    std::lognormal_distribution<double> base(0.0, sd);
    std::uniform_real_distribution<double> u(0, 1);
    double v = mean * base(rng);
    if (u(rng) < dip_chance) v *= 1 - 0.15 * u(rng);
    return v;
  }
  // A run: `bw` and `lat` already carry the run's own shift (see runs()).
  result_set run(double bw, double lat, unsigned reps, const std::string& lane = "tcp") {
    result_set s;
    s.files = {"synthetic"};
    s.contexts = {nlohmann::json::object()};
    case_result r;
    r.test.transport = "ucx";
    r.test.test = "tag_bw";
    r.test.pattern = pattern_kind::stream_uni;
    r.test.size_bytes = 1 << 20;
    r.provenance = provenance{{{lane, "lo"}}, "tag rndv", {}, {}, {}, ""};
    case_result l = r;
    l.test.test = "tag_lat";
    l.test.pattern = pattern_kind::pingpong;
    l.test.size_bytes = 8;
    for (unsigned i = 0; i < reps; ++i) {
      const double b = noisy(bw);
      r.repetitions.push_back(repetition{100, 0.2, std::nullopt, bandwidth{b, b}, std::nullopt});
      sample_stats st;
      st.p50 = lat * noisy(1.0, 0.015, 0);
      st.p99 = 3 * lat * noisy(1.0, 0.15, 0);
      l.repetitions.push_back(repetition{100, 0.2, st, std::nullopt, std::nullopt});
    }
    r.bandwidth_Bps = r.repetitions.front().bandwidth_Bps;
    l.latency_s = l.repetitions.front().latency_s;
    s.results = {r, l};
    s.run_of = {0, 0};
    return s;
  }
  // k runs of one build: each run moves as a whole (lognormal `between` on bandwidth and on
  // latency), then its repetitions add the within-run noise above.
  result_set runs(unsigned k, double bw, double lat, double between = 0.03, unsigned reps = 5) {
    result_set s;
    std::lognormal_distribution<double> shift(0.0, between);
    for (unsigned i = 0; i < k; ++i) s.add(run(bw * shift(rng), lat * shift(rng), reps));
    return s;
  }
};

}  // namespace pairperf
