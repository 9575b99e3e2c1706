#pragma once
// The few NVML types, constants and entry points pairperf uses, as NVML's API reference defines
// them. pairperf loads libnvidia-ml.so.1 with dlopen, so it builds without nvml.h and runs where
// NVML is absent. tests/unit/test_nvml_abi.cpp checks every size, offset and constant here against
// the real nvml.h wherever one is found at build time (scripts/build-ucx-cuda fetches it).
#include <cstddef>

namespace pairperf::nvml_abi {

using nvml_return = int;  // nvmlReturn_t (an enum of int size)
using nvml_device = struct nvml_device_st*;
constexpr nvml_return success = 0;             // NVML_SUCCESS
constexpr unsigned max_links = 18;             // NVML_NVLINK_MAX_LINKS
constexpr unsigned feature_enabled = 1;        // NVML_FEATURE_ENABLED (nvmlEnableState_t)
constexpr std::size_t text_buffer_size = 96;   // >= the UUID, name and driver version buffers

struct pci_info {  // nvmlPciInfo_t, the layout nvmlDeviceGetPciInfo_v3 fills
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

struct api {
  nvml_return (*init)();                                     // nvmlInit_v2
  nvml_return (*shutdown)();                                 // nvmlShutdown
  const char* (*error_string)(nvml_return);                  // nvmlErrorString
  nvml_return (*count)(unsigned*);                           // nvmlDeviceGetCount_v2
  nvml_return (*by_index)(unsigned, nvml_device*);           // nvmlDeviceGetHandleByIndex_v2
  nvml_return (*uuid)(nvml_device, char*, unsigned);         // nvmlDeviceGetUUID
  nvml_return (*name)(nvml_device, char*, unsigned);         // nvmlDeviceGetName
  nvml_return (*pci)(nvml_device, pci_info*);                // nvmlDeviceGetPciInfo_v3
  nvml_return (*driver)(char*, unsigned);                    // nvmlSystemGetDriverVersion
  nvml_return (*link_state)(nvml_device, unsigned, unsigned*);     // nvmlDeviceGetNvLinkState
  nvml_return (*link_remote_pci)(nvml_device, unsigned, pci_info*);  // ..GetNvLinkRemotePciInfo_v2
};

}  // namespace pairperf::nvml_abi
