/* A test double of the NVIDIA driver's libnvidia-ml.so.1, compiled against the real nvml.h, for
 * the end-to-end tests of pairperf's NVML reader (host/gpus.cpp) where no driver exists: the
 * structures pairperf reads are laid out by NVML's own header here, so a mismatch in pairperf's
 * declarations shows as wrong bus ids or peers in the test. The GPUs it reports come from
 * PAIRPERF_FAKE_NVML, one GPU per ';', fields separated by ',':
 *   UUID,BUS_ID,NAME[,PEER_BUS_ID|PEER_BUS_ID...]
 * Each peer bus id is the far end of one active NVLink. Unset or empty: NVML fails to initialise
 * as it does where the kernel module is not loaded. Only the entry points pairperf uses exist. */
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 16
#define MAX_PEERS NVML_NVLINK_MAX_LINKS

struct fake_gpu {
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  char peers[MAX_PEERS][NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  unsigned n_peers;
};

static struct fake_gpu gpus[MAX_GPUS];
static unsigned n_gpus;

static void copy_field(char *dst, size_t cap, const char *begin, const char *end) {
  size_t n = (size_t)(end - begin);
  if (n >= cap) n = cap - 1;
  memcpy(dst, begin, n);
  dst[n] = '\0';
}

static int parse(const char *spec) {
  n_gpus = 0;
  const char *gpu = spec;
  while (*gpu != '\0' && n_gpus < MAX_GPUS) {
    const char *gpu_end = strchr(gpu, ';');
    if (gpu_end == NULL) gpu_end = gpu + strlen(gpu);
    struct fake_gpu *g = &gpus[n_gpus];
    memset(g, 0, sizeof(*g));
    const char *field = gpu;
    for (int f = 0; f < 4 && field < gpu_end; ++f) {
      const char *field_end = memchr(field, ',', (size_t)(gpu_end - field));
      if (field_end == NULL || f == 3) field_end = gpu_end;
      if (f == 0) copy_field(g->uuid, sizeof(g->uuid), field, field_end);
      if (f == 1) copy_field(g->bus_id, sizeof(g->bus_id), field, field_end);
      if (f == 2) copy_field(g->name, sizeof(g->name), field, field_end);
      if (f == 3) {
        const char *peer = field;
        while (peer < field_end && g->n_peers < MAX_PEERS) {
          const char *peer_end = memchr(peer, '|', (size_t)(field_end - peer));
          if (peer_end == NULL) peer_end = field_end;
          copy_field(g->peers[g->n_peers++], NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE, peer, peer_end);
          peer = peer_end + 1;
        }
      }
      field = field_end + 1;
    }
    if (g->uuid[0] == '\0' || g->bus_id[0] == '\0') return -1;
    ++n_gpus;
    gpu = *gpu_end == ';' ? gpu_end + 1 : gpu_end;
  }
  return n_gpus > 0 ? 0 : -1;
}

static nvmlReturn_t text(char *out, unsigned int length, const char *value) {
  if (out == NULL || strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  strcpy(out, value);
  return NVML_SUCCESS;
}

static struct fake_gpu *gpu_of(nvmlDevice_t device) {
  struct fake_gpu *g = (struct fake_gpu *)device;
  return (g >= gpus && g < gpus + n_gpus) ? g : NULL;
}

nvmlReturn_t nvmlInit_v2(void) {
  const char *spec = getenv("PAIRPERF_FAKE_NVML");
  if (spec == NULL || parse(spec) != 0) return NVML_ERROR_DRIVER_NOT_LOADED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

const char *nvmlErrorString(nvmlReturn_t result) {
  return result == NVML_ERROR_DRIVER_NOT_LOADED ? "Driver Not Loaded (fake NVML: PAIRPERF_FAKE_NVML unset)"
                                                : "fake NVML error";
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  return text(version, length, "580.00.00-fake");
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  *count = n_gpus;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  if (index >= n_gpus) return NVML_ERROR_INVALID_ARGUMENT;
  *device = (nvmlDevice_t)&gpus[index];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  struct fake_gpu *g = gpu_of(device);
  return g == NULL ? NVML_ERROR_INVALID_ARGUMENT : text(uuid, length, g->uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  struct fake_gpu *g = gpu_of(device);
  return g == NULL ? NVML_ERROR_INVALID_ARGUMENT : text(name, length, g->name);
}

static void fill_pci(nvmlPciInfo_t *pci, const char *bus_id) {
  memset(pci, 0x5a, sizeof(*pci)); /* garbage where a field is not set, as a driver may leave */
  snprintf(pci->busId, sizeof(pci->busId), "%s", bus_id);
  snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%.15s", bus_id + (strlen(bus_id) > 12 ? 4 : 0));
  pci->domain = 0;
  pci->bus = 0;
  pci->device = 0;
  pci->pciDeviceId = 0x233010de;
  pci->pciSubSystemId = 0;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
  struct fake_gpu *g = gpu_of(device);
  if (g == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  fill_pci(pci, g->bus_id);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive) {
  struct fake_gpu *g = gpu_of(device);
  if (g == NULL) return NVML_ERROR_INVALID_ARGUMENT;
  if (g->n_peers == 0) return NVML_ERROR_NOT_SUPPORTED; /* a PCIe card */
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  *isActive = link < g->n_peers ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci) {
  struct fake_gpu *g = gpu_of(device);
  if (g == NULL || link >= g->n_peers) return NVML_ERROR_INVALID_ARGUMENT;
  fill_pci(pci, g->peers[link]);
  return NVML_SUCCESS;
}
