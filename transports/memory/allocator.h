#pragma once
// Allocators, one per memory type (ucx_perf_allocator). A memory type is an allocator, not a
// transport: "GPU data through UCX" is the UCX transport with the cuda allocator.
#include <cstddef>
#include <memory>
#include <string>

#include "core/config.h"

namespace pairperf {

class allocator {
 public:
  virtual ~allocator() = default;
  [[nodiscard]] virtual memory_type type() const noexcept = 0;
  // Throws std::runtime_error when the memory cannot be had.
  virtual std::byte* allocate(std::size_t bytes) = 0;
  virtual void release(std::byte* p, std::size_t bytes) noexcept = 0;
  // Whether the CPU can read and write this memory directly (validation then needs no copies).
  [[nodiscard]] virtual bool host_accessible() const noexcept = 0;
  // Copies for validation staging; n bytes.
  virtual void copy_from_host(std::byte* dst, const std::byte* src, std::size_t n) = 0;
  virtual void copy_to_host(std::byte* dst, const std::byte* src, std::size_t n) = 0;
};

// An allocation owned by its allocator.
class buffer {
 public:
  buffer(allocator& alloc, std::size_t bytes);
  buffer(buffer&& other) noexcept;
  buffer& operator=(buffer&&) = delete;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer();

  [[nodiscard]] std::byte* data() const noexcept { return m_data; }
  [[nodiscard]] std::size_t size() const noexcept { return m_size; }
  [[nodiscard]] allocator& owner() const noexcept { return *m_alloc; }

 private:
  allocator* m_alloc;
  std::byte* m_data;
  std::size_t m_size;
};

// The allocator for a memory type, or nullptr with `why_not` set when this build or host has
// none (e.g. cuda without PAIRPERF_WITH_CUDA).
allocator* find_allocator(memory_type type, std::string& why_not);

}  // namespace pairperf
