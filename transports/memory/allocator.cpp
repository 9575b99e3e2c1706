#include "transports/memory/allocator.h"

#include "transports/memory/host_allocator.h"
#if PAIRPERF_HAVE_CUDA
#include "transports/memory/cuda_allocator.h"
#endif

namespace pairperf {

buffer::buffer(allocator& alloc, std::size_t bytes)
    : m_alloc(&alloc), m_data(alloc.allocate(bytes)), m_size(bytes) {}

buffer::buffer(buffer&& other) noexcept
    : m_alloc(other.m_alloc), m_data(other.m_data), m_size(other.m_size) {
  other.m_data = nullptr;
  other.m_size = 0;
}

buffer::~buffer() { m_alloc->release(m_data, m_size); }

allocator* find_allocator(memory_type type, std::string& why_not) {
  static host_allocator host;
  switch (type) {
    case memory_type::host:
      return &host;
    case memory_type::cuda: {
#if PAIRPERF_HAVE_CUDA
      static cuda_allocator cuda;
      static const std::string why = cuda_allocator::select_device();
      if (!why.empty()) {
        why_not = why;
        return nullptr;
      }
      return &cuda;
#else
      why_not =
          "this pairperf was built without CUDA support (configure with -DPAIRPERF_WITH_CUDA=ON)";
      return nullptr;
#endif
    }
  }
  why_not = "unknown memory type";
  return nullptr;
}

}  // namespace pairperf
