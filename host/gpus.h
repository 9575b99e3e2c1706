#pragma once
// The GPUs this process sees, from NVML loaded with dlopen: the binary runs (and says why there
// is nothing) where the driver or NVML is absent. NVML enumerates the GPUs the container was
// given (NVIDIA_VISIBLE_DEVICES), not CUDA_VISIBLE_DEVICES' selection among them.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "host/netvars.h"

namespace pairperf {

struct gpu_inventory {
  bool available = false;  // NVML loaded and initialised
  std::string reason;      // why not, when unavailable
  std::string driver;      // driver version
  std::vector<gpu_info> gpus;
};

// Never throws; takes a few milliseconds where NVML is present.
gpu_inventory read_gpus();

void to_json(nlohmann::json& j, const gpu_inventory& inv);

// `nvidia-smi topo -m`, the second source of GPU topology: the link between every two GPUs (X,
// NV18, PIX, PXB, PHB, NODE, SYS) and from GPUs to NICs, the NIC legend, CPU affinity.
struct gpu_topology {
  std::vector<std::string> gpus;                   // "GPU0", ...
  std::vector<std::string> nics;                   // "NIC0", ...
  std::map<std::string, std::string> nic_devices;  // "NIC0" -> "mlx5_0"
  std::vector<std::vector<std::string>> links;     // [gpu][gpu or nic column]
  std::vector<std::string> cpu_affinity;           // per GPU
};
// Throws std::runtime_error when the text has no GPU matrix.
gpu_topology parse_topo_matrix(const std::string& text);
// The NVLink count between two GPUs of the matrix ("NV18" -> 18), 0 when the link is not NVLink.
unsigned nvlinks_between(const gpu_topology& t, std::size_t a, std::size_t b);
// One line per GPU: its NVLink peers, the NICs nearest to it (PIX, then PXB, then PHB: what NCCL
// and UCX should pair with a rank on that GPU), and its CPU affinity. E.g.
// "GPU0: NV18 to GPU1-GPU7; nearest NIC: NIC0 ibp14s0 (PIX); CPUs 0-47,96-143".
std::vector<std::string> describe_topology(const gpu_topology& t);
void to_json(nlohmann::json& j, const gpu_topology& t);

// `nvidia-smi topo -m` run here (bounded: 10 s), parsed. `why` says why there is none (no
// nvidia-smi, it failed, no matrix in its output).
std::optional<gpu_topology> read_topology(std::string& why);

// How a GPU row's bytes really moved, from its provenance: cuda_ipc is the fast path between GPUs
// of one host; tcp, UCX's software emulation, a cuda_copy pipeline or copy-in/copy-out through
// host memory is a fallback. Empty verdict for rows without GPU memory.
struct gpu_path_verdict {
  std::string verdict;  // "fast path", "fallback", "network (RDMA)", "unknown", ""
  std::string why;
};
gpu_path_verdict classify_gpu_path(const case_result& r);

// The lanes of a row's endpoint that can carry its data: all of them, except cuda_ipc where one
// side's buffer is in host memory (cuda_ipc maps GPU buffers only). --expect transport= and the
// verdict above both judge these.
std::vector<lane> carrying_lanes(const case_result& r);

// What the two sides' GPUs allow between them (same host: cuda_ipc, over NVLink or PCIe;
// different hosts: the network), and what stands in the way.
struct gpu_pair {
  std::string expected;  // e.g. "cuda_ipc over NVLink (NV18)", "network", ""
  std::string why;
  std::string problem;  // non-empty: a finding
  std::string fix;
};
// `same_host` from pair_facts; either list may be empty (no GPU on that side).
gpu_pair judge_gpu_pair(bool same_host, const std::vector<gpu_info>& client,
                        const std::vector<gpu_info>& server);

}  // namespace pairperf
