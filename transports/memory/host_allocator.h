#pragma once
#include <cstddef>
#include <deque>
#include <mutex>
#include <utility>

#include "transports/memory/allocator.h"

namespace pairperf {

// Page-aligned host memory, populated at allocation so that page faults stay out of the timed
// loop (the kernel places the pages by the calling thread's NUMA policy).
//
// Released buffers are kept for a later allocation of the same size: a sweep repeats its sizes
// for every test, TLS set and interface, and populating costs about 0.3 ms a MiB here (page
// faults and zeroing), for each of a case's buffers on both sides, one side after the other. At
// most kept_bytes_max in all (the oldest go first) and none larger than kept_buffer_max, so that
// a process keeps little memory it does not use; a kept buffer holds what its last case left.
class host_allocator final : public allocator {
 public:
  static constexpr std::size_t kept_buffer_max = std::size_t{16} << 20;
  static constexpr std::size_t kept_bytes_max = std::size_t{64} << 20;

  host_allocator() = default;
  host_allocator(const host_allocator&) = delete;
  host_allocator& operator=(const host_allocator&) = delete;
  ~host_allocator() override;

  [[nodiscard]] memory_type type() const noexcept override { return memory_type::host; }
  std::byte* allocate(std::size_t bytes) override;
  void release(std::byte* p, std::size_t bytes) noexcept override;
  [[nodiscard]] bool host_accessible() const noexcept override { return true; }
  void copy_from_host(std::byte* dst, const std::byte* src, std::size_t n) override;
  void copy_to_host(std::byte* dst, const std::byte* src, std::size_t n) override;
  // Bytes held for reuse now.
  [[nodiscard]] std::size_t kept_bytes() const;

 private:
  // Forgets what a parent kept before it forked this process: its buffers are shared with the
  // parent copy-on-write, and the first write to each page would fault in a timed loop.
  void forget_inherited();

  mutable std::mutex m_lock;  // mesh ranks allocate from several threads
  std::deque<std::pair<std::size_t, std::byte*>> m_kept;  // (size, buffer), oldest first
  std::size_t m_kept_bytes = 0;
  int m_kept_by = 0;  // the process that kept them
};

}  // namespace pairperf
