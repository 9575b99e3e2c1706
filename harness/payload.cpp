#include "harness/payload.h"

#include <bit>
#include <cstring>

#include "transports/memory/allocator.h"

namespace pairperf {
namespace {

// A word per 8 bytes: distinct per message and per offset, cheap to compute.
inline std::uint64_t pattern_word(std::uint64_t seq, std::uint64_t word) noexcept {
  return (seq + 1) * 0x9E3779B97F4A7C15ULL ^ (word * 0xBF58476D1CE4E5B9ULL);
}

}  // namespace

void fill_pattern(std::byte* data, std::size_t n, std::uint64_t seq) noexcept {
  std::size_t i = 0;
  for (std::uint64_t w = 0; i + 8 <= n; i += 8, ++w) {
    const std::uint64_t v = pattern_word(seq, w);
    std::memcpy(data + i, &v, 8);
  }
  if (i < n) {
    const std::uint64_t v = pattern_word(seq, n / 8);
    std::memcpy(data + i, &v, n - i);
  }
}

std::uint64_t count_corrupt(const std::byte* data, std::size_t n, std::uint64_t seq) noexcept {
  std::uint64_t bad = 0;
  std::size_t i = 0;
  for (std::uint64_t w = 0; i + 8 <= n; i += 8, ++w) {
    std::uint64_t got = 0;
    std::memcpy(&got, data + i, 8);
    const std::uint64_t diff = got ^ pattern_word(seq, w);
    if (diff != 0) {
      for (int b = 0; b < 8; ++b) bad += ((diff >> (8 * b)) & 0xFF) != 0 ? 1 : 0;
    }
  }
  if (i < n) {
    const std::uint64_t v = pattern_word(seq, n / 8);
    std::byte want[8];
    std::memcpy(want, &v, 8);
    for (std::size_t k = 0; i + k < n; ++k) bad += data[i + k] != want[k] ? 1 : 0;
  }
  return bad;
}

payload_checker::payload_checker(allocator& send_alloc, allocator& recv_alloc, std::size_t size)
    : m_send(&send_alloc), m_recv(&recv_alloc), m_size(size) {
  if (!send_alloc.host_accessible() || !recv_alloc.host_accessible()) m_staging.resize(size);
}

void payload_checker::fill(std::byte* buf, std::uint64_t seq) {
  if (m_send->host_accessible()) {
    fill_pattern(buf, m_size, seq);
    return;
  }
  fill_pattern(m_staging.data(), m_size, seq);
  m_send->copy_from_host(buf, m_staging.data(), m_size);
}

std::uint64_t payload_checker::check(const std::byte* buf, std::uint64_t seq) {
  const std::byte* host = buf;
  if (!m_recv->host_accessible()) {
    m_recv->copy_to_host(m_staging.data(), buf, m_size);
    host = m_staging.data();
  }
  const std::uint64_t bad = count_corrupt(host, m_size, seq);
  ++m_checked;
  m_corrupt += bad;
  return bad;
}

}  // namespace pairperf
