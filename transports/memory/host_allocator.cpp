#include "transports/memory/host_allocator.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace pairperf {

std::byte* host_allocator::allocate(std::size_t bytes) {
  // mmap gives page alignment and returns memory to the system at once on release; MAP_POPULATE
  // faults every page in now (several times faster than touching them one by one), so that page
  // faults stay out of the timed loop.
  void* p = ::mmap(nullptr, bytes == 0 ? 1 : bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) {
    throw std::runtime_error(
        fmt::format("cannot allocate {} bytes of host memory: {}", bytes, std::strerror(errno)));
  }
  return static_cast<std::byte*>(p);
}

void host_allocator::release(std::byte* p, std::size_t bytes) noexcept {
  if (p != nullptr) ::munmap(p, bytes == 0 ? 1 : bytes);
}

void host_allocator::copy_from_host(std::byte* dst, const std::byte* src, std::size_t n) {
  std::memcpy(dst, src, n);
}

void host_allocator::copy_to_host(std::byte* dst, const std::byte* src, std::size_t n) {
  std::memcpy(dst, src, n);
}

}  // namespace pairperf
