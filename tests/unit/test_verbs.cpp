// The verbs transport's pure parts: device specs, GID choice, MTU, the ordered completion ring.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "transports/verbs/verbs_addressing.h"
#include "transports/verbs/verbs_transport.h"

namespace pairperf::verbs {
namespace {

TEST(VerbsAddressing, DeviceSpec) {
  EXPECT_EQ(parse_device_spec("mlx5_0").name, "mlx5_0");
  EXPECT_EQ(parse_device_spec("mlx5_0").port, 0U);
  EXPECT_EQ(parse_device_spec("mlx5_3:2").port, 2U);
  EXPECT_THROW(parse_device_spec(""), usage_error);
  EXPECT_THROW(parse_device_spec(":1"), usage_error);
  EXPECT_THROW(parse_device_spec("mlx5_0:x"), usage_error);
  EXPECT_THROW(parse_device_spec("mlx5_0:0"), usage_error);
}

TEST(VerbsAddressing, Ipv4MappedGid) {
  EXPECT_EQ(ipv4_of_gid("0000:0000:0000:0000:0000:ffff:0a0b:0001"), "10.11.0.1");
  EXPECT_FALSE(ipv4_of_gid("fe80:0000:0000:0000:a6a7:9dff:fed6:a2b7").has_value());
  EXPECT_FALSE(ipv4_of_gid("garbage").has_value());
}

// rxe on rxenet0 and a second NIC, as ibv_query_gid_table lists them.
const std::vector<gid_row> table{
    {0, "fe80:0000:0000:0000:a6a7:9dff:fed6:a2b7", "RoCE v1", "rxenet0"},
    {1, "fe80:0000:0000:0000:a6a7:9dff:fed6:a2b7", "RoCE v2", "rxenet0"},
    {2, "0000:0000:0000:0000:0000:ffff:0a0b:0001", "RoCE v1", "rxenet0"},
    {3, "0000:0000:0000:0000:0000:ffff:0a0b:0001", "RoCE v2", "rxenet0"},
    {4, "0000:0000:0000:0000:0000:ffff:ac10:0001", "RoCE v2", "bond0.118"},
    {5, "0000:0000:0000:0000:0000:0000:0000:0000", "RoCE v2", ""},
};

TEST(VerbsAddressing, GidChoice) {
  EXPECT_EQ(choose_gid(table, "", -1, true).index, 3);  // RoCE v2 IPv4-mapped first
  EXPECT_EQ(choose_gid(table, "", -1, true).why, "RoCE v2, IPv4-mapped");
  EXPECT_EQ(choose_gid(table, "bond0.118", -1, true).index, 4);  // the interface asked for
  EXPECT_THROW(choose_gid(table, "eth9", -1, true), std::runtime_error);
  EXPECT_EQ(choose_gid(table, "", 1, true).index, 1);                // --gid-index wins
  EXPECT_THROW(choose_gid(table, "", 5, true), std::runtime_error);  // an empty entry
  EXPECT_THROW(choose_gid(table, "", 42, true), std::runtime_error);
  EXPECT_EQ(choose_gid(table, "", -1, false).index, 0);  // InfiniBand: LIDs
  const std::vector<gid_row> v6only{
      {0, "fe80:0000:0000:0000:a6a7:9dff:fed6:a2b7", "RoCE v1", "eth0"},
      {1, "fe80:0000:0000:0000:a6a7:9dff:fed6:a2b7", "RoCE v2", "eth0"}};
  EXPECT_EQ(choose_gid(v6only, "", -1, true).index, 1);
  EXPECT_EQ(choose_gid(v6only, "", -1, true).why, "RoCE v2");
}

TEST(VerbsAddressing, Mtu) {
  EXPECT_EQ(mtu_bytes(IBV_MTU_1024), 1024U);
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096U);
  EXPECT_EQ(mtu_enum(512), IBV_MTU_512);
  EXPECT_THROW(mtu_enum(1500), usage_error);
  EXPECT_EQ(path_mtu(IBV_MTU_4096, IBV_MTU_1024, 0), IBV_MTU_1024);     // the smaller port
  EXPECT_EQ(path_mtu(IBV_MTU_4096, IBV_MTU_4096, 2048), IBV_MTU_2048);  // --mtu lowers it
  EXPECT_EQ(path_mtu(IBV_MTU_1024, IBV_MTU_1024, 4096), IBV_MTU_1024);  // never raises it
  EXPECT_EQ(speed_text(32), "25.78125 Gb/s (EDR)");
  EXPECT_EQ(width_text(2), "4x");
}

TEST(VerbsOptions, TheObjectIsCheckedLikeAPeersInput) {
  const verbs::options defaults = verbs::options_from(nlohmann::json::object());
  EXPECT_EQ(defaults.qps, 1U);
  EXPECT_EQ(defaults.gid_index, -1);
  verbs::options o;
  o.device = "rxe0:1";
  o.qps = 4;
  o.rdma_cm = true;
  const verbs::options back = verbs::options_from(verbs::to_json(o));
  EXPECT_EQ(back.device, "rxe0:1");
  EXPECT_EQ(back.qps, 4U);
  EXPECT_TRUE(back.rdma_cm);
  for (const nlohmann::json& bad :
       {nlohmann::json{{"qps", 0}}, nlohmann::json{{"qps", 17}}, nlohmann::json{{"qps", -1}},
        nlohmann::json{{"qps", 1e300}}, nlohmann::json{{"mtu_bytes", 1000}},
        nlohmann::json{{"gid_index", 256}}, nlohmann::json{{"gid_index", 1.5}},
        nlohmann::json{{"signal_every", 0}}, nlohmann::json{{"inline_bytes", 4096}},
        nlohmann::json{{"device", 7}}, nlohmann::json{{"rdma_cm", "yes"}}}) {
    EXPECT_THROW(verbs::options_from(bad), usage_error) << bad.dump();
  }
}

TEST(VerbsOrderedRing, ReleasesInPostingOrder) {
  ordered_ring r;
  r.reset(4);
  const auto a = r.push(10, op_kind::send);
  const auto b = r.push(11, op_kind::send);
  const auto c = r.push(12, op_kind::put);
  std::array<completion, 8> out{};
  r.mark(b);  // a later operation (another QP) finished first
  EXPECT_EQ(r.release(out, 0), 0U);
  r.mark(a);
  ASSERT_EQ(r.release(out, 0), 2U);
  EXPECT_EQ(out[0].cookie, 10U);
  EXPECT_EQ(out[1].cookie, 11U);
  r.mark(c);
  ASSERT_EQ(r.release(out, 0), 1U);
  EXPECT_EQ(out[0].kind, op_kind::put);
  EXPECT_EQ(r.outstanding(), 0U);
  for (int i = 0; i < 4; ++i) r.push(static_cast<std::uint64_t>(i), op_kind::recv);
  EXPECT_TRUE(r.full());
}

}  // namespace
}  // namespace pairperf::verbs
