// UCX's protocol tables (ucx_proto_table.h) on real output: UCX 1.22.0 from this project's
// machine (tests/fixtures/ucx-proto/) and the older forms as users posted them in UCX's issue
// threads, each named where it is quoted.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "transports/ucx/ucx_proto_table.h"

namespace pairperf::ucx {
namespace {

std::string fixture(const char* name) {
  std::ifstream in(std::string(PAIRPERF_SOURCE_DIR) + "/tests/fixtures/ucx-proto/" + name);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << name;
  return s.str();
}

// `ucx_info -e -u t -D net` on InfiniBand, UCX 1.19-1.20's two-cell title; quoted in
// https://github.com/openucx/ucx/issues/11097 (2026-01-05).
constexpr const char* ucx_info_ib = R"(# UCP endpoint
#
#               peer: <no debug data>
#                 lane[0]:  6:rc_mlx5/mlx5_0:1.0 md[1]      -> md[1]/ib/sysdev[1] seg 4294967295 rma_bw#0 am wireup
#
# +---------------------+----------------------------------------------------------------------+
# | ucx_info self cfg#0 | tagged message by ucp_tag_send*(fast-completion) from host memory    |
# +---------------------+---------------------------------------------------+------------------+
# |             0..2038 | eager short                                       | rc_mlx5/mlx5_0:1 |
# |          2039..8246 | eager copy-in copy-out                            | rc_mlx5/mlx5_0:1 |
# |         8247..16676 | multi-frag eager copy-in copy-out                 | rc_mlx5/mlx5_0:1 |
# |       16677..262143 | multi-frag eager zero-copy copy-out               | rc_mlx5/mlx5_0:1 |
# |           256K..inf | (?) rendezvous zero-copy read from remote         | rc_mlx5/mlx5_0:1 |
# +---------------------+---------------------------------------------------+------------------+
)";

// UCX_PROTO_INFO behind the compact log prefix, two rails; quoted in
// https://github.com/openucx/ucx/issues/10420 (ucx_perftest, 2025-01).
constexpr const char* two_rails = R"(
[1737025510.220313] [node13:2857558:0]   |                 4845..inf | (?) rendezvous zero-copy read from remote | 50% on rc_mlx5/mlx5_bond_0:1/path0 and 50% on rc_mlx5/mlx5_bond_1:1/path0 |
[1737025510.220315] [node13:2857558:0]   +---------------------------+-------------------------------------------+---------------------------------------------------------------------------+
[1737025510.220495] [node13:2857558:0]   +---------------------------+-----------------------------------------------------------------------------------------------------------------------+
[1737025510.220498] [node13:2857558:0]   | perftest inter-node cfg#0 | active message by ucp_am_send* with reply flag from host memory                                                       |
[1737025510.220502] [node13:2857558:0]   +---------------------------+-------------------------------------------+---------------------------------------------------------------------------+
[1737025510.220504] [node13:2857558:0]   |                   0..2030 | short                                     | rc_mlx5/mlx5_bond_0:1/path0                                               |
[1737025510.220507] [node13:2857558:0]   |                2031..8238 | copy-in                                   | rc_mlx5/mlx5_bond_0:1/path0                                               |
)";

// UCX_LOG_LEVEL=info of two processes in one file (UCX 1.12's table, "ucp_tag_send*()"); quoted
// in https://github.com/openucx/ucx/pull/7950 (2022-02).
constexpr const char* interleaved = R"(
[1645019897.516502] [vulcan01:22386:0]     proto_debug.c:406  UCX  INFO  +---------------+-----------------------------------------------------------------+------------------+
[1645019897.519901] [vulcan04:13202:0]     proto_debug.c:406  UCX  INFO  +---------------+--------------------------------------------------------------+
[1645019897.519920] [vulcan04:13202:0]     proto_debug.c:406  UCX  INFO  | mpi ep_cfg[3] | tagged message by ucp_tag_send*() from host memory           |
[1645019897.519924] [vulcan04:13202:0]     proto_debug.c:406  UCX  INFO  +---------------+-------------------------------------------+------------------+
[1645019897.519927] [vulcan04:13202:0]     proto_debug.c:406  UCX  INFO  |       0..2007 | eager short                               | rc_mlx5/mlx5_0:1 |
[1645019897.519931] [vulcan04:13202:0]     proto_debug.c:406  UCX  INFO  |    2008..8246 | eager zero-copy copy-out                  | rc_mlx5/mlx5_0:1 |
[1645019897.519934] [vulcan04:13202:0]     proto_debug.c:406  UCX  INFO  |   8247..17297 | eager zero-copy copy-out                  | rc_mlx5/mlx5_0:1 |
[1645019897.519937] [vulcan04:13202:0]     proto_debug.c:406  UCX  INFO  |    17298..inf | (?) rendezvous zero-copy read from remote | rc_mlx5/mlx5_0:1 |
)";

TEST(UcxProtoTable, Ucx122EndpointTablesOneForEachSendVariant) {
  const auto tables = parse_protocol_tables(fixture("ucx-1.22.0-ep-info-shm.txt"));
  ASSERT_EQ(tables.size(), 3U);
  EXPECT_EQ(tables[0].endpoint, "ucp_context_1 intra-node cfg#0");
  EXPECT_EQ(tables[0].operation,
            "tagged message by ucp_tag_send*(fast-completion) from host memory");
  EXPECT_EQ(tables[2].operation, "tagged message by ucp_tag_send* from host memory");
  ASSERT_EQ(tables[0].rows.size(), 4U);  // the "Range | Description | Config" header is no row
  const protocol_row& rndv = tables[0].rows[3];
  EXPECT_EQ(rndv.range, "256K..inf");
  EXPECT_EQ(rndv.first, 256U * 1024);
  EXPECT_EQ(rndv.last, std::numeric_limits<std::size_t>::max());
  EXPECT_TRUE(rndv.estimated);
  EXPECT_EQ(rndv.description, "rendezvous zero-copy read from remote");
  ASSERT_EQ(rndv.lanes.size(), 1U);
  EXPECT_EQ(rndv.lanes[0].transport + "/" + rndv.lanes[0].device, "cma/memory");
  EXPECT_EQ(tables[2].row_for(5028)->description, "eager copy-in copy-out");
  EXPECT_EQ(tables[2].row_for(5029)->config, "cma/memory");
  EXPECT_EQ(tables[2].lines.size(), 10U);  // title, header, rows and separators, as printed
}

TEST(UcxProtoTable, RequestTextChoosesItsVariantsRow) {
  const auto tables = parse_protocol_tables(fixture("ucx-1.22.0-ep-info-shm.txt"));
  // Captured with the tables: ucp_request_query of a 1 MiB tag_send (no variant).
  const auto c = choice_for_request(
      tables,
      "{proto|cb|init|rk_use} tag_send from host memory length 1048576 rendezvous zero-copy "
      "read from remote cma/memory 11087.1 MB/s 90.20 us");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->table, &tables[2]);
  EXPECT_EQ(c->row.range, "5029..inf");
  EXPECT_EQ(c->length, 1048576U);
  // The same size sent with the multi-send flag has its own table.
  const auto multi = choice_for_request(
      tables, "{proto} tag_send(multi) from host memory length 8 eager short sysv/memory");
  ASSERT_TRUE(multi.has_value());
  EXPECT_EQ(multi->table, &tables[1]);
  // A request naming another protocol than the table's row for its size agrees with no table.
  EXPECT_FALSE(choice_for_request(tables,
                                  "{proto} tag_send from host memory length 8 "
                                  "rendezvous zero-copy read from remote cma/memory")
                   .has_value());
  // UCX 1.13's request text has no such form.
  EXPECT_FALSE(choice_for_request(tables,
                                  "flags:0x44000 send length 65536 "
                                  "ucp_proto_progress_tag_rndv_rts() lane[0]: 0:tcp/lo.0")
                   .has_value());
}

TEST(UcxProtoTable, RemoteKeyRequestSaysItsOwnProtocolAndLanes) {
  // ucp_request_query of a 1 MiB put_bw and a get_bw over tcp, UCX 1.22.0 (this machine).
  const auto put = request_selection(
      "{proto|cb|init} put from host memory length 1048576 zero-copy cma/memory 11072.2 MB/s "
      "90.32 us");
  ASSERT_TRUE(put.has_value());
  EXPECT_EQ(put->table, nullptr);
  EXPECT_EQ(put->row.description, "zero-copy");
  EXPECT_EQ(put->row.config, "cma/memory");
  EXPECT_EQ(put->length, 1048576U);
  const auto get = request_selection(
      "{proto|cb|init} get into host memory length 8 software emulation tcp/lo 0.1 MB/s 61.61 us");
  ASSERT_TRUE(get.has_value());
  EXPECT_EQ(get->row.description, "software emulation");
  EXPECT_EQ(get->row.lanes.at(0).transport, "tcp");
  // Two rails: the config starts at the first share.
  const auto rails = request_selection(
      "{proto} tag_send from host memory length 1048576 rendezvous zero-copy read from remote "
      "50% on rc_mlx5/mlx5_bond_0:1/path0 and 50% on rc_mlx5/mlx5_bond_1:1/path0 23000.0 MB/s "
      "45.59 us");
  ASSERT_TRUE(rails.has_value());
  EXPECT_EQ(rails->row.description, "rendezvous zero-copy read from remote");
  EXPECT_EQ(rails->row.lanes.size(), 2U);
  EXPECT_FALSE(request_selection("{proto} put from host memory length 8 zero-copy").has_value());
  EXPECT_FALSE(request_selection("flags:0x44000 send length 65536 tcp/lo").has_value());
}

TEST(UcxProtoTable, TwoCellTitleOfUcx119) {
  const auto tables = parse_protocol_tables(ucx_info_ib);
  ASSERT_EQ(tables.size(), 1U);
  EXPECT_EQ(tables[0].endpoint, "ucx_info self cfg#0");
  EXPECT_EQ(tables[0].rows.size(), 5U);
  EXPECT_EQ(tables[0].row_for(16677)->description, "multi-frag eager zero-copy copy-out");
  EXPECT_EQ(tables[0].row_for(16677)->lanes.at(0).device, "mlx5_0:1");
  EXPECT_EQ(tables[0].source, "");
}

TEST(UcxProtoTable, LogPrefixAndTwoRailsWithPaths) {
  const auto tables = parse_protocol_tables(two_rails);
  // The first row belongs to a table whose title was cut off: it starts none.
  ASSERT_EQ(tables.size(), 1U);
  EXPECT_EQ(tables[0].source, "node13:2857558");
  EXPECT_EQ(tables[0].operation, "active message by ucp_am_send* with reply flag from host memory");
  EXPECT_EQ(tables[0].row_for(100)->description, "short");
  const auto lanes =
      config_lanes("50% on rc_mlx5/mlx5_bond_0:1/path0 and 50% on rc_mlx5/mlx5_bond_1:1/path0");
  ASSERT_EQ(lanes.size(), 2U);
  EXPECT_EQ(lanes[0].device, "mlx5_bond_0:1");
  EXPECT_EQ(lanes[1].device, "mlx5_bond_1:1");
  EXPECT_EQ(config_lanes("rc_mlx5/mlx5_0:1 50% on path0 and 50% on path1").size(), 1U);
}

TEST(UcxProtoTable, InterleavedProcessesKeepTheirOwnTables) {
  const auto tables = parse_protocol_tables(interleaved);
  ASSERT_EQ(tables.size(), 1U);  // vulcan01 printed only a separator
  EXPECT_EQ(tables[0].source, "vulcan04:13202");
  EXPECT_EQ(tables[0].endpoint, "mpi ep_cfg[3]");
  EXPECT_EQ(tables[0].row_for(17298)->description, "rendezvous zero-copy read from remote");
  // 1.12 printed "ucp_tag_send*()": a request of the newer form still finds the table.
  const auto c = choice_for_request(tables,
                                    "{proto} tag_send from host memory length 100000 "
                                    "rendezvous zero-copy read from remote rc_mlx5/mlx5_0:1");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->row.range, "17298..inf");
}

TEST(UcxProtoTable, MemoryUnitsAndWhatIsNoTable) {
  EXPECT_EQ(parse_memunits("512"), 512U);
  EXPECT_EQ(parse_memunits("1M"), 1048576U);
  EXPECT_EQ(parse_memunits("inf"), std::numeric_limits<std::size_t>::max());
  EXPECT_FALSE(parse_memunits("1Q").has_value());
  EXPECT_FALSE(parse_memunits("").has_value());
  EXPECT_FALSE(parse_memunits("99999999999999999999999").has_value());
  EXPECT_FALSE(parse_memunits("17179869184T").has_value());
  EXPECT_TRUE(parse_protocol_tables("").empty());
  EXPECT_TRUE(parse_protocol_tables("| a | b | c |\n+---+\n|||\n|").empty());
  EXPECT_TRUE(parse_protocol_tables("# | x cfg#0 | op |\n# | 9..1 | bad range | tcp/lo |").empty());
}

}  // namespace
}  // namespace pairperf::ucx
