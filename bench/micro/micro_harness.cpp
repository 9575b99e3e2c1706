// Google Benchmark micro-benchmarks of the harness's own overhead: what it costs to read the
// loops' clock and to time and record one sample, a ping-pong loop's own round trip (typed over
// the transport's class, or through the interface's virtual calls), to summarise a million, to
// write a results file of 1,000 cases, and to encode and decode one control message.
#include <benchmark/benchmark.h>

#include <array>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>

#include "bench/micro/micro_transport.h"
#include "core/clock.h"
#include "core/frame.h"
#include "core/socket.h"
#include "core/stats.h"
#include "harness/json_reporter.h"
#include "patterns/run.h"
#include "transports/transport.h"

namespace pairperf {
namespace {

// The loops' clock (core/clock.h: the TSC where invariant) against the steady clock (vDSO
// CLOCK_MONOTONIC) it replaced; the context line says which source the loops use here.
void BM_loop_clock_read(benchmark::State& state) {
  setup_loop_clock();
  for (auto _ : state) benchmark::DoNotOptimize(loop_now_ns());
  state.SetLabel(loop_clock_context().value("source", "?"));
}
BENCHMARK(BM_loop_clock_read);

#if defined(__x86_64__)
// The floor under both: the counter instruction alone (on a VM, 30 to 40 cycles).
void BM_rdtsc_instruction(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(__rdtsc());
}
BENCHMARK(BM_rdtsc_instruction);
#endif

void BM_steady_clock_read(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(steady::now());
}
BENCHMARK(BM_steady_clock_read);

// What the ping-pong loop adds per round trip: one clock read and one record (the target: at
// most 8 ns).
void BM_time_and_record_sample(benchmark::State& state) {
  setup_loop_clock();
  sample_recorder r;
  r.reset(1 << 20);
  std::int64_t last = loop_now_ns();
  for (auto _ : state) {
    const std::int64_t now = loop_now_ns();
    r.record(now - last);
    last = now;
    if (r.recorded() == (1U << 20)) r.reset(1 << 20);
  }
  state.SetLabel(loop_clock_context().value("source", "?"));
}
BENCHMARK(BM_time_and_record_sample);

// A ping-pong client's phase of 65,536 round trips over the instant transport (micro_transport):
// `Typed` calls its run_phase, the loops instantiated for its class as every transport's are;
// else the loops here, over the interface, each post and poll a virtual call (as the harness ran
// them before patterns/ was a template: this file does not know the transport's class).
template <bool Typed>
void BM_pingpong_loop(benchmark::State& state) {
  constexpr std::uint64_t round_trips = 1 << 16;
  const std::unique_ptr<transport> t = make_instant_transport();
  std::array<std::byte, 8> send{}, recv{};
  std::array<std::byte*, 1> send_slots{send.data()}, recv_slots{recv.data()};
  const pattern_buffers buffers{send_slots, recv_slots, nullptr, nullptr};
  pattern_run run;
  run.iterations = round_trips;
  run.size = 8;
  run.receive_after_send = true;
  run.deadline = steady::now() + std::chrono::hours(1);
  sample_recorder samples;
  const where place{"micro", "", ""};
  for (auto _ : state) {
    samples.reset(round_trips);
    if constexpr (Typed) {
      benchmark::DoNotOptimize(t->run_phase(run, buffers, samples, nullptr, place));
    } else {
      benchmark::DoNotOptimize(run_pattern(*t, run, buffers, samples, nullptr, place));
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(round_trips));
  state.counters["ns_per_round_trip"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * round_trips,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_pingpong_loop<true>)->Name("BM_pingpong_loop_typed");
BENCHMARK(BM_pingpong_loop<false>)->Name("BM_pingpong_loop_virtual");

void BM_summarize_1M_samples(benchmark::State& state) {
  std::vector<std::int64_t> base(1'000'000);
  std::mt19937_64 rng(1);
  std::lognormal_distribution<double> dist(8, 0.5);
  for (auto& x : base) x = static_cast<std::int64_t>(dist(rng));
  std::vector<std::int64_t> work;
  for (auto _ : state) {
    state.PauseTiming();
    work = base;
    state.ResumeTiming();
    benchmark::DoNotOptimize(summarize(work, 1e-9));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(base.size()));
}
BENCHMARK(BM_summarize_1M_samples)->Unit(benchmark::kMillisecond);

void BM_write_results_file_1000_cases(benchmark::State& state) {
  case_result r;
  r.test.transport = "tcp";
  r.test.test = "tcp_lat";
  r.test.size_bytes = 64;
  r.iterations = 10000;
  r.latency_s = sample_stats{10000, 1e-6, 2e-6, 2e-6, 3e-6, 4e-6, 5e-6, 9e-6, 1e-7};
  r.message_rate_per_s = 2.5e5;
  r.provenance = provenance{{lane{"tcp", "eth0"}},
                            "tcp stream, 1 connection",
                            {{"local", "10.0.0.1:5000"}},
                            {{"local", "10.0.0.2:6000"}},
                            {},
                            ""};
  const auto path = std::filesystem::temp_directory_path() / "pairperf_micro_results.json";
  for (auto _ : state) {
    json_reporter j(path);
    j.report_context({{"tool", {{"name", "pairperf"}}}});
    for (int i = 0; i < 1000; ++i) {
      r.test.index = static_cast<std::size_t>(i);
      j.report_result(r);
    }
    j.finalize();
  }
  std::filesystem::remove(path);
}
BENCHMARK(BM_write_results_file_1000_cases)->Unit(benchmark::kMillisecond);

void BM_control_frame_roundtrip(benchmark::State& state) {
  const nlohmann::json msg{{"type", "run"}, {"phase", "measure"}, {"iterations", 123456}};
  frame_decoder d;
  for (auto _ : state) {
    d.feed(encode_frame(msg));
    benchmark::DoNotOptimize(d.next());
  }
}
BENCHMARK(BM_control_frame_roundtrip);

}  // namespace
}  // namespace pairperf

BENCHMARK_MAIN();
