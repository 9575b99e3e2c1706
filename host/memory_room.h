#pragma once
// How much memory this process may still take before something refuses it: the kernel's
// MemAvailable, and each memory cgroup limit above the process (cgroup v2's memory.max, or v1's
// memory.limit_in_bytes on hosts that still mount the v1 hierarchy), less what that cgroup already
// uses. A server left running as a DaemonSet lives under its pod's limit: sized by MemAvailable
// alone, one large case gets it OOM-killed.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace pairperf {

// What the cgroups of a process allow beyond what they use: the least headroom of its cgroup and
// every ancestor with a limit, for the v2 entry ("0::/path") and a v1 memory entry
// ("N:...memory...:/path") of `proc_cgroup` (the text of /proc/<pid>/cgroup), with the
// hierarchies mounted under `root` (v2 at root, or root/unified beside v1's root/memory). A level
// whose folder is missing is passed over (a container without its own cgroup namespace sees the
// host's path; its own cgroup is the mount's root). Nothing when no level sets a limit.
std::optional<std::uint64_t> cgroup_memory_room(const std::string& proc_cgroup,
                                                const std::filesystem::path& root);

// MemAvailable from /proc/meminfo and this process's cgroups under /sys/fs/cgroup, whichever is
// less; nothing if neither can be read.
std::optional<std::uint64_t> memory_room();

}  // namespace pairperf
