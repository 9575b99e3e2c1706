#pragma once
// Host noise: how much a measuring thread was kept off the CPU while it measured, and what the
// host was doing meanwhile. On a shared host (a compile beside the run, a noisy VM neighbour) a
// latency can move a thousandfold; a result that says so is worth more than one that hides it.
//
// Per side and per case, over every measured phase (repetitions add up):
//   wall_s, cpu_s            the phases' wall time and this thread's CPU time
//   runqueue_wait_s          time the thread was runnable but waiting for a CPU
//                            (/proc/thread-self/schedstat, the kernel's own account)
//   descheduled_share        runqueue_wait_s / wall_s: the share of the measurement during which
//                            the measuring thread wanted the CPU and did not have it
//   involuntary_switches     context switches forced on the thread (getrusage RUSAGE_THREAD)
//   load1_before/after       /proc/loadavg; steal_share: the host's steal time over the phases
//                            as a share of all CPU time (/proc/stat), what a hypervisor took
//   process_cpu_s            every thread of this process (the measuring one, the library's
//                            event loop or progress thread, pairperf's own helpers)
//   host_task_cpu_s          what every task of the host ran meanwhile (/proc/stat user + nice +
//                            system ticks), with host_cpus and boot_id (which host it is)
//   throttled_s              how long the process's cgroup was held back by its CPU limit
//                            (cpu.stat), where a cgroup accounts it
// Whose the waiting was: the host's other processes ran host_task_cpu_s less this process's CPU
// (and the peer's, when the peer runs on the same host: same boot_id). A side that waited for a
// CPU longer than the threshold (run --noise-threshold, 5% by default) makes the case noisy only
// when its cgroup's CPU limit throttled it ("contention": "limit"), or those other processes took
// more than the threshold of the host's CPUs meanwhile, or the hypervisor's steal did ("host");
// otherwise the waiting was the run's own threads competing with each other (a finding about the
// transport's loop: "self"), not noise.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

namespace pairperf {

inline constexpr double default_noise_threshold = 0.05;

struct noise_snapshot {
  std::int64_t wall_ns = 0;
  std::int64_t cpu_ns = 0;
  std::int64_t process_cpu_ns = 0;
  std::optional<std::int64_t> throttled_ns;
  std::optional<std::int64_t> runqueue_wait_ns;
  std::int64_t involuntary_switches = 0;
  double load1 = 0;
  std::optional<std::uint64_t> steal_ticks, total_ticks, task_ticks;
};

// Of the calling thread and this host, now. Never throws: what cannot be read is left empty.
noise_snapshot take_noise_snapshot() noexcept;

// Adds up the measured phases of one case on one side; begin()/end() around each phase, from
// the thread that measures.
class noise_meter {
 public:
  void begin() noexcept { m_start = take_noise_snapshot(); }
  void end() noexcept;
  void reset() noexcept { *this = noise_meter{}; }
  [[nodiscard]] bool measured() const noexcept { return m_phases > 0; }
  // The side block (see above); null when no phase was measured.
  [[nodiscard]] nlohmann::json side() const;

 private:
  noise_snapshot m_start;
  unsigned m_phases = 0;
  std::int64_t m_wall_ns = 0, m_cpu_ns = 0, m_process_ns = 0, m_switches = 0;
  std::optional<std::int64_t> m_wait_ns = 0;
  std::optional<std::int64_t> m_throttled_ns = 0;
  std::uint64_t m_steal = 0, m_total = 0, m_tasks = 0;
  bool m_ticks = true;
  double m_load_before = 0, m_load_after = 0;
};

// The case's host_noise block from both sides' blocks (the server's may be null: an older
// server, or a one-sided case it did not time): {"noisy", "why", "threshold_share", "client",
// "server"}, and where a side waited past the threshold, "contention": "host", "limit" or "self",
// with "self_why" for the latter. A side block without the CPU accounts (an older server) is judged
// as before them: its waiting counts as the host's.
nlohmann::json judge_noise(const nlohmann::json& client, const nlohmann::json& server,
                           double threshold);

// Pins this process (the calling thread, and every thread it starts later) to one CPU, as
// ucx_perftest -c and iperf3 -A do. Throws usage_error naming the CPUs allowed.
void pin_to_cpu(int cpu);

// What this process may use of the host's CPUs: the CPUs its affinity allows, and the CPU limit
// of its cgroup (quota / period in CPUs: cgroup v2 cpu.max, or v1 cpu.cfs_quota_us and
// cpu.cfs_period_us; the smallest along the path to the root), none when unlimited or unreadable.
// A pod with `resources.limits.cpu: 1500m` reads 1.5.
struct cpu_budget {
  unsigned usable = 0;
  std::optional<double> quota;
  // The CPUs the process can keep busy at once: the smaller of the two.
  [[nodiscard]] double cpus() const noexcept {
    return quota && *quota < static_cast<double>(usable) ? *quota : static_cast<double>(usable);
  }
};
cpu_budget read_cpu_budget() noexcept;
// {"cpus_usable": N, "cpu_quota": Q or null}, for the process context.
nlohmann::json cpu_budget_json(const cpu_budget& b);

// The limit a cgroup path allows, from its files' text (a unit-testable piece of the above):
// v2 `cpu_max` ("max 100000", "150000 100000"), or v1 `quota_us` and `period_us` ("-1").
std::optional<double> cgroup_quota(const std::string& cpu_max, const std::string& quota_us,
                                   const std::string& period_us);

// How much of a case's measurement host noise could have touched, from its host_noise block: the
// largest share of the measured time a side waited for a CPU or lost to steal, and both sides'
// waiting (run queue or steal, seconds) with the `samples` measured meanwhile: the delay they can
// have carried. A percentile q of latency moved by d needs 1 - q of the samples (at least one)
// delayed by d each, so waits explain it only up to wait_s / max(1, (1 - q) x samples)
// (analysis/compare_noise.cpp). Zero for a quiet or unmeasured block.
struct noise_exposure {
  double waited = 0;
  double wait_s = 0;          // both sides' waiting for a CPU or lost to steal, seconds
  std::uint64_t samples = 0;  // what the case measured over that time
};
noise_exposure exposure_of(const nlohmann::json& host_noise, std::uint64_t samples) noexcept;

// Whether a result's host_noise block says noisy, and its one-line reason ("" when quiet).
bool is_noisy(const nlohmann::json& host_noise) noexcept;
std::string noise_reason(const nlohmann::json& host_noise);
// Whether the run's own threads kept a side waiting (contention "self": not noise, a finding),
// and its account ("" when not).
bool is_self_contended(const nlohmann::json& host_noise) noexcept;
std::string self_contention_reason(const nlohmann::json& host_noise);

}  // namespace pairperf
