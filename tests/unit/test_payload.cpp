#include <gtest/gtest.h>

#include "harness/payload.h"
#include "transports/memory/allocator.h"

namespace pairperf {
namespace {

TEST(Payload, PatternChecksCleanForEverySizeAndDiffersPerMessage) {
  for (std::size_t n : {1U, 7U, 8U, 9U, 17U, 4096U, 65537U}) {
    std::vector<std::byte> a(n), b(n);
    fill_pattern(a.data(), n, 5);
    EXPECT_EQ(count_corrupt(a.data(), n, 5), 0U) << n;
    fill_pattern(b.data(), n, 6);
    EXPECT_GT(count_corrupt(b.data(), n, 5), 0U)
        << "message 6 must not pass as message 5, size " << n;
  }
}

TEST(Payload, CountsEveryCorruptByte) {
  std::vector<std::byte> a(1000);
  fill_pattern(a.data(), a.size(), 42);
  a[0] ^= std::byte{0x01};
  a[8] ^= std::byte{0xFF};
  a[999] ^= std::byte{0x80};  // in the tail word
  EXPECT_EQ(count_corrupt(a.data(), a.size(), 42), 3U);
}

TEST(Payload, CheckerFillsChecksAndTotals) {
  std::string why;
  allocator* host = find_allocator(memory_type::host, why);
  ASSERT_NE(host, nullptr);
  buffer buf(*host, 100);
  payload_checker checker(*host, *host, 100);
  checker.fill(buf.data(), 3);
  EXPECT_EQ(checker.check(buf.data(), 3), 0U);
  buf.data()[50] ^= std::byte{1};
  EXPECT_EQ(checker.check(buf.data(), 3), 1U);
  EXPECT_EQ(checker.messages_checked(), 2U);
  EXPECT_EQ(checker.corrupt_bytes(), 1U);
}

TEST(Memory, CudaIsUnavailableWithAReasonInThisBuild) {
  std::string why;
  EXPECT_EQ(find_allocator(memory_type::cuda, why), nullptr);
  EXPECT_NE(why.find("CUDA"), std::string::npos);
}

}  // namespace
}  // namespace pairperf
