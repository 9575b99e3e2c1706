#include <gtest/gtest.h>

#include "core/errors.h"
#include "core/units.h"

namespace pairperf {
namespace {

TEST(Units, ParsesSizesWithBinarySuffixes) {
  EXPECT_EQ(parse_size("1"), 1U);
  EXPECT_EQ(parse_size("64"), 64U);
  EXPECT_EQ(parse_size("4K"), 4096U);
  EXPECT_EQ(parse_size("4k"), 4096U);
  EXPECT_EQ(parse_size("1M"), 1048576U);
  EXPECT_EQ(parse_size("1MiB"), 1048576U);
  EXPECT_EQ(parse_size("1G"), 1073741824U);
  EXPECT_EQ(parse_size("1.5K"), 1536U);
}

TEST(Units, RefusesBadSizes) {
  EXPECT_THROW(parse_size(""), usage_error);
  EXPECT_THROW(parse_size("0"), usage_error);
  EXPECT_THROW(parse_size("abc"), usage_error);
  EXPECT_THROW(parse_size("4X"), usage_error);
  EXPECT_THROW(parse_size("2G"), usage_error);   // above the 1 GiB limit
  EXPECT_THROW(parse_size("1.3"), usage_error);  // not whole bytes
  EXPECT_THROW(parse_size("-4"), usage_error);
}

TEST(Units, ExpandsListsAndDoublingRanges) {
  EXPECT_EQ(parse_size_list("1,64,4K,1M"), (std::vector<std::uint64_t>{1, 64, 4096, 1048576}));
  EXPECT_EQ(parse_size_list("8:64"), (std::vector<std::uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(parse_size_list("8:4M").size(), 20U);
  EXPECT_EQ(parse_size_list("8:4M").back(), 4194304U);
  // Sorted and without duplicates.
  EXPECT_EQ(parse_size_list("64,8:32,8"), (std::vector<std::uint64_t>{8, 16, 32, 64}));
  // A range whose end is not a power-of-two multiple stops below it.
  EXPECT_EQ(parse_size_list("3:20"), (std::vector<std::uint64_t>{3, 6, 12}));
}

TEST(Units, RefusesBadLists) {
  EXPECT_THROW(parse_size_list(""), usage_error);
  EXPECT_THROW(parse_size_list("1,,2"), usage_error);
  EXPECT_THROW(parse_size_list("64:8"), usage_error);
  EXPECT_THROW(parse_size_list("1,"), usage_error);
}

TEST(Units, ParsesDurations) {
  using namespace std::chrono_literals;
  EXPECT_EQ(parse_duration("2"), 2s);
  EXPECT_EQ(parse_duration("0.5s"), 500ms);
  EXPECT_EQ(parse_duration("250ms"), 250ms);
  EXPECT_EQ(parse_duration("10us"), 10us);
  EXPECT_EQ(parse_duration("1min"), 60s);
  EXPECT_THROW(parse_duration("0"), usage_error);
  EXPECT_THROW(parse_duration("fast"), usage_error);
  EXPECT_THROW(parse_duration("3h"), usage_error);
}

TEST(Units, FormatsForDisplay) {
  EXPECT_EQ(format_size(8), "8");
  EXPECT_EQ(format_size(4096), "4K");
  EXPECT_EQ(format_size(1048576), "1M");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_rate(12.5e9, rate_unit::gb), "12.500 GB/s");
  EXPECT_EQ(format_rate(1073741824.0, rate_unit::gib), "1.000 GiB/s");
  EXPECT_EQ(parse_rate_unit("GiB"), rate_unit::gib);
  EXPECT_EQ(parse_rate_unit("gb"), rate_unit::gb);
  EXPECT_THROW(parse_rate_unit("MB"), usage_error);
  EXPECT_EQ(format_seconds(3.21e-6), "3.21 us");
  EXPECT_EQ(format_seconds(1.5e-3), "1.50 ms");
}

}  // namespace
}  // namespace pairperf
