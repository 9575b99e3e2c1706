#include "transports/memory/cuda_allocator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "transports/memory/gpu_select.h"

namespace pairperf {
namespace {

int g_device = -1;

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(rc)));
}

std::string uuid_of(const cudaDeviceProp& p) {
  std::array<unsigned char, 16> b{};
  std::memcpy(b.data(), p.uuid.bytes, 16);
  return format_gpu_uuid(b);
}

std::string bus_id_of(int device) {
  std::array<char, 32> id{};
  if (cudaDeviceGetPCIBusId(id.data(), static_cast<int>(id.size()), device) != cudaSuccess)
    return {};
  return id.data();
}

}  // namespace

std::string cuda_allocator::select_device() {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  int count = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess) {
    return fmt::format(
        "no usable CUDA device: {}{}", cudaGetErrorString(rc),
        rc == cudaErrorInsufficientDriver
            ? fmt::format(
                  " (no NVIDIA driver loaded here, or one older than the CUDA {}.{} runtime this "
                  "pairperf was built with)",
                  CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10)
            : std::string());
  }
  if (count == 0) return "no CUDA device visible (CUDA_VISIBLE_DEVICES?)";
  const gpu_selector& s = gpu_selection();
  int chosen = -1;
  if (s.how == gpu_selector::kind::index) {
    if (s.index >= count)
      return fmt::format("--gpu {}: only {} device(s) visible (CUDA_VISIBLE_DEVICES applies)",
                         s.index, count);
    chosen = s.index;
  } else {
    for (int i = 0; i < count && chosen < 0; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) == cudaSuccess && gpu_matches(s, uuid_of(p), bus_id_of(i)))
        chosen = i;
    }
    if (chosen < 0)
      return fmt::format("--gpu {}: no visible device has it ({} visible)", s.text, count);
  }
  if (const cudaError_t rc = cudaSetDevice(chosen); rc != cudaSuccess)
    return fmt::format("cudaSetDevice({}): {}", chosen, cudaGetErrorString(rc));
  g_device = chosen;
  return {};
}

std::string cuda_allocator::describe_device() {
  if (g_device < 0) return "(none)";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, g_device) != cudaSuccess)
    return fmt::format("device {}", g_device);
  return fmt::format("device {} {} {} {}", g_device, p.name, uuid_of(p), bus_id_of(g_device));
}

std::byte* cuda_allocator::allocate(std::size_t bytes) {
  if (g_device < 0) {
    if (const std::string why = select_device(); !why.empty()) throw std::runtime_error(why);
  }
  check(cudaSetDevice(g_device), "cudaSetDevice");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  check(cudaMemset(p, 0, bytes), "cudaMemset");
  return static_cast<std::byte*>(p);
}

void cuda_allocator::release(std::byte* p, std::size_t /*bytes*/) noexcept {
  if (p != nullptr) cudaFree(p);
}

void cuda_allocator::copy_from_host(std::byte* dst, const std::byte* src, std::size_t n) {
  check(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
}

void cuda_allocator::copy_to_host(std::byte* dst, const std::byte* src, std::size_t n) {
  check(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
}

}  // namespace pairperf
