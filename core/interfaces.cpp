#include "core/interfaces.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netpacket/packet.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

namespace pairperf {
namespace {

unsigned prefix_of(const sockaddr* mask) {
  if (mask == nullptr) return 0;
  const auto* bytes = mask->sa_family == AF_INET
                          ? reinterpret_cast<const unsigned char*>(
                                &reinterpret_cast<const sockaddr_in*>(mask)->sin_addr)
                          : reinterpret_cast<const unsigned char*>(
                                &reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr);
  const std::size_t len = mask->sa_family == AF_INET ? 4 : 16;
  unsigned bits = 0;
  for (std::size_t i = 0; i < len; ++i) bits += static_cast<unsigned>(std::popcount(bytes[i]));
  return bits;
}

std::string numeric(const sockaddr* sa) {
  std::array<char, INET6_ADDRSTRLEN> buf{};
  const void* src =
      sa->sa_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(sa)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  if (inet_ntop(sa->sa_family, src, buf.data(), buf.size()) == nullptr) return {};
  return buf.data();
}

std::optional<long> read_sys_long(const std::string& iface, const char* file) {
  std::ifstream in(fmt::format("/sys/class/net/{}/{}", iface, file));
  long value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// Parses a numeric address into bytes; returns the length (4 or 16), 0 on failure.
std::size_t to_bytes(const std::string& address, std::array<unsigned char, 16>& out) {
  if (inet_pton(AF_INET, address.c_str(), out.data()) == 1) return 4;
  if (inet_pton(AF_INET6, address.c_str(), out.data()) == 1) return 16;
  return 0;
}

}  // namespace

void to_json(nlohmann::json& j, const iface_address& addr) {
  j = {{"family", addr.family == AF_INET6 ? "ipv6" : "ipv4"},
       {"address", addr.address},
       {"prefix_len", addr.prefix_len}};
}

void from_json(const nlohmann::json& j, iface_address& addr) {
  addr.family = j.at("family").get<std::string>() == "ipv6" ? AF_INET6 : AF_INET;
  j.at("address").get_to(addr.address);
  j.at("prefix_len").get_to(addr.prefix_len);
}

void to_json(nlohmann::json& j, const interface_info& info) {
  j = {{"name", info.name},       {"index", info.index},        {"up", info.up},
       {"running", info.running}, {"loopback", info.loopback},  {"mtu_bytes", info.mtu},
       {"mac", info.mac},         {"addresses", info.addresses}};
  j["speed_Mbps"] = info.speed_mbps ? nlohmann::json(*info.speed_mbps) : nlohmann::json(nullptr);
}

void from_json(const nlohmann::json& j, interface_info& info) {
  j.at("name").get_to(info.name);
  info.index = j.value("index", 0U);
  info.up = j.value("up", false);
  info.running = j.value("running", false);
  info.loopback = j.value("loopback", false);
  info.mtu = j.value("mtu_bytes", 0U);
  info.mac = j.value("mac", "");
  if (j.contains("speed_Mbps") && j["speed_Mbps"].is_number())
    info.speed_mbps = j["speed_Mbps"].get<int>();
  if (j.contains("addresses")) j.at("addresses").get_to(info.addresses);
}

std::vector<interface_info> list_interfaces() {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) return {};
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> list(raw, freeifaddrs);
  std::map<std::string, interface_info> by_name;
  for (const ifaddrs* it = list.get(); it != nullptr; it = it->ifa_next) {
    interface_info& info = by_name[it->ifa_name];
    info.name = it->ifa_name;
    info.up = (it->ifa_flags & IFF_UP) != 0;
    info.running = (it->ifa_flags & IFF_RUNNING) != 0;
    info.loopback = (it->ifa_flags & IFF_LOOPBACK) != 0;
    if (it->ifa_addr == nullptr) continue;
    const int family = it->ifa_addr->sa_family;
    if (family == AF_INET || family == AF_INET6) {
      info.addresses.push_back({family, numeric(it->ifa_addr), prefix_of(it->ifa_netmask)});
    } else if (family == AF_PACKET) {
      const auto* ll = reinterpret_cast<const sockaddr_ll*>(it->ifa_addr);
      std::string mac;
      for (int i = 0; i < ll->sll_halen; ++i)
        mac += fmt::format("{}{:02x}", i ? ":" : "", ll->sll_addr[i]);
      info.mac = mac;
    }
  }
  std::vector<interface_info> out;
  for (auto& [name, info] : by_name) {
    info.mtu = static_cast<unsigned>(read_sys_long(name, "mtu").value_or(0));
    info.index = ::if_nametoindex(name.c_str());
    // Virtual devices report -1 or fail the read: leave the speed unknown then.
    if (auto speed = read_sys_long(name, "speed"); speed && *speed > 0)
      info.speed_mbps = static_cast<int>(*speed);
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<interface_info> usable_interfaces() {
  auto all = list_interfaces();
  std::erase_if(all, [](const interface_info& i) { return !i.up || i.addresses.empty(); });
  return all;
}

std::optional<interface_info> find_interface(const std::string& name) {
  for (auto& info : list_interfaces()) {
    if (info.name == name) return info;
  }
  return std::nullopt;
}

std::string interface_of_address(const std::string& address) {
  std::array<unsigned char, 16> want{};
  const std::size_t len = to_bytes(address, want);
  if (len == 0) return {};
  for (const auto& info : list_interfaces()) {
    for (const auto& a : info.addresses) {
      std::array<unsigned char, 16> have{};
      if (to_bytes(a.address, have) == len && std::memcmp(have.data(), want.data(), len) == 0)
        return info.name;
    }
  }
  return {};
}

bool in_subnet(const iface_address& net, const std::string& address) {
  std::array<unsigned char, 16> a{};
  std::array<unsigned char, 16> b{};
  const std::size_t la = to_bytes(net.address, a);
  const std::size_t lb = to_bytes(address, b);
  if (la == 0 || la != lb) return false;
  unsigned bits = std::min<unsigned>(net.prefix_len, static_cast<unsigned>(la * 8));
  for (std::size_t i = 0; bits > 0; ++i) {
    const unsigned take = std::min(bits, 8U);
    const auto mask = static_cast<unsigned char>(0xFF << (8 - take));
    if ((a[i] & mask) != (b[i] & mask)) return false;
    bits -= take;
  }
  return true;
}

bool is_loopback(const std::string& address) {
  return address.rfind("127.", 0) == 0 || address == "::1";
}

bool is_link_local(const std::string& address) {
  return address.rfind("fe80", 0) == 0 || address.rfind("169.254.", 0) == 0;
}

std::vector<std::string> name_addresses(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (name.empty() || ::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return {};
  std::vector<std::string> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    std::array<char, NI_MAXHOST> text{};
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, text.data(), text.size(), nullptr, 0,
                      NI_NUMERICHOST) == 0 &&
        std::find(out.begin(), out.end(), text.data()) == out.end())
      out.emplace_back(text.data());
  }
  ::freeaddrinfo(found);
  return out;
}

std::vector<std::string> hostname_addresses() {
  std::string host(256, '\0');
  if (::gethostname(host.data(), host.size()) != 0) return {};
  host.resize(host.find('\0'));
  return name_addresses(host);
}

}  // namespace pairperf
