// The UCX pairperf loads (transports/ucx/ucx_library.h): the memory types its headers number
// reach the loaded library as that version numbers them. ctest runs these twice: on the UCX the
// loader finds (Debian's 1.13) and on UCX 1.22 from the libucx-cu13 wheel (PAIRPERF_UCX_LIBRARY,
// unit.ucx_1_22), where UCS_MEMORY_TYPE_UNKNOWN is 10, not 5.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "transports/ucx/ucx_handles.h"
#include "transports/ucx/ucx_library.h"

namespace pairperf::ucx {
namespace {

// src/ucs/memory/memory_type.h at each tag of openucx/ucx.
TEST(UcxLibrary, UnknownIsNumberedAsEachVersionNumbersIt) {
  EXPECT_EQ(memory_type_unknown({1, 13, 1}), 5U);
  EXPECT_EQ(memory_type_unknown({1, 15, 0}), 5U);
  EXPECT_EQ(memory_type_unknown({1, 16, 0}), 6U);
  EXPECT_EQ(memory_type_unknown({1, 17, 0}), 9U);
  EXPECT_EQ(memory_type_unknown({1, 20, 1}), 9U);
  EXPECT_EQ(memory_type_unknown({1, 21, 0}), 10U);
  EXPECT_EQ(memory_type_unknown({1, 22, 0}), 10U);
  EXPECT_EQ(memory_type_unknown(built_version), static_cast<unsigned>(UCS_MEMORY_TYPE_UNKNOWN));
}

TEST(UcxLibrary, MemoryTypesCrossVersionsByName) {
  for (const version v :
       {version{1, 13, 1}, version{1, 16, 0}, version{1, 19, 0}, version{1, 22, 0}}) {
    const unsigned unknown = memory_type_unknown(v);
    EXPECT_EQ(to_library(UCS_MEMORY_TYPE_UNKNOWN, v), unknown);
    EXPECT_EQ(to_library(UCS_MEMORY_TYPE_HOST, v), 0U);
    EXPECT_EQ(to_library(UCS_MEMORY_TYPE_CUDA, v), 1U);
    EXPECT_EQ(from_library(unknown, v), UCS_MEMORY_TYPE_UNKNOWN);
    EXPECT_EQ(from_library(1U, v), UCS_MEMORY_TYPE_CUDA);
  }
  // A type the headers do not know (1.22's RDMA is 5, these headers' UNKNOWN where they are
  // 1.13's) comes back as UNKNOWN, never as another type.
  if (built_version < version{1, 16}) {
    EXPECT_EQ(from_library(5U, {1, 22, 0}), UCS_MEMORY_TYPE_UNKNOWN);
  }
}

// The trap on the real library: host memory registered with "unknown" (detect it) must come back
// as host memory. Where the loaded version numbers UNKNOWN differently from the headers, the
// untranslated value must be something else there (else this test could not see the trap).
TEST(UcxLibrary, AnUnknownMemoryTypeReachesTheLoadedLibraryAsItsOwnUnknown) {
  if (const char* want = std::getenv("PAIRPERF_UCX_LIBRARY");
      want != nullptr && !std::filesystem::exists(want)) {
    GTEST_SKIP() << "PAIRPERF_UCX_LIBRARY=" << want
                 << " does not exist (scripts/setup installs the libucx-cu13 wheel there)";
  }
  std::string why;
  const library* l = load(&why);
  ASSERT_NE(l, nullptr) << why;
  std::cout << "UCX " << l->ucp_get_version_string() << " from " << l->path << "\n";
  const shared_context context = context_for("", "", {}, UCP_FEATURE_RMA);
  std::vector<std::byte> buffer(1 << 16);
  const memory_handle mapped(context.get(), buffer.data(), buffer.size(), UCS_MEMORY_TYPE_UNKNOWN);
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_MEM_TYPE;
  ASSERT_EQ(l->ucp_mem_query(mapped.get(), &attr), UCS_OK);
  EXPECT_EQ(from_library(load_memory_type(attr.mem_type), l->loaded), UCS_MEMORY_TYPE_HOST)
      << "the library read the registration as type " << load_memory_type(attr.mem_type);

  if (memory_type_unknown(l->loaded) == memory_type_unknown(built_version)) return;
  ucp_mem_map_params_t raw{};
  raw.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                   UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  raw.address = buffer.data();
  raw.length = buffer.size();
  raw.memory_type = UCS_MEMORY_TYPE_UNKNOWN;  // these headers' value, untranslated
  ucp_mem_h memh = nullptr;
  const ucs_status_t status = l->ucp_mem_map(context.get(), &raw, &memh);
  std::cout << "untranslated UNKNOWN (" << UCS_MEMORY_TYPE_UNKNOWN << ") on UCX "
            << l->ucp_get_version_string() << ": " << l->ucs_status_string(status);
  if (status == UCS_OK) {
    ucp_mem_attr_t seen{};
    seen.field_mask = UCP_MEM_ATTR_FIELD_MEM_TYPE;
    ASSERT_EQ(l->ucp_mem_query(memh, &seen), UCS_OK);
    std::cout << ", registered as type " << load_memory_type(seen.mem_type);
    EXPECT_NE(load_memory_type(seen.mem_type), 0U);
    l->ucp_mem_unmap(context.get(), memh);
  }
  std::cout << "\n";
}

}  // namespace
}  // namespace pairperf::ucx
