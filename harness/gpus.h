#pragma once
// The GPUs this process sees, from NVML loaded with dlopen: the binary runs (and says why there
// is nothing) where the driver or NVML is absent. NVML enumerates the GPUs the container was
// given (NVIDIA_VISIBLE_DEVICES), not CUDA_VISIBLE_DEVICES' selection among them.
#include <string>
#include <vector>

#include "harness/netvars.h"

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
