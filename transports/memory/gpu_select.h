#pragma once
// Which GPU a side uses: `--gpu` takes an index (among the devices CUDA_VISIBLE_DEVICES leaves
// visible, as CUDA numbers them), a UUID or a prefix of one ("GPU-4650fca3"), or a PCI bus id
// ("0000:18:00.0"). Pure parsing here; the CUDA allocator resolves it against the devices.
#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace pairperf {

struct gpu_selector {
  enum class kind { index, uuid, bus_id } how = kind::index;
  int index = 0;
  std::string text;  // the UUID (prefix) or bus id, normalized to lower case
};

// "" = device 0. Throws usage_error on what is none of the three.
gpu_selector parse_gpu_selector(const std::string& text);

// cudaDeviceProp::uuid's 16 bytes as nvidia-smi writes them:
// GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
std::string format_gpu_uuid(const std::array<unsigned char, 16>& bytes);

// Whether a device with this UUID and bus id is the one selected.
bool gpu_matches(const gpu_selector& s, const std::string& uuid, const std::string& bus_id);

// The process-wide choice (run --gpu on the client, server --gpu on the server), set before the
// first allocation.
void set_gpu_selection(const gpu_selector& s);
const gpu_selector& gpu_selection();

}  // namespace pairperf
