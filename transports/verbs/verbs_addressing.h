#pragma once
// Choosing what a verbs case runs on, as pure functions of the device's tables so that every
// rule is unit-testable without an RDMA device:
//   --ib-dev NAME[:PORT]    "mlx5_0:1", "rxe0" (port: the first active one)
//   GID choice              on Ethernet (RoCE) the RoCE v2 IPv4-mapped GID of the interface asked
//                           for (--iface) or the first one; --gid-index overrides; InfiniBand
//                           needs none (LIDs), index 0 is shown
//   MTU                     the port's active MTU, lowered by --mtu, never hard-coded
#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pairperf::verbs {

struct device_spec {
  std::string name;
  unsigned port = 0;  // 0 = the first active port
};
// Throws usage_error on "", ":1", "mlx5_0:x", "mlx5_0:0".
device_spec parse_device_spec(const std::string& text);

struct gid_row {
  int index = 0;
  std::string gid;   // "fe80:0000:...:0001" or "0000:...:ffff:0a0b:0001"
  std::string type;  // "IB", "RoCE v1", "RoCE v2"
  std::string ndev;  // the netdev it belongs to ("" on InfiniBand)
};

// "::ffff:a.b.c.d" GIDs carry an IPv4 address: the one to connect to with rdma_cm.
std::optional<std::string> ipv4_of_gid(const std::string& gid_text);

struct gid_choice {
  int index = -1;
  std::string why;  // shown in provenance: how it was chosen
};
// `iface` restricts to the GIDs of that netdev; `forced` (>= 0) is --gid-index. Throws
// std::runtime_error naming what is missing (no GID on that interface, index out of range).
gid_choice choose_gid(const std::vector<gid_row>& table, const std::string& iface, int forced,
                      bool ethernet);

// IBV_MTU_256..4096 <-> bytes. to_mtu_enum throws usage_error on other sizes.
unsigned mtu_bytes(int mtu_enum);
int mtu_enum(unsigned bytes);
// The path MTU: the smaller of both ports' active MTUs, lowered to --mtu when given.
int path_mtu(int mine, int theirs, unsigned requested_bytes);

// A GID as ibv shows it ("0000:0000:...:ffff:0a0b:0001") and a GID type's name.
std::string gid_text(const ibv_gid& g);
const char* gid_type_text(unsigned type);

// ibv_port_attr's active_speed / active_width as text: "25.78125 Gb/s", "4x".
std::string speed_text(unsigned active_speed);
std::string width_text(unsigned active_width);

}  // namespace pairperf::verbs
