#include "host/nccl_probe.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/interfaces.h"
#include "core/self_probe.h"
#include "core/units.h"

namespace pairperf {
namespace {

namespace fs = std::filesystem;

// The child's cue: the library to load (a path, or the loader's name).
constexpr const char* child_variable = "PAIRPERF_NCCL_PROBE_LIBRARY";
constexpr std::size_t max_log_lines = 60;
constexpr std::size_t max_candidates = 8;

std::string env_value(const std::vector<std::string>& env, std::string_view name) {
  for (const auto& e : env) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
      return e.substr(name.size() + 1);
  }
  return {};
}

// The folders under `dir` whose names start with `prefix` ("python3", "cuda-"), sorted.
std::vector<fs::path> children_named(const fs::path& dir, std::string_view prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind(prefix, 0) == 0) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class candidate_list {
 public:
  void add(const fs::path& file, const char* found_by) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return;
    const fs::path real = fs::canonical(file, ec);
    if (ec || !m_seen.insert(real.string()).second) return;
    m_out.push_back({file.string(), found_by});
  }
  void add_unresolved(std::string name, const char* found_by) {
    m_out.push_back({std::move(name), found_by});
  }
  std::vector<nccl_candidate> take() {
    if (m_out.size() > max_candidates) m_out.resize(max_candidates);
    return std::move(m_out);
  }

 private:
  std::set<std::string> m_seen;
  std::vector<nccl_candidate> m_out;
};

// nccl.h's NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9, major*1000 + minor*100 +
// patch before.
std::string version_text(int code) {
  if (code >= 20900) return fmt::format("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100);
  return fmt::format("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100);
}

// The root's address in an ncclUniqueId: 8 bytes of magic, then union ncclSocketAddress.
std::string root_of(const std::array<unsigned char, 128>& id) {
  std::uint16_t family = 0;
  std::memcpy(&family, id.data() + 8, sizeof(family));
  std::array<char, INET6_ADDRSTRLEN> text{};
  if (family == AF_INET) {
    sockaddr_in sa{};
    std::memcpy(&sa, id.data() + 8, sizeof(sa));
    if (inet_ntop(AF_INET, &sa.sin_addr, text.data(), text.size()) == nullptr) return {};
    return fmt::format("{}:{}", text.data(), ntohs(sa.sin_port));
  }
  if (family == AF_INET6) {
    sockaddr_in6 sa{};
    std::memcpy(&sa, id.data() + 8, sizeof(sa));
    if (inet_ntop(AF_INET6, &sa.sin6_addr, text.data(), text.size()) == nullptr) return {};
    return fmt::format("[{}]:{}", text.data(), ntohs(sa.sin6_port));
  }
  return {};
}

// In the child: loads the library and asks it. NCCL's lines go to stdout meanwhile (the caller
// has pointed it at a memory file).
nlohmann::json ask_library(const char* library) {
  nlohmann::json out{{"ran", false}};
  void* handle = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    out["error"] = fmt::format("cannot load {}: {}", library, why ? why : "unknown error");
    return out;
  }
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    std::error_code ec;
    const fs::path real = fs::canonical(map->l_name, ec);
    out["library"] = ec ? std::string(map->l_name) : real.string();
  }
  using get_version_fn = int (*)(int*);
  using get_id_fn = int (*)(void*);
  using error_string_fn = const char* (*)(int);
  auto* get_version = reinterpret_cast<get_version_fn>(::dlsym(handle, "ncclGetVersion"));
  auto* get_id = reinterpret_cast<get_id_fn>(::dlsym(handle, "ncclGetUniqueId"));
  auto* error_string = reinterpret_cast<error_string_fn>(::dlsym(handle, "ncclGetErrorString"));
  if (get_version == nullptr || get_id == nullptr) {
    out["error"] = fmt::format("{} has no ncclGetVersion or ncclGetUniqueId: not NCCL", library);
    return out;
  }
  int code = 0;
  if (get_version(&code) == 0) out["version"] = version_text(code);
  std::array<unsigned char, 128> id{};  // ncclUniqueId: NCCL_UNIQUE_ID_BYTES (128)
  const int rc = get_id(id.data());
  out["ran"] = true;
  out["ok"] = rc == 0;
  if (rc != 0) {
    out["error"] = fmt::format("ncclGetUniqueId returned {} ({})", rc,
                               error_string ? error_string(rc) : "no ncclGetErrorString");
  } else {
    out["root"] = root_of(id);
  }
  return out;
}

std::string read_all(int fd) {
  std::string text;
  if (::lseek(fd, 0, SEEK_SET) != 0) return text;
  std::array<char, 4096> buf{};
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    text.append(buf.data(), static_cast<std::size_t>(n));
  }
  return text;
}

// NCCL's INFO and WARN lines, from "INFO"/"WARN" on ("vm:12:12 [0] NCCL INFO x" -> "INFO x").
std::vector<std::string> nccl_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && out.size() < max_log_lines) {
    const auto at = line.find("NCCL ");
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + 5);
    if (rest.rfind("INFO ", 0) == 0 || rest.rfind("WARN ", 0) == 0) out.push_back(rest);
  }
  return out;
}

[[gnu::constructor]] void nccl_probe_child() {
  const char* library = std::getenv(child_variable);
  if (library == nullptr || *library == '\0') return;
  // NCCL writes its debug lines to stdout when NCCL_DEBUG_FILE is unset: into a memory file
  // while it runs, read back, and the answer on the real stdout.
  const int answer_fd = ::dup(STDOUT_FILENO);
  const int log_fd = ::memfd_create("pairperf-nccl-log", 0);
  if (answer_fd < 0 || log_fd < 0 || ::dup2(log_fd, STDOUT_FILENO) < 0) {
    answer_self_probe(
        nlohmann::json{{"ran", false}, {"error", "cannot redirect NCCL's log"}}.dump());
  }
  nlohmann::json out = ask_library(library);
  std::fflush(stdout);
  const auto lines = nccl_lines(read_all(log_fd));
  ::dup2(answer_fd, STDOUT_FILENO);
  std::vector<std::string> names;
  for (const auto& i : list_interfaces()) names.push_back(i.name);
  const auto [iface, address] = parse_bootstrap_line(lines, names);
  out["iface"] = iface;
  out["address"] = address;
  out["family"] = address.empty() ? "" : address.find(':') != std::string::npos ? "ipv6" : "ipv4";
  if (out.value("ran", false) && !out.value("ok", false)) {
    // NCCL's own words first: its WARN lines say why.
    std::vector<std::string> warns;
    for (const auto& l : lines) {
      if (l.rfind("WARN ", 0) == 0) warns.push_back(l.substr(5));
    }
    if (!warns.empty())
      out["error"] = fmt::format("{}; {}", fmt::join(warns, "; "), out.value("error", ""));
  }
  out["log"] = lines;
  answer_self_probe(out.dump());
}

// This process's environment for the child: NCCL's debug output on stdout at INFO, and the cue.
std::vector<std::string> probe_environment(const std::string& library) {
  return child_environment({fmt::format("{}={}", child_variable, library), "NCCL_DEBUG=INFO",
                            "NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV,NET"},
                           {"NCCL_DEBUG_FILE="});
}

nccl_answer ask(const nccl_candidate& c, std::chrono::milliseconds limit) {
  nccl_answer a;
  a.found_by = c.found_by;
  a.library = c.path;
  const self_run r = run_self({"pairperf-nccl-probe"}, probe_environment(c.path), limit);
  const auto seconds = static_cast<double>(limit.count()) / 1000.0;
  if (!r.spawn_error.empty()) {
    a.error = fmt::format("the probe could not start: {}", r.spawn_error);
    return a;
  }
  if (r.timed_out) {
    a.error = fmt::format("NCCL's probe gave no answer within {:g} s (killed)", seconds);
    return a;
  }
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_object() || r.status != 0) {
    a.error = fmt::format("NCCL's probe ended with {} and no answer{}{}",
                          describe_wait_status(r.status), r.err.empty() ? "" : ": ", r.err);
    return a;
  }
  from_json(j, a);
  a.found_by = c.found_by;
  if (a.library.empty()) a.library = c.path;
  return a;
}

}  // namespace

std::pair<std::string, std::string> parse_bootstrap_line(const std::vector<std::string>& lines,
                                                         const std::vector<std::string>& names) {
  for (const auto& line : lines) {
    for (const std::string_view head : {"Bootstrap: Using ", "Bootstrap : Using "}) {
      const auto at = line.find(head);
      if (at == std::string::npos) continue;
      const std::string rest = line.substr(at + head.size());
      const auto end = rest.rfind('<');
      const std::string name_address = rest.substr(0, end);
      // The longest interface name followed by ':'; else up to the first ':'.
      std::string iface;
      for (const auto& n : names) {
        if (n.size() > iface.size() && name_address.rfind(n + ":", 0) == 0) iface = n;
      }
      if (iface.empty()) iface = name_address.substr(0, name_address.find(':'));
      std::string address =
          iface.size() < name_address.size() ? name_address.substr(iface.size() + 1) : "";
      if (const auto pct = address.find('%'); pct != std::string::npos) address.resize(pct);
      return {iface, address};
    }
  }
  return {};
}

void to_json(nlohmann::json& j, const nccl_answer& a) {
  j = {{"found_by", a.found_by}, {"library", a.library}, {"version", a.version},
       {"ran", a.ran},           {"ok", a.ok},           {"iface", a.iface},
       {"address", a.address},   {"family", a.family},   {"root", a.root},
       {"error", a.error},       {"log", a.log}};
}

void from_json(const nlohmann::json& j, nccl_answer& a) {
  a.found_by = j.value("found_by", "");
  a.library = j.value("library", "");
  a.version = j.value("version", "");
  a.ran = j.value("ran", false);
  a.ok = j.value("ok", false);
  a.iface = j.value("iface", "");
  a.address = j.value("address", "");
  a.family = j.value("family", "");
  a.root = j.value("root", "");
  a.error = j.value("error", "");
  a.log = j.value("log", std::vector<std::string>());
}

std::vector<nccl_candidate> find_nccl_libraries(const std::vector<std::string>& environment) {
  candidate_list list;
  if (const auto named = env_value(environment, "PAIRPERF_NCCL_LIBRARY"); !named.empty()) {
    for (const auto& p : split_list(named, ':')) list.add_unresolved(p, "PAIRPERF_NCCL_LIBRARY");
    return list.take();
  }
  list.add_unresolved("libnccl.so.2", "the dynamic loader");
  // The CUDA toolkit: CUDA_HOME, CUDA_PATH, /usr/local/cuda and each /usr/local/cuda-X.Y.
  std::vector<fs::path> cuda;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const auto v = env_value(environment, var); !v.empty()) cuda.emplace_back(v);
  }
  cuda.emplace_back("/usr/local/cuda");
  for (const auto& d : children_named("/usr/local", "cuda-")) cuda.push_back(d);
  for (const auto& root : cuda) {
    for (const char* sub : {"lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"})
      list.add(root / sub / "libnccl.so.2", "the CUDA toolkit");
  }
  // Python environments: the active ones, those whose bin/ is on PATH, the system's and the user's.
  std::vector<fs::path> roots;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    if (const auto v = env_value(environment, var); !v.empty()) roots.emplace_back(v);
  }
  for (const auto& dir : split_list(env_value(environment, "PATH"), ':')) {
    const fs::path p(dir);
    if (p.filename() == "bin") roots.push_back(p.parent_path());
  }
  if (const auto home = env_value(environment, "HOME"); !home.empty())
    roots.push_back(fs::path(home) / ".local");
  for (const char* r : {"/usr/local", "/usr", "/opt/conda"}) roots.emplace_back(r);
  std::vector<fs::path> site{"/usr/lib/python3/dist-packages"};
  for (const auto& root : roots) {
    for (const auto& py : children_named(root / "lib", "python3")) {
      site.push_back(py / "site-packages");
      site.push_back(py / "dist-packages");
    }
  }
  for (const auto& s : site)
    list.add(s / "nvidia" / "nccl" / "lib" / "libnccl.so.2", "a Python environment");
  return list.take();
}

nlohmann::json describe_nccl(std::chrono::milliseconds budget) {
  const auto until = std::chrono::steady_clock::now() + budget;
  const auto candidates = find_nccl_libraries(child_environment({}));
  nlohmann::json answers = nlohmann::json::array();
  std::set<std::string> seen;
  for (const auto& c : candidates) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      nccl_answer skipped;
      skipped.found_by = c.found_by;
      skipped.library = c.path;
      skipped.error = fmt::format("not asked: the probes' {:g} s were spent",
                                  static_cast<double>(budget.count()) / 1000.0);
      answers.push_back(skipped);
      continue;
    }
    const nccl_answer a = ask(c, left);
    // The loader's search finding no libnccl.so.2 is no library, not a failing one.
    if (!a.ran && c.found_by == std::string("the dynamic loader") && a.library == c.path &&
        a.error.rfind("cannot load", 0) == 0)
      continue;
    // The loader's file is often also found in its folder: each file answers once.
    if (a.ran && !seen.insert(a.library).second) continue;
    answers.push_back(a);
  }
  const bool named = !candidates.empty() && candidates.front().found_by == "PAIRPERF_NCCL_LIBRARY";
  return {{"searched", named ? "PAIRPERF_NCCL_LIBRARY"
                             : "the dynamic loader, the CUDA toolkit, Python environments"},
          {"answers", answers}};
}

const nlohmann::json& nccl_description(std::chrono::milliseconds budget) {
  static const nlohmann::json description = describe_nccl(budget);
  return description;
}

}  // namespace pairperf
