#include "host/noise.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/errors.h"

namespace pairperf {
namespace {

std::int64_t clock_ns(clockid_t id) noexcept {
  timespec ts{};
  if (::clock_gettime(id, &ts) != 0) return 0;
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The second field of schedstat: nanoseconds spent runnable on a run queue.
std::optional<std::int64_t> runqueue_wait() noexcept {
  std::ifstream f("/proc/thread-self/schedstat");
  long long on_cpu = 0, waiting = 0;
  if (!(f >> on_cpu >> waiting)) return std::nullopt;
  return waiting;
}

double load1() noexcept {
  std::ifstream f("/proc/loadavg");
  double v = 0;
  f >> v;
  return v;
}

// The aggregate "cpu" line of /proc/stat: user nice system idle iowait irq softirq steal ...
void cpu_ticks(noise_snapshot& s) noexcept {
  try {
    std::ifstream f("/proc/stat");
    std::string line;
    if (!std::getline(f, line) || line.rfind("cpu ", 0) != 0) return;
    std::istringstream in(line.substr(4));
    std::uint64_t v = 0, total = 0, steal = 0, tasks = 0;
    for (int field = 0; field < 8 && in >> v; ++field) {
      total += v;
      if (field == 7) steal = v;
      if (field <= 2) tasks += v;  // user (guest included), nice, system: tasks, not interrupts
    }
    s.steal_ticks = steal;
    s.total_ticks = total;
    s.task_ticks = tasks;
  } catch (...) {
  }
}

// This boot of this host (or VM, or container's host): two sides that print the same one share
// the CPUs.
const std::string& boot_id() {
  static const std::string id = [] {
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(f, line);
    return line;
  }();
  return id;
}

// At most 1: the kernel adds a wait to schedstat when the thread gets the CPU back, so a wait
// that began before a phase can land inside it.
double share(double part, double whole) { return whole > 0 ? std::min(part / whole, 1.0) : 0; }

// The CPUs this thread may run on, as a list such as "0-1" or "3" (what --cpu pinned).
std::string cpus_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<std::string> parts;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    parts.push_back(last == c ? std::to_string(c) : fmt::format("{}-{}", c, last));
    c = last;
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

// Nanoseconds the cgroups of this process were throttled by their CPU limit (cgroup v2 cpu.stat
// throttled_usec, v1 throttled_time), the largest along the path to the root (the limiting level);
// empty where no cgroup says.
std::optional<std::int64_t> throttled() noexcept;

}  // namespace

noise_snapshot take_noise_snapshot() noexcept {
  noise_snapshot s;
  s.load1 = load1();
  cpu_ticks(s);
  s.runqueue_wait_ns = runqueue_wait();
  rusage ru{};
  if (::getrusage(RUSAGE_THREAD, &ru) == 0) s.involuntary_switches = ru.ru_nivcsw;
  s.cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  s.process_cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  s.throttled_ns = throttled();
  s.wall_ns = clock_ns(CLOCK_MONOTONIC);
  return s;
}

void noise_meter::end() noexcept {
  const noise_snapshot now = take_noise_snapshot();
  if (m_phases == 0) m_load_before = m_start.load1;
  m_load_after = now.load1;
  ++m_phases;
  m_wall_ns += now.wall_ns - m_start.wall_ns;
  m_cpu_ns += now.cpu_ns - m_start.cpu_ns;
  m_process_ns += now.process_cpu_ns - m_start.process_cpu_ns;
  if (m_throttled_ns && now.throttled_ns && m_start.throttled_ns) {
    *m_throttled_ns += *now.throttled_ns - *m_start.throttled_ns;
  } else {
    m_throttled_ns.reset();
  }
  m_switches += now.involuntary_switches - m_start.involuntary_switches;
  if (m_wait_ns && now.runqueue_wait_ns && m_start.runqueue_wait_ns) {
    *m_wait_ns += *now.runqueue_wait_ns - *m_start.runqueue_wait_ns;
  } else {
    m_wait_ns.reset();
  }
  if (m_ticks && now.total_ticks && m_start.total_ticks) {
    m_steal += *now.steal_ticks - *m_start.steal_ticks;
    m_total += *now.total_ticks - *m_start.total_ticks;
    m_tasks += *now.task_ticks - *m_start.task_ticks;
  } else {
    m_ticks = false;
  }
}

nlohmann::json noise_meter::side() const {
  if (m_phases == 0) return nullptr;
  const double wall = static_cast<double>(m_wall_ns) * 1e-9;
  nlohmann::json j{{"wall_s", wall},
                   {"cpu_s", static_cast<double>(m_cpu_ns) * 1e-9},
                   {"involuntary_switches", m_switches},
                   {"load1_before", m_load_before},
                   {"load1_after", m_load_after},
                   {"cpus_allowed", cpus_allowed()},
                   {"process_cpu_s", static_cast<double>(m_process_ns) * 1e-9}};
  if (m_throttled_ns) j["throttled_s"] = static_cast<double>(*m_throttled_ns) * 1e-9;
  const long hz = ::sysconf(_SC_CLK_TCK);
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (m_ticks && hz > 0 && cpus > 0 && !boot_id().empty()) {
    j["host_task_cpu_s"] = static_cast<double>(m_tasks) / static_cast<double>(hz);
    j["host_cpus"] = cpus;
    j["boot_id"] = boot_id();
  }
  if (m_wait_ns) {
    const double wait = static_cast<double>(*m_wait_ns) * 1e-9;
    j["runqueue_wait_s"] = wait;
    j["descheduled_share"] = share(wait, wall);
  } else {
    j["runqueue_wait_s"] = nullptr;
    j["descheduled_share"] = nullptr;
  }
  // Ticks move every 10 ms: a phase shorter than a few of them says nothing about steal.
  j["steal_share"] =
      m_ticks && m_total >= 10
          ? nlohmann::json(share(static_cast<double>(m_steal), static_cast<double>(m_total)))
          : nlohmann::json(nullptr);
  return j;
}

namespace {

double number(const nlohmann::json& side, const char* key) {
  const auto it = side.find(key);
  return it != side.end() && it->is_number() ? it->get<double>() : 0.0;
}

// What the host's other processes ran while `side` measured, as a share of the host's CPUs:
// every task's CPU less this side's process and, on the same host, the peer's. Empty without the
// accounts (an older pairperf, no /proc/stat). One tick (1/USER_HZ s) per CPU is the accounts'
// grain, so a share under two ticks per CPU reads as none.
std::optional<double> others_share(const nlohmann::json& side, const nlohmann::json& peer) {
  if (!side.contains("host_task_cpu_s") || !side.contains("process_cpu_s")) return std::nullopt;
  const double wall = number(side, "wall_s");
  const double cpus = number(side, "host_cpus");
  if (wall <= 0 || cpus <= 0) return std::nullopt;
  double others = number(side, "host_task_cpu_s") - number(side, "process_cpu_s");
  const bool same_host =
      peer.is_object() && peer.contains("boot_id") && peer.at("boot_id") == side.at("boot_id");
  if (same_host) others -= number(peer, "process_cpu_s");
  const double hz = static_cast<double>(std::max(::sysconf(_SC_CLK_TCK), 1L));
  others -= 2.0 * cpus / hz;
  return std::max(others, 0.0) / (wall * cpus);
}

}  // namespace

nlohmann::json judge_noise(const nlohmann::json& client, const nlohmann::json& server,
                           double threshold) {
  if (!client.is_object()) return nullptr;
  nlohmann::json out{{"threshold_share", threshold}, {"client", client}};
  if (server.is_object()) out["server"] = server;
  std::vector<std::string> why, limited, self;
  for (const auto& [name, side, peer] :
       {std::tuple{"client", &client, &server}, std::tuple{"server", &server, &client}}) {
    if (!side->is_object()) continue;
    const double off = number(*side, "descheduled_share");
    if (off > threshold) {
      const std::string waited = fmt::format(
          "the {} was descheduled {:.0f}% of the measured {:.3g} s ({:.3g} s waiting for a CPU, "
          "{} involuntary switches, load {:.2f} -> {:.2f})",
          name, off * 100, number(*side, "wall_s"), number(*side, "runqueue_wait_s"),
          side->value("involuntary_switches", std::int64_t{0}), number(*side, "load1_before"),
          number(*side, "load1_after"));
      const std::optional<double> others = others_share(*side, *peer);
      const double wall = number(*side, "wall_s");
      const double throttled = wall > 0 ? number(*side, "throttled_s") / wall : 0;
      if (throttled > threshold) {
        limited.push_back(
            fmt::format("{}; its cgroup's CPU limit throttled it {:.0f}% of that time", waited,
                        std::min(throttled, 1.0) * 100));
      } else if (!others || *others > threshold) {
        why.push_back(others ? fmt::format("{}; other processes ran {:.0f}% of the host's CPUs",
                                           waited, *others * 100)
                             : waited);
      } else {
        const bool same_host = peer->is_object() && peer->contains("boot_id") &&
                               peer->at("boot_id") == side->at("boot_id");
        self.push_back(fmt::format(
            "{}, while other processes ran under {:.0f}% of the host's CPUs: this run's own "
            "threads kept it waiting (its process ran {:.3g} s of CPU, {:.3g} s of it beside the "
            "measuring thread{})",
            waited, threshold * 100, number(*side, "process_cpu_s"),
            number(*side, "process_cpu_s") - number(*side, "cpu_s"),
            same_host ? fmt::format("; the {} on the same host {:.3g} s",
                                    name == std::string("client") ? "server" : "client",
                                    number(*peer, "process_cpu_s"))
                      : ""));
      }
    }
    const double steal = number(*side, "steal_share");
    if (steal > threshold)
      why.push_back(
          fmt::format("the {}'s host lost {:.0f}% of its CPU time to steal (a busy "
                      "hypervisor)",
                      name, steal * 100));
  }
  out["noisy"] = !why.empty() || !limited.empty();
  if (!why.empty() || !limited.empty()) {
    why.insert(why.end(), limited.begin(), limited.end());
    out["why"] = fmt::format("{}", fmt::join(why, "; "));
    out["contention"] = limited.empty() || why.size() > limited.size() ? "host" : "limit";
  } else if (!self.empty()) {
    out["contention"] = "self";
  }
  if (!self.empty()) out["self_why"] = fmt::format("{}", fmt::join(self, "; "));
  return out;
}

void pin_to_cpu(int cpu) {
  const std::string allowed = cpus_allowed();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (cpu < 0 || cpu >= CPU_SETSIZE)
    throw usage_error(fmt::format("--cpu {}: no such CPU (this process may use {})", cpu, allowed));
  CPU_SET(cpu, &set);
  if (::sched_setaffinity(0, sizeof(set), &set) != 0)
    throw usage_error(fmt::format("--cpu {}: cannot pin to it: {} (this process may use {})", cpu,
                                  std::strerror(errno), allowed));
}

std::optional<double> cgroup_quota(const std::string& cpu_max, const std::string& quota_us,
                                   const std::string& period_us) {
  try {
    if (!cpu_max.empty()) {
      std::istringstream in(cpu_max);
      std::string quota;
      double period = 0;
      if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
      return std::stod(quota) / period;
    }
    if (quota_us.empty() || period_us.empty()) return std::nullopt;
    const double quota = std::stod(quota_us);
    const double period = std::stod(period_us);
    if (quota <= 0 || period <= 0) return std::nullopt;  // -1: unlimited
    return quota / period;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

std::string first_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

// The cgroup paths of this process: v2's ("0::/a/b") and v1's cpu controller's.
void cgroup_paths(std::string& v2, std::string& v1) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.rfind("0::", 0) == 0) v2 = path;
    std::istringstream names(controllers);
    for (std::string c; std::getline(names, c, ',');) {
      if (c == "cpu") v1 = path;
    }
  }
}

std::optional<double> smallest_quota_up_to_root() {
  std::string v2, v1;
  cgroup_paths(v2, v1);
  std::optional<double> best;
  const auto keep = [&](std::optional<double> q) {
    if (q && (!best || *q < *best)) best = q;
  };
  const auto walk = [&](std::string path, const auto& read) {
    for (int depth = 0; depth < 64; ++depth) {
      keep(read(path));
      if (path.empty() || path == "/") return;
      const auto slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  };
  if (!v2.empty()) {
    walk(v2, [](const std::string& p) {
      return cgroup_quota(first_line("/sys/fs/cgroup" + (p == "/" ? "" : p) + "/cpu.max"), "", "");
    });
  }
  if (!v1.empty()) {
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      const std::string base = mount;
      walk(v1, [&base](const std::string& p) {
        const std::string dir = base + (p == "/" ? "" : p);
        return cgroup_quota("", first_line(dir + "/cpu.cfs_quota_us"),
                            first_line(dir + "/cpu.cfs_period_us"));
      });
    }
  }
  return best;
}

std::optional<std::int64_t> stat_value(const std::string& file, const std::string& key) {
  std::ifstream f(file);
  std::string k;
  long long v = 0;
  while (f >> k >> v) {
    if (k == key) return v;
  }
  return std::nullopt;
}

// (file, key, nanoseconds per unit) for every cgroup level of this process, found once.
const std::vector<std::tuple<std::string, std::string, long long>>& throttle_files() {
  static const auto files = [] {
    std::vector<std::tuple<std::string, std::string, long long>> out;
    std::string v2, v1;
    cgroup_paths(v2, v1);
    const auto walk = [&](std::string path, const std::string& base, const char* key,
                          long long unit) {
      for (int depth = 0; depth < 64; ++depth) {
        const std::string file = base + (path == "/" ? "" : path) + "/cpu.stat";
        if (stat_value(file, key)) out.emplace_back(file, key, unit);
        if (path.empty() || path == "/") return;
        const auto slash = path.rfind('/');
        path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
      }
    };
    if (!v2.empty()) walk(v2, "/sys/fs/cgroup", "throttled_usec", 1000);
    if (!v1.empty()) {
      for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"})
        walk(v1, mount, "throttled_time", 1);
    }
    return out;
  }();
  return files;
}

std::optional<std::int64_t> throttled() noexcept {
  try {
    std::optional<std::int64_t> most;
    for (const auto& [file, key, unit] : throttle_files()) {
      if (const auto v = stat_value(file, key); v && (!most || *v * unit > *most)) most = *v * unit;
    }
    return most;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

cpu_budget read_cpu_budget() noexcept {
  cpu_budget b;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0)
    b.usable = static_cast<unsigned>(CPU_COUNT(&set));
  try {
    b.quota = smallest_quota_up_to_root();
  } catch (...) {
    b.quota.reset();
  }
  return b;
}

nlohmann::json cpu_budget_json(const cpu_budget& b) {
  return {{"cpus_usable", b.usable},
          {"cpu_quota", b.quota ? nlohmann::json(*b.quota) : nlohmann::json()}};
}

noise_exposure exposure_of(const nlohmann::json& host_noise, std::uint64_t samples) noexcept {
  noise_exposure e;
  if (!host_noise.is_object()) return e;
  for (const char* side : {"client", "server"}) {
    const auto it = host_noise.find(side);
    if (it == host_noise.end() || !it->is_object()) continue;
    double side_wait_s = 0;
    const double wall_s = std::max(number(*it, "wall_s"), 0.0);
    for (const char* key : {"descheduled_share", "steal_share"}) {
      const auto v = it->find(key);
      if (v == it->end() || !v->is_number()) continue;
      e.waited = std::max(e.waited, v->get<double>());
      side_wait_s = std::max(side_wait_s, v->get<double>() * wall_s);
    }
    side_wait_s = std::max(side_wait_s, number(*it, "runqueue_wait_s"));
    if (!std::isfinite(side_wait_s) || side_wait_s < 0) side_wait_s = 0;
    e.wait_s += side_wait_s;
  }
  e.samples = samples;
  e.waited = std::clamp(e.waited, 0.0, 1.0);
  return e;
}

bool is_noisy(const nlohmann::json& host_noise) noexcept {
  return host_noise.is_object() && host_noise.value("noisy", false);
}

std::string noise_reason(const nlohmann::json& host_noise) {
  return is_noisy(host_noise) ? host_noise.value("why", std::string("noisy")) : std::string();
}

bool is_self_contended(const nlohmann::json& host_noise) noexcept {
  return host_noise.is_object() && !is_noisy(host_noise) &&
         host_noise.value("contention", std::string()) == "self";
}

std::string self_contention_reason(const nlohmann::json& host_noise) {
  return is_self_contended(host_noise) ? host_noise.value("self_why", std::string())
                                       : std::string();
}

}  // namespace pairperf
