#include "harness/context.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string_view>
#include <thread>

#include "core/clock.h"
#include "core/interfaces.h"
#include "host/gpus.h"
#include "host/nccl_probe.h"
#include "host/noise.h"
#include "transports/registry.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace pairperf {
namespace {

std::string read_first_line(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string value_after(const std::string& file, std::string_view key, char sep) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto pos = line.find(sep);
      if (pos == std::string::npos) continue;
      std::string v = line.substr(pos + 1);
      v.erase(0, v.find_first_not_of(" \t\""));
      while (!v.empty() && (v.back() == '"' || v.back() == ' ')) v.pop_back();
      return v;
    }
  }
  return {};
}

// The transports whose libraries tool_context() describes; empty: every built-in one. Set by
// prepare_context, which a mesh rank's server thread calls while its main thread says hello.
struct described {
  std::mutex lock;
  std::vector<std::string> names;
};

described& described_transports() {
  static described d;
  return d;
}

std::atomic<bool>& nccl_described() {
  static std::atomic<bool> on{false};
  return on;
}

}  // namespace

void prepare_context(const std::vector<std::string>& transports) {
  {
    described& d = described_transports();
    const std::lock_guard<std::mutex> hold(d.lock);
    d.names = transports;
  }
  setup_loop_clock();
  (void)tool_context();
}

void describe_nccl_in_context(std::chrono::milliseconds budget) {
  (void)nccl_description(budget);
  nccl_described().store(true);
}

nlohmann::json tool_context() {
  std::vector<std::string> only;
  {
    described& d = described_transports();
    const std::lock_guard<std::mutex> hold(d.lock);
    only = d.names;
  }
  nlohmann::json libraries = nlohmann::json::object();
  for (const auto& e : transport_registry::instance().all()) {
    if (!only.empty() && std::find(only.begin(), only.end(), e.name) == only.end()) continue;
    if (e.describe_library) libraries[e.name] = e.describe_library();
  }
  return {{"name", "pairperf"},
          {"libraries", libraries},
          {"version", PAIRPERF_VERSION},
          {"git_revision", PAIRPERF_GIT_REVISION},
          {"build_type", PAIRPERF_BUILD_TYPE},
          {"compiler", fmt::format("{} {}", PAIRPERF_COMPILER_ID, PAIRPERF_COMPILER_VERSION)},
          {"transports", transport_registry::instance().names()}};
}

nlohmann::json rdma_devices() {
  nlohmann::json out = nlohmann::json::array();
  const std::filesystem::path root = "/sys/class/infiniband";
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return out;
  for (const auto& dev : std::filesystem::directory_iterator(root, ec)) {
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& port : std::filesystem::directory_iterator(dev.path() / "ports", ec)) {
      ports.push_back({{"port", port.path().filename().string()},
                       {"state", read_first_line(port.path() / "state")},
                       {"link_layer", read_first_line(port.path() / "link_layer")},
                       {"rate", read_first_line(port.path() / "rate")}});
    }
    out.push_back({{"name", dev.path().filename().string()},
                   {"node_guid", read_first_line(dev.path() / "node_guid")},
                   {"ports", ports}});
  }
  return out;
}

nlohmann::json process_context() {
  nlohmann::json ns = nlohmann::json::object();
  for (const char* kind : {"ipc", "pid", "net", "mnt", "user", "uts"}) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(fmt::format("/proc/self/ns/{}", kind), ec);
    if (!ec) ns[kind] = target.string();  // e.g. "ipc:[4026531839]"
  }
  nlohmann::json shm = nullptr;
  struct stat st {};
  struct statvfs vfs {};
  if (::stat("/dev/shm", &st) == 0 && ::statvfs("/dev/shm", &vfs) == 0) {
    shm = {{"device", fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev))},
           {"inode", static_cast<std::uint64_t>(st.st_ino)},
           {"size_bytes", static_cast<std::uint64_t>(vfs.f_blocks) * vfs.f_frsize},
           {"free_bytes", static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize}};
  }
  const cpu_budget cpus = read_cpu_budget();
  return {{"pid", ::getpid()},
          {"boot_id", read_first_line("/proc/sys/kernel/random/boot_id")},
          {"namespaces", ns},
          {"dev_shm", shm},
          {"cpus_usable", cpus.usable},
          {"cpu_quota", cpus.quota ? nlohmann::json(*cpus.quota) : nlohmann::json()}};
}

nlohmann::json host_context() {
  utsname u{};
  ::uname(&u);
  std::string host(256, '\0');
  ::gethostname(host.data(), host.size());
  host.resize(host.find('\0'));
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  nlohmann::json out{{"hostname", host},
                     {"kernel", fmt::format("{} {}", u.sysname, u.release)},
                     {"machine", u.machine},
                     {"os", value_after("/etc/os-release", "PRETTY_NAME=", '=')},
                     {"cpu_model", value_after("/proc/cpuinfo", "model name", ':')},
                     {"cpus", std::thread::hardware_concurrency()},
                     {"memory_bytes", pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) *
                                                                  static_cast<std::uint64_t>(page)
                                                            : 0},
                     {"interfaces", list_interfaces()},
                     {"hostname_addresses", hostname_addresses()},
                     {"rdma_devices", rdma_devices()},
                     {"gpus", read_gpus()},
                     {"loop_clock", loop_clock_context()},
                     {"process", process_context()}};
  if (nccl_described().load()) out["nccl"] = nccl_description();
  return out;
}

nlohmann::json relevant_environment() {
  // The collective libraries' variables, and each transport's library's (registry.h).
  std::vector<std::string> prefixes{"NCCL_", "GLOO_"};
  for (const auto& e : transport_registry::instance().all())
    prefixes.insert(prefixes.end(), e.env_prefixes.begin(), e.env_prefixes.end());
  constexpr std::array<std::string_view, 2> names{"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"};
  nlohmann::json out = nlohmann::json::object();
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = entry.substr(0, eq);
    const bool wanted = std::any_of(prefixes.begin(), prefixes.end(),
                                    [&](const std::string& p) { return name.rfind(p, 0) == 0; }) ||
                        std::find(names.begin(), names.end(), name) != names.end();
    if (wanted) out[std::string(name)] = std::string(entry.substr(eq + 1));
  }
  return out;
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)));
}

std::vector<library_mismatch> library_mismatches(const nlohmann::json& ctx) {
  const auto libraries = [&](const char* key) {
    if (!ctx.is_object() || !ctx.contains(key) || !ctx.at(key).is_object())
      return nlohmann::json::object();
    const nlohmann::json& tool = ctx.at(key);
    return tool.contains("libraries") && tool.at("libraries").is_object()
               ? tool.at("libraries")
               : nlohmann::json::object();
  };
  const nlohmann::json client = libraries("tool"), server = libraries("server_tool");
  const auto version = [](const nlohmann::json& facts) {
    const auto v = facts.is_object() ? facts.find("version") : facts.end();
    return v != facts.end() && v->is_string() ? v->get<std::string>() : std::string("?");
  };
  std::vector<library_mismatch> out;
  for (const auto& e : transport_registry::instance().all()) {
    if (!e.peer_mismatch || !client.contains(e.name) || !server.contains(e.name)) continue;
    const nlohmann::json& mine = client.at(e.name);
    const nlohmann::json& theirs = server.at(e.name);
    auto [problem, fix] = e.peer_mismatch(mine, theirs);
    if (!problem.empty())
      out.push_back({e.name, std::move(problem), std::move(fix), version(mine), version(theirs)});
  }
  return out;
}

}  // namespace pairperf
