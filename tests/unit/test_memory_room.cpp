#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "host/memory_room.h"

namespace pairperf {
namespace {

namespace fs = std::filesystem;

// A cgroup tree in a scratch folder: write(rel, file, text) fills root/rel/file.
class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() /
           ("pairperf_cgroups_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }
  void write(const std::string& rel, const std::string& file, const std::string& text) {
    fs::create_directories(root / rel);
    std::ofstream(root / rel / file) << text << "\n";
  }
  fs::path root;
};

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;

TEST_F(CgroupTree, V2TakesTheTightestLevelFromTheProcessUp) {
  write("", "memory.current", std::to_string(900 * MiB));  // the root has no memory.max
  write("kubepods", "memory.max", std::to_string(4096 * MiB));
  write("kubepods", "memory.current", std::to_string(3996 * MiB));  // 100 MiB left above
  write("kubepods/pod1", "memory.max", "max");
  write("kubepods/pod1", "memory.current", std::to_string(500 * MiB));
  write("kubepods/pod1/c", "memory.max", std::to_string(700 * MiB));
  write("kubepods/pod1/c", "memory.current", std::to_string(200 * MiB));
  EXPECT_EQ(cgroup_memory_room("0::/kubepods/pod1/c\n", root), 100 * MiB);
  write("kubepods", "memory.max", "max");
  EXPECT_EQ(cgroup_memory_room("0::/kubepods/pod1/c\n", root), 500 * MiB);
}

TEST_F(CgroupTree, V1MemoryControllerCountsAndItsUnlimitedValueIsNoLimit) {
  write("memory", "memory.limit_in_bytes", "9223372036854771712");
  write("memory", "memory.usage_in_bytes", std::to_string(9000 * MiB));
  write("memory/docker/abc", "memory.limit_in_bytes", std::to_string(700 * MiB));
  write("memory/docker/abc", "memory.usage_in_bytes", std::to_string(50 * MiB));
  const std::string v1 = "12:pids:/docker/abc\n4:cpu,memory:/docker/abc\n0::/\n";
  EXPECT_EQ(cgroup_memory_room(v1, root), 650 * MiB);
  // Unlimited everywhere: no finding, so the caller goes by MemAvailable.
  write("memory/docker/abc", "memory.limit_in_bytes", "9223372036854771712");
  EXPECT_EQ(cgroup_memory_room(v1, root), std::nullopt);
}

TEST_F(CgroupTree, AContainerSeesTheHostsPathButItsOwnCgroupAtTheMountsRoot) {
  // Without a cgroup namespace /proc/self/cgroup names /docker/abc, which the container's mount
  // does not have: the levels that are missing are passed over and the root's limit counts.
  write("memory", "memory.limit_in_bytes", std::to_string(1024 * MiB));
  write("memory", "memory.usage_in_bytes", std::to_string(24 * MiB));
  EXPECT_EQ(cgroup_memory_room("4:memory:/docker/abc\n", root), 1000 * MiB);
}

TEST_F(CgroupTree, AHybridHostsUnifiedMountAndAFullCgroupCount) {
  write("unified/svc", "memory.max", std::to_string(64 * MiB));
  write("unified/svc", "memory.current", std::to_string(80 * MiB));  // over: nothing left
  EXPECT_EQ(cgroup_memory_room("0::/svc\n", root), 0u);
}

TEST_F(CgroupTree, WhatCannotBeReadIsNoFinding) {
  EXPECT_EQ(cgroup_memory_room("", root), std::nullopt);
  EXPECT_EQ(cgroup_memory_room("garbage without colons\n", root), std::nullopt);
  write("svc", "memory.max", "12abc");
  write("svc", "memory.current", "1");
  EXPECT_EQ(cgroup_memory_room("0::/svc\n", root), std::nullopt);
  write("svc", "memory.max", "-5");
  EXPECT_EQ(cgroup_memory_room("0::/svc\n", root), std::nullopt);
}

TEST(MemoryRoom, ThisProcessHasSomeAndNoMoreThanMemAvailable) {
  const auto room = memory_room();
  ASSERT_TRUE(room.has_value());
  EXPECT_GT(*room, 0u);
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kib = 0;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") break;
  // MemAvailable moves between the two reads: allow a little.
  EXPECT_LE(*room, kib * 1024 + 256 * MiB);
}

}  // namespace
}  // namespace pairperf
