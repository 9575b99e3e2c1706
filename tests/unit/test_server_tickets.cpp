#include <gtest/gtest.h>

#include <chrono>

#include "harness/server_tickets.h"

namespace pairperf {
namespace {

using std::chrono::seconds;

// First come, first served across retries: the order tickets were issued in, whoever returns first.
TEST(TicketBook, ATicketKeepsItsPlaceAheadOfLaterClients) {
  ticket_book book(8);
  const deadline_t t0 = steady::now();
  const auto first = book.turn_away(std::nullopt, 2, t0);
  const auto second = book.turn_away(std::nullopt, 2, t0);
  ASSERT_TRUE(first && second);
  EXPECT_LT(*first, *second);
  EXPECT_EQ(book.ahead_of(std::nullopt, t0), 2U);  // a newcomer is behind both
  EXPECT_EQ(book.ahead_of(second, t0), 1U);
  EXPECT_EQ(book.ahead_of(first, t0), 0U);
  EXPECT_GT(book.draw(), *second);  // a newcomer's place is after every ticket
  // Turned away again, the second keeps its number (and its place).
  EXPECT_EQ(book.turn_away(second, 2, t0), second);
  book.redeem(*first);
  EXPECT_EQ(book.ahead_of(second, t0), 0U);
}

// Due back within the longest jittered pause and 2 s; forgotten after twice the pause and 5 s.
TEST(TicketBook, TheLineWaitsForADueTicketButNotForever) {
  ticket_book book(8);
  const deadline_t t0 = steady::now();
  const auto t = book.turn_away(std::nullopt, 10, t0);
  ASSERT_TRUE(t);
  const std::uint64_t later = book.draw();
  EXPECT_TRUE(book.earlier_due(later, t0 + seconds(13)));   // 1.2 x 10 + 2 = 14 s
  EXPECT_FALSE(book.earlier_due(later, t0 + seconds(15)));
  EXPECT_FALSE(book.earlier_due(*t, t0));  // nothing issued before itself
  EXPECT_EQ(book.ahead_of(std::nullopt, t0 + seconds(24)), 1U);  // 2 x 10 + 5 = 25 s
  EXPECT_EQ(book.ahead_of(std::nullopt, t0 + seconds(26)), 0U);
  EXPECT_EQ(book.ahead_of(t, t0 + seconds(26)), 0U);  // an expired ticket is a newcomer's
}

TEST(TicketBook, AFullBookIssuesNoTicket) {
  ticket_book book(2);
  const deadline_t t0 = steady::now();
  EXPECT_TRUE(book.turn_away(std::nullopt, 1, t0));
  EXPECT_TRUE(book.turn_away(std::nullopt, 1, t0));
  EXPECT_FALSE(book.turn_away(std::nullopt, 1, t0));
}

}  // namespace
}  // namespace pairperf
