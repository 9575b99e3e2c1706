#include "host/memory_room.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

namespace pairperf {
namespace {

// v1 writes "no limit" as the largest page-aligned signed value; anything this large is none.
constexpr std::uint64_t no_limit = std::uint64_t{1} << 62;

std::optional<std::uint64_t> read_number(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    std::size_t used = 0;
    const std::uint64_t v = std::stoull(word, &used);
    if (used != word.size() || word.front() == '-') return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

struct hierarchy {
  std::filesystem::path mount;  // where the hierarchy is mounted
  std::string path;             // the process's cgroup inside it
  const char* limit_file;
  const char* usage_file;
};

// The least headroom from the process's cgroup up to the hierarchy's root.
std::optional<std::uint64_t> room_in(const hierarchy& h) {
  std::optional<std::uint64_t> room;
  std::filesystem::path rel = std::filesystem::path(h.path).relative_path();
  for (;;) {
    const std::filesystem::path dir = h.mount / rel;
    const auto limit = read_number(dir / h.limit_file);
    const auto usage = read_number(dir / h.usage_file);
    if (limit && usage && *limit < no_limit) {
      const std::uint64_t here = *limit > *usage ? *limit - *usage : 0;
      room = room ? std::min(*room, here) : here;
    }
    if (rel.empty()) break;
    rel = rel.has_parent_path() ? rel.parent_path() : std::filesystem::path();
  }
  return room;
}

bool names_memory(const std::string& controllers) {
  std::istringstream in(controllers);
  std::string c;
  while (std::getline(in, c, ','))
    if (c == "memory") return true;
  return false;
}

}  // namespace

std::optional<std::uint64_t> cgroup_memory_room(const std::string& proc_cgroup,
                                                const std::filesystem::path& root) {
  std::vector<hierarchy> found;
  std::istringstream in(proc_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string id = line.substr(0, first);
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (id == "0" && controllers.empty()) {
      for (const auto& mount : {root, root / "unified"})
        found.push_back({mount, path, "memory.max", "memory.current"});
    } else if (names_memory(controllers)) {
      found.push_back({root / "memory", path, "memory.limit_in_bytes", "memory.usage_in_bytes"});
    }
  }
  std::optional<std::uint64_t> room;
  for (const auto& h : found) {
    if (const auto r = room_in(h)) room = room ? std::min(*room, *r) : *r;
  }
  return room;
}

std::optional<std::uint64_t> memory_room() {
  std::optional<std::uint64_t> room;
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      room = kib * 1024;
      break;
    }
  }
  std::ifstream self("/proc/self/cgroup");
  std::ostringstream text;
  text << self.rdbuf();
  if (const auto cg = cgroup_memory_room(text.str(), "/sys/fs/cgroup"))
    room = room ? std::min(*room, *cg) : *cg;
  return room;
}

}  // namespace pairperf
