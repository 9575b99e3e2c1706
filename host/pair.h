#pragma once
// What two processes' host facts (context.h's host_context, one from each side) say about the
// paths between them: are they on one host (one boot id), do they share the IPC and PID
// namespaces and /dev/shm that shared memory needs, and so which path UCX should take for host
// memory. Pure functions of the two JSON blocks, so every case is unit-testable.
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace pairperf {

struct pair_facts {
  bool known = false;      // both sides reported their process facts
  bool same_host = false;  // one boot id: one kernel
  bool same_ipc = false;   // IPC namespace: SysV segments, POSIX shm in the same /dev/shm
  bool same_pid = false;   // PID namespace: CMA (process_vm_readv) and /proc/<pid>/fd links
  bool same_net = false;   // network namespace: loopback and abstract sockets
  bool same_shm = false;   // the same /dev/shm file system (device and inode)
  std::string client_ipc, server_ipc, client_pid_ns, server_pid_ns;
  std::optional<std::uint64_t> client_shm_bytes, server_shm_bytes;
};

void to_json(nlohmann::json& j, const pair_facts& f);

// client_host and server_host are host_context() blocks (the server's arrives in its hello).
pair_facts compare_hosts(const nlohmann::json& client_host, const nlohmann::json& server_host);

// The path host memory should take between the pair, and why.
struct expected_path {
  std::string kind;  // "shared memory", "network" or "unknown"
  std::string why;
};
expected_path expect_host_path(const pair_facts& f);

// Why shared memory is impossible for this pair and how to fix it; nullopt when nothing in the
// facts forbids it (different hosts, or one host with everything shared).
struct blocked_path {
  std::string cause;
  std::string fix;
};
std::optional<blocked_path> shared_memory_blocked(const pair_facts& f);

// Compares a measured UCX case (default UCX_TLS) with the expected path.
struct path_verdict {
  // "fast path", "fallback to <the network lane's transport, e.g. tcp>", "fallback", "failed",
  // "network"
  std::string verdict;
  std::string expected;
  std::string seen;  // the data lanes, or the error
  std::string cause;
  std::string fix;
};
void to_json(nlohmann::json& j, const path_verdict& v);
path_verdict judge_host_path(const pair_facts& f, const case_result& measured);

}  // namespace pairperf
