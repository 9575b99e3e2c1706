#pragma once
#include "transports/memory/allocator.h"

namespace pairperf {

// Page-aligned host memory, populated at allocation so that page faults stay out of the timed
// loop (the kernel places the pages by the calling thread's NUMA policy).
class host_allocator final : public allocator {
 public:
  [[nodiscard]] memory_type type() const noexcept override { return memory_type::host; }
  std::byte* allocate(std::size_t bytes) override;
  void release(std::byte* p, std::size_t bytes) noexcept override;
  [[nodiscard]] bool host_accessible() const noexcept override { return true; }
  void copy_from_host(std::byte* dst, const std::byte* src, std::size_t n) override;
  void copy_to_host(std::byte* dst, const std::byte* src, std::size_t n) override;
};

}  // namespace pairperf
