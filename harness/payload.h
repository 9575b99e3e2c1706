#pragma once
// --validate: message k carries a pattern derived from k, and the receiver checks every byte.
// Works for any memory type through the allocator's staging copies.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "patterns/pattern_types.h"

namespace pairperf {

class allocator;

// Writes the pattern of message `seq` into host memory.
void fill_pattern(std::byte* data, std::size_t n, std::uint64_t seq) noexcept;
// Counts the bytes of host memory that differ from the pattern of message `seq`.
std::uint64_t count_corrupt(const std::byte* data, std::size_t n, std::uint64_t seq) noexcept;

// Fills and checks buffers of one allocator's memory type, staging through host memory when the
// CPU cannot touch the buffer directly.
class payload_checker final : public message_check {
 public:
  payload_checker(allocator& send_alloc, allocator& recv_alloc, std::size_t size);
  void fill(std::byte* buf, std::uint64_t seq) override;
  // Returns the corrupt byte count of this message and adds it to the totals.
  std::uint64_t check(const std::byte* buf, std::uint64_t seq) override;

  [[nodiscard]] std::uint64_t messages_checked() const noexcept { return m_checked; }
  [[nodiscard]] std::uint64_t corrupt_bytes() const noexcept { return m_corrupt; }

 private:
  allocator* m_send;
  allocator* m_recv;
  std::size_t m_size;
  std::vector<std::byte> m_staging;

  std::uint64_t m_checked = 0;
  std::uint64_t m_corrupt = 0;
};

}  // namespace pairperf
