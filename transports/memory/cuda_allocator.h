#pragma once
// GPU memory through the CUDA runtime (linked statically: the binary starts where no CUDA is
// installed, and this allocator then reports why it has none). Validation stages through host
// memory with cudaMemcpy.
#include <string>

#include "transports/memory/allocator.h"

namespace pairperf {

class cuda_allocator final : public allocator {
 public:
  [[nodiscard]] memory_type type() const noexcept override { return memory_type::cuda; }
  std::byte* allocate(std::size_t bytes) override;
  void release(std::byte* p, std::size_t bytes) noexcept override;
  [[nodiscard]] bool host_accessible() const noexcept override { return false; }
  void copy_from_host(std::byte* dst, const std::byte* src, std::size_t n) override;
  void copy_to_host(std::byte* dst, const std::byte* src, std::size_t n) override;

  // Resolves --gpu against the visible devices and makes it current; "" when that worked, else
  // why there is no GPU to use (no driver, no device, no such UUID...).
  static std::string select_device();
  // The selected device's facts for provenance: index, name, UUID, bus id.
  static std::string describe_device();
};

}  // namespace pairperf
