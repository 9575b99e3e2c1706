#include "host/noise.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
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
    std::uint64_t v = 0, total = 0, steal = 0;
    for (int field = 0; field < 8 && in >> v; ++field) {
      total += v;
      if (field == 7) steal = v;
    }
    s.steal_ticks = steal;
    s.total_ticks = total;
  } catch (...) {
  }
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

}  // namespace

noise_snapshot take_noise_snapshot() noexcept {
  noise_snapshot s;
  s.load1 = load1();
  cpu_ticks(s);
  s.runqueue_wait_ns = runqueue_wait();
  rusage ru{};
  if (::getrusage(RUSAGE_THREAD, &ru) == 0) s.involuntary_switches = ru.ru_nivcsw;
  s.cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID);
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
  m_switches += now.involuntary_switches - m_start.involuntary_switches;
  if (m_wait_ns && now.runqueue_wait_ns && m_start.runqueue_wait_ns) {
    *m_wait_ns += *now.runqueue_wait_ns - *m_start.runqueue_wait_ns;
  } else {
    m_wait_ns.reset();
  }
  if (m_ticks && now.total_ticks && m_start.total_ticks) {
    m_steal += *now.steal_ticks - *m_start.steal_ticks;
    m_total += *now.total_ticks - *m_start.total_ticks;
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
                   {"cpus_allowed", cpus_allowed()}};
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

nlohmann::json judge_noise(const nlohmann::json& client, const nlohmann::json& server,
                           double threshold) {
  if (!client.is_object()) return nullptr;
  nlohmann::json out{{"threshold_share", threshold}, {"client", client}};
  if (server.is_object()) out["server"] = server;
  std::vector<std::string> why;
  for (const auto& [name, side] : {std::pair{"client", &client}, std::pair{"server", &server}}) {
    if (!side->is_object()) continue;
    const nlohmann::json* facts = side;  // a lambda may not capture a structured binding (clang 14)
    const auto get = [facts](const char* key) {
      const auto it = facts->find(key);
      return it != facts->end() && it->is_number() ? it->get<double>() : 0.0;
    };
    const double off = get("descheduled_share");
    if (off > threshold) {
      why.push_back(fmt::format(
          "the {} was descheduled {:.0f}% of the measured {:.3g} s ({:.3g} s waiting for a CPU, "
          "{} involuntary switches, load {:.2f} -> {:.2f})",
          name, off * 100, get("wall_s"), get("runqueue_wait_s"),
          side->value("involuntary_switches", std::int64_t{0}), get("load1_before"),
          get("load1_after")));
    }
    const double steal = get("steal_share");
    if (steal > threshold)
      why.push_back(
          fmt::format("the {}'s host lost {:.0f}% of its CPU time to steal (a busy "
                      "hypervisor)",
                      name, steal * 100));
  }
  out["noisy"] = !why.empty();
  if (!why.empty()) out["why"] = fmt::format("{}", fmt::join(why, "; "));
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
    for (const char* key : {"descheduled_share", "steal_share"}) {
      const auto v = it->find(key);
      if (v != it->end() && v->is_number()) e.waited = std::max(e.waited, v->get<double>());
    }
    const auto sw = it->find("involuntary_switches");
    if (sw != it->end() && sw->is_number() && samples > 0)
      e.switched = std::max(e.switched, sw->get<double>() / static_cast<double>(samples));
  }
  e.waited = std::clamp(e.waited, 0.0, 1.0);
  e.switched = std::clamp(e.switched, 0.0, 1.0);
  return e;
}

bool is_noisy(const nlohmann::json& host_noise) noexcept {
  return host_noise.is_object() && host_noise.value("noisy", false);
}

std::string noise_reason(const nlohmann::json& host_noise) {
  return is_noisy(host_noise) ? host_noise.value("why", std::string("noisy")) : std::string();
}

}  // namespace pairperf
