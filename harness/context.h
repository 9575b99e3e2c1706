#pragma once
// The context block of a results file: what tool, on what hosts, in what environment. Gathered
// on each side (the server sends its own in the hello) so results can be compared later.
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pairperf {

// Gathers once per process what costs time to learn (libfabric's discovery in a child process,
// about 0.3-0.6 s; the loops' clock calibration, 5 ms), so the tool and host contexts that
// follow are cheap and processes forked later (server sessions, case workers) inherit the facts.
// A server calls it before it accepts sessions; `run` in a thread while its local server starts.
// `transports`: the transports this process runs (empty: every built-in one); only their
// libraries are described (and loaded or probed), in this call and in tool_context() after it.
void prepare_context(const std::vector<std::string>& transports = {});

// From now on host_context() carries NCCL's own answer on this host (host/nccl_probe.h: which
// interface each libnccl.so.2 found here takes for its bootstrap, asked in a child with this
// process's environment; once per process, about 15 ms a library with the file in the page
// cache, all within `budget`). A server session calls it when the client's hello asks (doctor,
// mesh), so that its hello reply says it; doctor, mesh and info call it for their own side.
void describe_nccl_in_context(std::chrono::milliseconds budget = std::chrono::seconds(10));

// name, version, git revision, build type, compiler, built-in transports, and the libraries of
// the transports this process runs (prepare_context), each as its transport describes it.
nlohmann::json tool_context();
// hostname, kernel, OS, CPU model and count, memory, interfaces, RDMA devices, GPUs (NVML),
// process; NCCL's answer after describe_nccl_in_context().
nlohmann::json host_context();
// This process's place on the host: pid, boot id, namespace ids (ipc, pid, net, mnt, user, uts)
// and /dev/shm (device, inode, size). Two processes on one host share memory only when these
// allow it (see host/pair.h).
nlohmann::json process_context();
// The environment variables that decide which path bytes take: UCX_*, NCCL_*, GLOO_*,
// CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES. Only those that are set.
nlohmann::json relevant_environment();
// RDMA devices from /sys/class/infiniband: name, node GUID, ports with state and link layer.
nlohmann::json rdma_devices();
// Now as ISO 8601 UTC, e.g. "2026-11-21T16:44:00Z".
std::string utc_timestamp();

// A transport whose two sides' libraries, as a run's context describes them ("tool" and
// "server_tool" hold each side's describe_library() facts), cannot be trusted together
// (registry: peer_mismatch).
struct library_mismatch {
  std::string transport;
  std::string problem, fix;
  std::string client_version, server_version;  // the facts' "version", "?" where none
};
std::vector<library_mismatch> library_mismatches(const nlohmann::json& ctx);

}  // namespace pairperf
