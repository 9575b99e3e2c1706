// host/nvml_abi.h against the real nvml.h: pairperf reads NVML through dlopen with its own
// declarations, so a wrong size or offset would read garbage from a real driver. Built only where
// CMake finds nvml.h (PAIRPERF_NVML_INCLUDE).
#include <gtest/gtest.h>
#include <nvml.h>

#include <cstddef>
#include <type_traits>

#include "host/nvml_abi.h"

namespace pairperf::nvml_abi {
namespace {

static_assert(sizeof(nvmlReturn_t) == sizeof(nvml_return));
static_assert(NVML_SUCCESS == success);
static_assert(NVML_NVLINK_MAX_LINKS == max_links);
static_assert(NVML_FEATURE_ENABLED == feature_enabled);
static_assert(sizeof(nvmlEnableState_t) == sizeof(unsigned));
static_assert(sizeof(nvmlDevice_t) == sizeof(nvml_device));
static_assert(text_buffer_size >= NVML_DEVICE_UUID_V2_BUFFER_SIZE);
static_assert(text_buffer_size >= NVML_DEVICE_NAME_V2_BUFFER_SIZE);
static_assert(text_buffer_size >= NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);

static_assert(sizeof(nvmlPciInfo_t) == sizeof(pci_info));
static_assert(offsetof(nvmlPciInfo_t, busIdLegacy) == offsetof(pci_info, bus_id_legacy));
static_assert(offsetof(nvmlPciInfo_t, domain) == offsetof(pci_info, domain));
static_assert(offsetof(nvmlPciInfo_t, bus) == offsetof(pci_info, bus));
static_assert(offsetof(nvmlPciInfo_t, device) == offsetof(pci_info, device));
static_assert(offsetof(nvmlPciInfo_t, pciDeviceId) == offsetof(pci_info, pci_device_id));
static_assert(offsetof(nvmlPciInfo_t, pciSubSystemId) == offsetof(pci_info, pci_subsystem_id));
static_assert(offsetof(nvmlPciInfo_t, busId) == offsetof(pci_info, bus_id));
static_assert(sizeof(nvmlPciInfo_t::busId) == sizeof(pci_info::bus_id));
static_assert(sizeof(nvmlPciInfo_t::busIdLegacy) == sizeof(pci_info::bus_id_legacy));

// The entry points by their versioned names, as host/gpus.cpp looks them up: each must take
// arguments of the sizes and kinds our table declares.
template <class R, class... A>
constexpr std::size_t arity(R (*)(A...)) {
  return sizeof...(A);
}
static_assert(arity(&nvmlInit_v2) == 0);
static_assert(arity(&nvmlDeviceGetCount_v2) == 1);
static_assert(arity(&nvmlDeviceGetHandleByIndex_v2) == 2);
static_assert(arity(&nvmlDeviceGetUUID) == 3);
static_assert(arity(&nvmlDeviceGetName) == 3);
static_assert(arity(&nvmlDeviceGetPciInfo_v3) == 2);
static_assert(arity(&nvmlSystemGetDriverVersion) == 2);
static_assert(arity(&nvmlDeviceGetNvLinkState) == 3);
static_assert(arity(&nvmlDeviceGetNvLinkRemotePciInfo_v2) == 3);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPciInfo_v3),
                             nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*)>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2),
                             nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlPciInfo_t*)>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetNvLinkState),
                             nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlEnableState_t*)>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetUUID), nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>);

TEST(NvmlAbi, MatchesTheRealHeader) {
  // The checks above are compile-time; this records at run time which header they were made on.
  EXPECT_EQ(sizeof(nvmlPciInfo_t), sizeof(pci_info));
  EXPECT_GE(NVML_API_VERSION, 11);
}

}  // namespace
}  // namespace pairperf::nvml_abi
