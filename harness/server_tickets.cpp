#include "harness/server_tickets.h"

#include <algorithm>
#include <chrono>

namespace pairperf {
namespace {

deadline_t after(deadline_t now, double seconds) {
  return now + std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::duration<double>(seconds));
}

}  // namespace

std::size_t ticket_book::ahead_of(std::optional<std::uint64_t> ticket, deadline_t now) {
  std::erase_if(m_entries, [&](const entry& e) { return e.expires <= now; });
  const auto mine = std::find_if(m_entries.begin(), m_entries.end(),
                                 [&](const entry& e) { return ticket && e.id == *ticket; });
  return static_cast<std::size_t>(std::distance(m_entries.begin(), mine));
}

void ticket_book::redeem(std::uint64_t ticket) {
  std::erase_if(m_entries, [&](const entry& e) { return e.id == ticket; });
}

std::optional<std::uint64_t> ticket_book::turn_away(std::optional<std::uint64_t> ticket,
                                                    double retry_s, deadline_t now) {
  const deadline_t due = after(now, 1.2 * retry_s + 2);
  const deadline_t expires = after(now, 2 * retry_s + 5);
  const auto mine = std::find_if(m_entries.begin(), m_entries.end(),
                                 [&](const entry& e) { return ticket && e.id == *ticket; });
  if (mine != m_entries.end()) {
    mine->due = due;
    mine->expires = expires;
    return mine->id;
  }
  if (m_entries.size() >= m_capacity) return std::nullopt;
  m_entries.push_back(entry{m_next++, due, expires});
  return m_entries.back().id;
}

bool ticket_book::earlier_due(std::uint64_t order, deadline_t now) const {
  return std::any_of(m_entries.begin(), m_entries.end(),
                     [&](const entry& e) { return e.id < order && now < e.due; });
}

}  // namespace pairperf
