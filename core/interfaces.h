#pragma once
// Network interface inventory (getifaddrs + /sys/class/net), used by `info`, the context block,
// `--iface all` and the TCP transport's address choice.
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pairperf {

struct iface_address {
  int family = 0;           // AF_INET or AF_INET6
  std::string address;      // numeric, without scope
  unsigned prefix_len = 0;  // from the netmask
};

struct interface_info {
  std::string name;
  unsigned index = 0;    // the kernel's ifindex (0: unknown); getifaddrs lists in this order
  bool up = false;       // IFF_UP
  bool running = false;  // IFF_RUNNING (carrier)
  bool loopback = false;
  unsigned mtu = 0;
  std::optional<int> speed_mbps;  // /sys/class/net/X/speed where the driver reports it
  std::string mac;
  std::vector<iface_address> addresses;
};

void to_json(nlohmann::json& j, const interface_info& info);
void from_json(const nlohmann::json& j, interface_info& info);
void to_json(nlohmann::json& j, const iface_address& addr);
void from_json(const nlohmann::json& j, iface_address& addr);

// All interfaces of this host (this network namespace), sorted by name; each one's addresses in
// the order getifaddrs lists them.
std::vector<interface_info> list_interfaces();

// Interfaces that can carry a test: up and with at least one address.
std::vector<interface_info> usable_interfaces();

std::optional<interface_info> find_interface(const std::string& name);

// The name of the interface that holds this numeric address, or "" if none does.
std::string interface_of_address(const std::string& address);

// 127.0.0.0/8 and ::1.
bool is_loopback(const std::string& address);
// fe80::/10 and 169.254.0.0/16: meaningless beyond the link (and, for IPv6, without a scope id).
bool is_link_local(const std::string& address);

// The numeric addresses `name` resolves to (/etc/hosts or DNS), in the resolver's order, without
// repeats; empty if it does not resolve. A Kubernetes headless Service resolves to all its pods.
std::vector<std::string> name_addresses(const std::string& name);

// The numeric addresses this host's name resolves to (/etc/hosts or DNS), e.g. what gloo binds
// when GLOO_SOCKET_IFNAME is unset. Empty if it does not resolve.
std::vector<std::string> hostname_addresses();

// Whether `address` lies in the subnet of `net` (same family, same first prefix_len bits).
bool in_subnet(const iface_address& net, const std::string& address);

}  // namespace pairperf
