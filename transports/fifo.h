#pragma once
// A FIFO ring for transports' queues of pending operations and completions: grows by doubling
// when full (only while warming up, since the window bounds what is in flight), never shrinks,
// and so never allocates in a steady timed loop.
#include <cstddef>
#include <vector>

namespace pairperf {

template <class T>
class fifo {
 public:
  void push(const T& item) {
    if (m_count == m_items.size()) grow();
    m_items[(m_head + m_count) & (m_items.size() - 1)] = item;
    ++m_count;
  }
  [[nodiscard]] T& front() noexcept { return m_items[m_head]; }
  void pop() noexcept {
    m_head = (m_head + 1) & (m_items.size() - 1);
    --m_count;
  }
  [[nodiscard]] bool empty() const noexcept { return m_count == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return m_count; }

 private:
  [[gnu::noinline]] void grow() {
    std::vector<T> bigger(m_items.size() * 2);
    for (std::size_t i = 0; i < m_count; ++i)
      bigger[i] = m_items[(m_head + i) & (m_items.size() - 1)];
    m_items.swap(bigger);
    m_head = 0;
  }

  std::vector<T> m_items = std::vector<T>(64);  // a power of two
  std::size_t m_head = 0;
  std::size_t m_count = 0;
};

}  // namespace pairperf
