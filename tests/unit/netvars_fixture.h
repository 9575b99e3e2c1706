#pragma once
// The pair and helpers the netvars tests share (test_netvars.cpp, test_netvars_nccl.cpp).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <string>
#include <vector>

#include "host/netvars.h"

namespace pairperf::netvars_test {

using names = std::vector<std::string>;

// An interface as the host facts carry it: index, carrier, addresses in getifaddrs' order.
inline interface_info nic(const std::string& name, unsigned index,
                          std::vector<std::string> addresses, bool running = true) {
  interface_info i;
  i.name = name;
  i.index = index;
  i.up = true;
  i.running = running;
  i.loopback = name == "lo";
  for (auto& a : addresses) {
    const bool v6 = a.find(':') != std::string::npos;
    i.addresses.push_back({v6 ? AF_INET6 : AF_INET, a, v6 ? 64U : 24U});
  }
  return i;
}

// A pair like the issue's: client with a reaching and a non-reaching NIC, server with one.
struct pair_fixture {
  side_view client, server;
  pair_fixture() {
    client.name = "client";
    client.ifaces = {"lo", "bond0.118", "enp141s0"};
    client.tested = {"bond0.118", "enp141s0"};
    client.reaching = {"bond0.118"};
    client.ranked = client.recommendable = {"bond0.118"};
    client.hostname_address = "10.118.0.1";
    client.hostname_iface = "bond0.118";
    client.loopback = {"lo"};
    client.interfaces = {nic("lo", 1, {"127.0.0.1"}), nic("bond0.118", 2, {"10.118.0.1"}),
                         nic("enp141s0", 3, {"10.200.0.1"})};
    server.name = "server";
    server.ifaces = {"lo", "eth0"};
    server.tested = {"eth0"};
    server.reaching = {"eth0"};
    server.ranked = server.recommendable = {"eth0"};
    server.hostname_address = "10.118.0.2";
    server.hostname_iface = "eth0";
    server.loopback = {"lo"};
    server.interfaces = {nic("lo", 1, {"127.0.0.1"}), nic("eth0", 2, {"10.118.0.2"})};
  }
  // Both sides set every socket variable to what reaches: the healthy pair.
  void healthy() {
    client.env = {{"UCX_NET_DEVICES", "bond0.118"},
                  {"NCCL_SOCKET_IFNAME", "bond0.118"},
                  {"GLOO_SOCKET_IFNAME", "bond0.118"}};
    server.env = {{"UCX_NET_DEVICES", "eth0"},
                  {"NCCL_SOCKET_IFNAME", "eth0"},
                  {"GLOO_SOCKET_IFNAME", "eth0"}};
  }
};

inline bool has(const std::vector<finding>& f, const std::string& side, const std::string& subject,
                const std::string& text = "") {
  return std::any_of(f.begin(), f.end(), [&](const finding& x) {
    return x.side == side && x.subject == subject &&
           (x.problem.find(text) != std::string::npos || x.fix.find(text) != std::string::npos);
  });
}

inline std::string dump(const std::vector<finding>& f) {
  std::string out;
  for (const auto& x : f) out += x.side + " " + x.subject + ": " + x.problem + " | " + x.fix + "\n";
  return out;
}

inline severity worst(const std::vector<finding>& f, const std::string& subject) {
  severity w = severity::advice;
  bool any = false;
  for (const auto& x : f) {
    if (x.subject != subject) continue;
    if (!any || static_cast<int>(x.severity) < static_cast<int>(w)) w = x.severity;
    any = true;
  }
  EXPECT_TRUE(any) << "no " << subject << " finding:\n" << dump(f);
  return w;
}

}  // namespace pairperf::netvars_test
