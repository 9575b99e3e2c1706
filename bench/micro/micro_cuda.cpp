// cudaMemcpy device-to-device on one GPU: the ceiling that UCX's cuda_ipc transport is measured
// against (scripts/compare-peers --suite gpu). cuda_ipc's rendezvous is one such copy, issued by
// the receiver from the sender's buffer, so a tag_bw of N bytes over cuda_ipc cannot beat a
// cudaMemcpy of N bytes on the same device. Bytes are counted once per copy, as pairperf counts
// them. Timed with CUDA events (manual time), device 0 of those CUDA_VISIBLE_DEVICES leaves.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdint>

namespace pairperf {
namespace {

// Why no copy can run here ("" when one can).
std::string no_device_reason() {
  int count = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess)
    return fmt::format("no usable CUDA device: {}", cudaGetErrorString(rc));
  if (count == 0) return "no CUDA device visible";
  return {};
}

void BM_cudaMemcpy_D2D(benchmark::State& state) {
  if (const std::string why = no_device_reason(); !why.empty()) {
    state.SkipWithError(why.c_str());
    for (auto _ : state) {
    }
    return;
  }
  const auto size = static_cast<std::size_t>(state.range(0));
  void* src = nullptr;
  void* dst = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cudaSetDevice(0);
  const bool ok = cudaMalloc(&src, size) == cudaSuccess && cudaMalloc(&dst, size) == cudaSuccess &&
                  cudaMemset(src, 0x5a, size) == cudaSuccess &&
                  cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess;
  if (!ok) {
    state.SkipWithError(cudaGetErrorString(cudaGetLastError()));
  } else {
    cudaMemcpy(dst, src, size, cudaMemcpyDeviceToDevice);  // warm-up: first-touch and clocks
    cudaDeviceSynchronize();
    for (auto _ : state) {
      cudaEventRecord(start);
      cudaMemcpy(dst, src, size, cudaMemcpyDeviceToDevice);
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      state.SetIterationTime(static_cast<double>(ms) / 1e3);
    }
    if (const cudaError_t rc = cudaGetLastError(); rc != cudaSuccess)
      state.SkipWithError(cudaGetErrorString(rc));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                            static_cast<std::int64_t>(size));
  }
  if (start != nullptr) cudaEventDestroy(start);
  if (stop != nullptr) cudaEventDestroy(stop);
  cudaFree(src);
  cudaFree(dst);
}
BENCHMARK(BM_cudaMemcpy_D2D)->RangeMultiplier(4)->Range(1 << 20, 256 << 20)->UseManualTime();

}  // namespace
}  // namespace pairperf
