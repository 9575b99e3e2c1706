#include "transports/memory/host_allocator.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace pairperf {

namespace {
std::size_t mapped(std::size_t bytes) noexcept { return bytes == 0 ? 1 : bytes; }
}  // namespace

host_allocator::~host_allocator() {
  for (const auto& [bytes, p] : m_kept) ::munmap(p, mapped(bytes));
}

void host_allocator::forget_inherited() {
  const int self = static_cast<int>(::getpid());
  if (m_kept_by == self) return;
  m_kept.clear();  // still mapped here, untouched: no page of them is copied
  m_kept_bytes = 0;
  m_kept_by = self;
}

std::size_t host_allocator::kept_bytes() const {
  const std::lock_guard<std::mutex> held(m_lock);
  return m_kept_bytes;
}

std::byte* host_allocator::allocate(std::size_t bytes) {
  {
    const std::lock_guard<std::mutex> held(m_lock);
    forget_inherited();
    // The newest of this size: the likeliest still in the caches.
    for (auto it = m_kept.rbegin(); it != m_kept.rend(); ++it) {
      if (it->first != bytes) continue;
      std::byte* p = it->second;
      m_kept_bytes -= bytes;
      m_kept.erase(std::next(it).base());
      return p;
    }
  }
  // mmap gives page alignment and returns memory to the system at once on release; MAP_POPULATE
  // faults every page in now (several times faster than touching them one by one), so that page
  // faults stay out of the timed loop.
  void* p = ::mmap(nullptr, mapped(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    throw std::runtime_error(
        fmt::format("cannot allocate {} bytes of host memory: {}", bytes, std::strerror(errno)));
  }
  return static_cast<std::byte*>(p);
}

void host_allocator::release(std::byte* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes <= kept_buffer_max) {
    const std::lock_guard<std::mutex> held(m_lock);
    try {
      forget_inherited();
      m_kept.emplace_back(bytes, p);
      m_kept_bytes += bytes;
      while (m_kept_bytes > kept_bytes_max) {
        ::munmap(m_kept.front().second, mapped(m_kept.front().first));
        m_kept_bytes -= m_kept.front().first;
        m_kept.pop_front();
      }
      return;
    } catch (const std::bad_alloc&) {  // no room to remember it: let it go
    }
  }
  ::munmap(p, mapped(bytes));
}

void host_allocator::copy_from_host(std::byte* dst, const std::byte* src, std::size_t n) {
  std::memcpy(dst, src, n);
}

void host_allocator::copy_to_host(std::byte* dst, const std::byte* src, std::size_t n) {
  std::memcpy(dst, src, n);
}

}  // namespace pairperf
