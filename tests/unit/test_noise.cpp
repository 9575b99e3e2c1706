#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "harness/expect.h"
#include "host/noise.h"

namespace pairperf {
namespace {

using clock_type = std::chrono::steady_clock;

void spin_for(std::chrono::milliseconds d) {
  const auto end = clock_type::now() + d;
  while (clock_type::now() < end) {
  }
}

// Pins the calling thread to one CPU for the test, then restores its mask.
class pinned {
 public:
  explicit pinned(int cpu) {
    sched_getaffinity(0, sizeof(m_saved), &m_saved);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    m_ok = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  pinned(const pinned&) = delete;
  pinned& operator=(const pinned&) = delete;
  ~pinned() { sched_setaffinity(0, sizeof(m_saved), &m_saved); }
  [[nodiscard]] bool ok() const { return m_ok; }

 private:
  cpu_set_t m_saved{};
  bool m_ok = false;
};

int first_allowed_cpu() {
  cpu_set_t set;
  sched_getaffinity(0, sizeof(set), &set);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return 0;
}

// A measuring thread that shares its CPU with a busy process waits for it about half the time:
// the meter sees it, whatever else the machine does (both are pinned to the same CPU), and the
// host's accounts say it was another process's: noisy, the host's contention.
TEST(Noise, ACpuHogOnTheSameCpuIsSeen) {
  if (!take_noise_snapshot().runqueue_wait_ns) GTEST_SKIP() << "this kernel has no schedstat";
  const int cpu = first_allowed_cpu();
  pinned me(cpu);
  ASSERT_TRUE(me.ok());
  const pid_t hog = ::fork();
  ASSERT_GE(hog, 0);
  if (hog == 0) {  // inherits the pinning; bounded, and ended by the parent long before
    ::alarm(10);
    spin_for(std::chrono::milliseconds(5000));
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  noise_meter m;
  m.begin();
  spin_for(std::chrono::milliseconds(300));
  m.end();
  ::kill(hog, SIGKILL);
  ::waitpid(hog, nullptr, 0);
  const nlohmann::json side = m.side();
  const double share = side.at("descheduled_share").get<double>();
  std::printf("sharing a CPU with a hog process: descheduled %.0f%%, %lld involuntary switches\n",
              share * 100,
              static_cast<long long>(side.at("involuntary_switches").get<long long>()));
  EXPECT_GT(share, 0.25) << side.dump();
  EXPECT_GT(side.at("involuntary_switches").get<long long>(), 0);
  EXPECT_EQ(side.at("cpus_allowed"), std::to_string(cpu));
  const nlohmann::json judged = judge_noise(side, nullptr, 0.05);
  EXPECT_TRUE(is_noisy(judged)) << judged.dump();
  EXPECT_EQ(judged.value("contention", ""), "host") << judged.dump();
  EXPECT_NE(noise_reason(judged).find("the client was descheduled"), std::string::npos);
  EXPECT_NE(noise_reason(judged).find("other processes ran"), std::string::npos);
}

// The same wait caused by a thread of this process (a library's event loop, a helper of
// pairperf's) is in the process's own CPU account: the meter counts it beside the measuring
// thread, so the judgement can tell it from the host's other processes.
TEST(Noise, AThreadOfThisProcessIsCountedAsItsOwn) {
  if (!take_noise_snapshot().runqueue_wait_ns) GTEST_SKIP() << "this kernel has no schedstat";
  const int cpu = first_allowed_cpu();
  pinned me(cpu);
  ASSERT_TRUE(me.ok());
  std::atomic<bool> stop{false};
  std::thread hog([&] {
    pinned p(cpu);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  noise_meter m;
  m.begin();
  spin_for(std::chrono::milliseconds(300));
  m.end();
  stop = true;
  hog.join();
  const nlohmann::json side = m.side();
  const double wall = side.at("wall_s").get<double>();
  const double beside = side.at("process_cpu_s").get<double>() - side.at("cpu_s").get<double>();
  const nlohmann::json judged = judge_noise(side, nullptr, 0.05);
  std::printf(
      "sharing a CPU with a thread of its own: descheduled %.0f%%, %.3g s of CPU beside "
      "it in %.3g s, judged %s\n",
      side.at("descheduled_share").get<double>() * 100, beside, wall,
      judged.value("contention", "none").c_str());
  EXPECT_GT(side.at("descheduled_share").get<double>(), 0.25) << side.dump();
  EXPECT_GT(beside, 0.25 * wall) << side.dump();
  ASSERT_TRUE(side.contains("host_task_cpu_s")) << side.dump();
  EXPECT_EQ(side.at("host_cpus").get<long>(), ::sysconf(_SC_NPROCESSORS_ONLN));
}

// Whose the waiting was, from the accounts: the host's tasks less this process (and the peer's
// on the same host) are the other processes'.
TEST(Noise, WaitingIsTheHostsOnlyWhenOtherProcessesRan) {
  const nlohmann::json base{
      {"wall_s", 1.0},  {"cpu_s", 0.3},    {"runqueue_wait_s", 0.3},    {"descheduled_share", 0.3},
      {"host_cpus", 2}, {"boot_id", "b1"}, {"involuntary_switches", 40}};
  // Both sides on one host of 2 CPUs: 1.6 s of tasks, 0.8 s each process: nobody else ran.
  nlohmann::json client = base, server = base;
  client["process_cpu_s"] = 0.8;
  server["process_cpu_s"] = 0.8;
  client["host_task_cpu_s"] = server["host_task_cpu_s"] = 1.62;
  nlohmann::json j = judge_noise(client, server, 0.05);
  EXPECT_FALSE(is_noisy(j)) << j.dump();
  EXPECT_EQ(j.value("contention", ""), "self");
  EXPECT_NE(j.value("self_why", "").find("this run's own threads"), std::string::npos);
  EXPECT_NE(j.value("self_why", "").find("the server on the same host 0.8 s"), std::string::npos);
  // Another process ran half a CPU meanwhile: the host's.
  client["host_task_cpu_s"] = server["host_task_cpu_s"] = 2.0;
  j = judge_noise(client, server, 0.05);
  EXPECT_TRUE(is_noisy(j)) << j.dump();
  EXPECT_EQ(j.value("contention", ""), "host");
  EXPECT_NE(noise_reason(j).find("other processes ran 18% of the host's CPUs"), std::string::npos)
      << noise_reason(j);
  // The peer on another host: its CPU is not this host's, so the same accounts read as others'.
  client["host_task_cpu_s"] = 1.62;
  server["boot_id"] = "b2";
  server["host_task_cpu_s"] = 0.82;
  j = judge_noise(client, server, 0.05);
  EXPECT_TRUE(is_noisy(j)) << j.dump();
  EXPECT_NE(noise_reason(j).find("the client was descheduled"), std::string::npos);
  EXPECT_EQ(noise_reason(j).find("the server was descheduled"), std::string::npos);
  // Nobody else ran, but the client's cgroup held it back: its CPU limit, noisy.
  server = client;
  client["throttled_s"] = 0.25;
  j = judge_noise(client, server, 0.05);
  EXPECT_TRUE(is_noisy(j)) << j.dump();
  EXPECT_EQ(j.value("contention", ""), "limit");
  EXPECT_NE(noise_reason(j).find("its cgroup's CPU limit throttled it 25%"), std::string::npos)
      << noise_reason(j);
  client.erase("throttled_s");
  // An older server's block without the accounts: judged as before them.
  nlohmann::json old = base;
  j = judge_noise(client, old, 0.05);
  EXPECT_NE(noise_reason(j).find("the server was descheduled 30%"), std::string::npos);
}

// A thread that sleeps is not waiting for a CPU: blocking progress is not noise.
TEST(Noise, SleepingIsNotDescheduling) {
  if (!take_noise_snapshot().runqueue_wait_ns) GTEST_SKIP() << "this kernel has no schedstat";
  noise_meter m;
  for (int i = 0; i < 3; ++i) {  // phases add up, as repetitions do
    m.begin();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    m.end();
  }
  const nlohmann::json side = m.side();
  EXPECT_GE(side.at("wall_s").get<double>(), 0.15);
  EXPECT_LT(side.at("cpu_s").get<double>(), 0.05);
  EXPECT_LT(side.at("descheduled_share").get<double>(), 0.05) << side.dump();
}

TEST(Noise, JudgedOnEitherSideAndOnSteal) {
  const nlohmann::json quiet{
      {"wall_s", 1.0}, {"runqueue_wait_s", 0.01}, {"descheduled_share", 0.01}};
  nlohmann::json busy = quiet;
  busy["descheduled_share"] = 0.3;
  busy["runqueue_wait_s"] = 0.3;
  EXPECT_FALSE(is_noisy(judge_noise(quiet, quiet, 0.05)));
  EXPECT_TRUE(is_noisy(judge_noise(quiet, busy, 0.05)));
  EXPECT_NE(noise_reason(judge_noise(quiet, busy, 0.05)).find("the server was descheduled 30%"),
            std::string::npos);
  EXPECT_FALSE(is_noisy(judge_noise(quiet, busy, 0.5)));
  nlohmann::json stolen = quiet;
  stolen["steal_share"] = 0.2;
  EXPECT_NE(noise_reason(judge_noise(stolen, nullptr, 0.05)).find("steal"), std::string::npos);
  EXPECT_TRUE(judge_noise(nullptr, quiet, 0.05).is_null());  // the client measured nothing
}

// A latency miss on a noisy case is not judged (the run is inconclusive), a pass still counts,
// and a transport check is judged whatever the noise.
TEST(Noise, ExpectationsDoNotJudgeNoisyMisses) {
  case_result r;
  r.test.pattern = pattern_kind::pingpong;
  r.test.size_bytes = 8;
  r.latency_s = sample_stats{};
  r.latency_s->p50 = 4e-3;
  r.provenance = provenance{{{"tcp", "lo", lane_kind::network}}, "", {}, {}, {}, ""};
  r.host_noise = {{"noisy", true}, {"why", "the client was descheduled 60%"}};
  const std::vector<expectation> ex{parse_expectation("lat<=1us@8"),
                                    parse_expectation("transport!=tcp")};
  expectation_tally tally(ex.size());
  apply_expectations(ex, r, std::nullopt, &tally);
  EXPECT_EQ(tally.noisy_misses[0], 1U);
  EXPECT_EQ(tally.judged[0], 0U);
  EXPECT_EQ(tally.judged[1], 1U);  // transport: judged, and missed
  EXPECT_EQ(r.status, case_status::fail);
  const auto lines = tally.unjudged(ex);
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("noisy: the client was descheduled 60%"), std::string::npos) << lines[0];
  ASSERT_TRUE(r.unjudged.is_object());
  EXPECT_EQ(r.unjudged.at("expect")[0], "lat<=1us@8");
}

// A pod's CPU limit as the kernel writes it: cgroup v2 cpu.max and v1's quota and period.
TEST(CpuBudget, CgroupLimitsReadAsCpus) {
  EXPECT_DOUBLE_EQ(*cgroup_quota("150000 100000", "", ""), 1.5);
  EXPECT_FALSE(cgroup_quota("max 100000", "", "").has_value());
  EXPECT_DOUBLE_EQ(*cgroup_quota("", "50000", "100000"), 0.5);
  EXPECT_FALSE(cgroup_quota("", "-1", "100000").has_value());
  EXPECT_FALSE(cgroup_quota("garbage", "", "").has_value());
  EXPECT_FALSE(cgroup_quota("", "", "").has_value());
  const cpu_budget b = read_cpu_budget();
  EXPECT_GE(b.usable, 1U);
  EXPECT_GT(b.cpus(), 0.0);
}

}  // namespace
}  // namespace pairperf
