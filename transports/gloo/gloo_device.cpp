#include "transports/gloo/gloo_device.h"

#include <fmt/format.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <sstream>

namespace pairperf::gloo_env {
namespace {

// torch's kLoopbackAddress (ProcessGroupGloo.cpp).
constexpr const char* loopback_address = "127.0.0.1";

std::string this_hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return {};
  return name.data();
}

}  // namespace

std::vector<std::string> torch_split(const std::string& value) {
  std::vector<std::string> pieces;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, ',')) pieces.push_back(item);
  return pieces;
}

bool hostname_resolves_to_usable_address(const std::string& hostname) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (::getaddrinfo(hostname.c_str(), nullptr, &hints, &result) != 0) return false;
  bool usable = false;
  for (const addrinfo* rp = result; rp != nullptr && !usable; rp = rp->ai_next) {
    const int fd = ::socket(rp->ai_family, rp->ai_socktype, rp->ai_protocol);
    if (fd == -1) continue;
    usable = ::bind(fd, rp->ai_addr, rp->ai_addrlen) == 0;
    ::close(fd);
  }
  ::freeaddrinfo(result);
  return usable;
}

device_choice choose(const std::optional<std::string>& ifname, const std::string& hostname,
                     const std::string& pin) {
  device_choice c;
  if (!pin.empty()) {
    c.devices.push_back(device_spec{pin, {}});
    c.source = fmt::format("--iface {} (as GLOO_SOCKET_IFNAME={})", pin, pin);
    return c;
  }
  if (ifname && ifname->size() > 1) {
    for (const auto& name : torch_split(*ifname)) c.devices.push_back(device_spec{name, {}});
    c.source = fmt::format("GLOO_SOCKET_IFNAME={}", *ifname);
    if (!c.devices.empty()) return c;
  }
  if (ifname && ifname->size() <= 1) c.ignored_ifname = *ifname;
  if (!hostname.empty() && hostname_resolves_to_usable_address(hostname)) {
    c.devices.push_back(device_spec{{}, hostname});
    c.source = fmt::format("the hostname {}", hostname);
    return c;
  }
  c.devices.push_back(device_spec{{}, loopback_address});
  c.loopback_fallback = true;
  c.source = fmt::format(
      "loopback: the hostname {} does not resolve to an address this host can bind (torch warns "
      "\"Unable to resolve hostname to a (local) address. Using the loopback address as "
      "fallback.\")",
      hostname.empty() ? "(none)" : hostname);
  return c;
}

device_choice choose_from_environment(const std::string& pin) {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  return choose(ifname != nullptr ? std::optional<std::string>(ifname) : std::nullopt,
                this_hostname(), pin);
}

nlohmann::json describe(const device_choice& choice) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& spec : choice.devices) {
    nlohmann::json d = spec.iface.empty() ? nlohmann::json{{"hostname", spec.hostname}}
                                          : nlohmann::json{{"iface", spec.iface}};
    try {
      gloo::transport::tcp::attr attr;
      attr.iface = spec.iface;
      attr.hostname = spec.iface.empty() ? spec.hostname : std::string();
      const auto resolved = gloo::transport::tcp::CreateDeviceAttr(attr);
      std::array<char, NI_MAXHOST> host{};
      if (::getnameinfo(reinterpret_cast<const sockaddr*>(&resolved.ai_addr),
                        static_cast<socklen_t>(resolved.ai_addrlen), host.data(), host.size(),
                        nullptr, 0, NI_NUMERICHOST) == 0) {
        d["address"] = host.data();
      } else {
        d["error"] = "gloo's address could not be printed";
      }
    } catch (const std::exception& e) {
      d["error"] = e.what();
    }
    devices.push_back(std::move(d));
  }
  nlohmann::json j{{"source", choice.source},
                   {"loopback_fallback", choice.loopback_fallback},
                   {"devices", devices}};
  if (!choice.ignored_ifname.empty()) j["ignored_GLOO_SOCKET_IFNAME"] = choice.ignored_ifname;
  return j;
}

std::shared_ptr<gloo::transport::Device> make_device(const device_spec& spec) {
  gloo::transport::tcp::attr attr;
  if (!spec.iface.empty()) {
    attr.iface = spec.iface;
  } else {
    attr.hostname = spec.hostname;
  }
  return gloo::transport::tcp::CreateDevice(attr);
}

}  // namespace pairperf::gloo_env
