// The host allocator keeps released buffers for the next allocation of their size (a sweep
// repeats its sizes), within its bounds, and never hands a forked child its parent's.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "transports/memory/host_allocator.h"

namespace pairperf {
namespace {

constexpr std::size_t mib = std::size_t{1} << 20;

TEST(HostAllocator, AReleasedBufferServesTheNextAllocationOfItsSize) {
  host_allocator a;
  std::byte* first = a.allocate(mib);
  std::memset(first, 0x5a, mib);  // populated and writable
  a.release(first, mib);
  EXPECT_EQ(a.kept_bytes(), mib);
  std::byte* other_size = a.allocate(2 * mib);
  EXPECT_NE(other_size, first);
  EXPECT_EQ(a.allocate(mib), first);
  EXPECT_EQ(a.kept_bytes(), 0U);
  a.release(first, mib);
  a.release(other_size, 2 * mib);
  EXPECT_EQ(a.kept_bytes(), 3 * mib);
}

TEST(HostAllocator, KeepsNoLargeBufferAndAtMostItsBoundInAll) {
  host_allocator a;
  const std::size_t large = host_allocator::kept_buffer_max + 4096;
  a.release(a.allocate(large), large);
  EXPECT_EQ(a.kept_bytes(), 0U);
  // Five of the largest kept size: the oldest go once the total passes the bound.
  std::vector<std::byte*> held;
  for (int i = 0; i < 5; ++i) held.push_back(a.allocate(host_allocator::kept_buffer_max));
  for (std::byte* p : held) a.release(p, host_allocator::kept_buffer_max);
  EXPECT_EQ(a.kept_bytes(), host_allocator::kept_bytes_max);
  ASSERT_LT(host_allocator::kept_bytes_max, 5 * host_allocator::kept_buffer_max);  // the premise
  // The newest were kept: the last released comes back first.
  EXPECT_EQ(a.allocate(host_allocator::kept_buffer_max), held.back());
}

TEST(HostAllocator, AForkedChildDoesNotTakeItsParentsKeptBuffers) {
  host_allocator a;
  std::byte* kept = a.allocate(mib);
  a.release(kept, mib);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::byte* p = a.allocate(mib);  // its own pages, not the parent's shared copy-on-write
    ::_exit(p == kept ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child took the parent's kept buffer";
  EXPECT_EQ(a.allocate(mib), kept);  // the parent still has it
}

}  // namespace
}  // namespace pairperf
