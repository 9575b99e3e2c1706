#pragma once
// The server's memory of clients it turned away while its queue was full (`busy`): each gets a
// ticket, and coming back with it keeps its place ahead of later clients (first come, first
// served across retries). Bounded in size; tickets are forgotten when their holders do not return.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "core/socket.h"

namespace pairperf {

class ticket_book {
 public:
  explicit ticket_book(std::size_t capacity) : m_capacity(capacity) {}

  // Forgets the tickets expired at `now`; then the number of live tickets issued before `ticket`
  // (all of them for a newcomer, or a ticket already forgotten).
  std::size_t ahead_of(std::optional<std::uint64_t> ticket, deadline_t now);
  // The client with this ticket was let in.
  void redeem(std::uint64_t ticket);
  // A number later than every ticket so far: a newcomer's place in the line.
  std::uint64_t draw() { return m_next++; }
  // Turns a client away for `retry_s`: renews its ticket, or issues one (none when the book is
  // full: it comes back as a newcomer). Its holder is due back within its longest pause (+20%
  // jitter, client_hello.cpp) and 2 s; it is forgotten after twice the pause and 5 s.
  std::optional<std::uint64_t> turn_away(std::optional<std::uint64_t> ticket, double retry_s,
                                         deadline_t now);
  // Whether a ticket issued before `order` is still due back at `now` (the line waits for it).
  [[nodiscard]] bool earlier_due(std::uint64_t order, deadline_t now) const;

 private:
  struct entry {
    std::uint64_t id = 0;
    deadline_t due{};
    deadline_t expires{};
  };
  std::deque<entry> m_entries;  // oldest first
  std::uint64_t m_next = 1;
  std::size_t m_capacity;
};

}  // namespace pairperf
