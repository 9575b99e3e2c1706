#pragma once
// Which gloo devices a process makes from its environment, the way torch.distributed's
// ProcessGroupGloo makes them, so that a gloo case connects exactly as the application would.
// Followed from torch 1.13.1 (Debian's python3-torch 1.13.1+dfsg, which links Debian's libgloo0):
//   torch/csrc/distributed/c10d/init.cpp, the ProcessGroupGloo constructor binding:
//     GLOO_SOCKET_IFNAME is read only when it is longer than one character; it is split at ','
//     (c10d::split: std::getline, no trimming) and each piece makes one device
//     (createDeviceForInterface), else one device from createDefaultDevice().
//   torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, createDefaultDevice():
//     the hostname (gethostname) when doesHostnameResolveToUsableAddress() (getaddrinfo,
//     AF_UNSPEC, SOCK_STREAM; some address binds), else "127.0.0.1" with the warning
//     "Unable to resolve hostname to a (local) address. Using the loopback address as fallback."
//   torch/csrc/distributed/c10d/GlooDeviceFactory.cpp, makeTCPDevice(): attr.iface for an
//     interface, else attr.hostname; gloo::transport::tcp::CreateDevice(attr).
// Everything after the choice is gloo's own code (device address lookup, pair connect).
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gloo::transport {
class Device;
}

namespace pairperf::gloo_env {

struct device_spec {
  std::string iface;     // an interface name (GLOO_SOCKET_IFNAME), or ""
  std::string hostname;  // else the name or address gloo resolves and binds
};

struct device_choice {
  std::vector<device_spec> devices;
  // How the choice was made, in words: "GLOO_SOCKET_IFNAME=eth0", "the hostname node-a",
  // "loopback: the hostname node-a does not resolve to an address this host can bind".
  std::string source;
  // The one-character GLOO_SOCKET_IFNAME torch ignored, where it did ("" otherwise).
  std::string ignored_ifname;
  bool loopback_fallback = false;
};

// torch's c10d::split: std::getline pieces, empty ones kept (but not a trailing one).
std::vector<std::string> torch_split(const std::string& value);

// torch's doesHostnameResolveToUsableAddress().
bool hostname_resolves_to_usable_address(const std::string& hostname);

// The choice for this process: `ifname` is GLOO_SOCKET_IFNAME (nullopt: unset), `hostname` the
// host's name. `pin` (a client's --iface) replaces GLOO_SOCKET_IFNAME when not empty.
device_choice choose(const std::optional<std::string>& ifname, const std::string& hostname,
                     const std::string& pin);

// This process's choice: its GLOO_SOCKET_IFNAME and gethostname().
device_choice choose_from_environment(const std::string& pin);

// The choice with the address gloo gives each device (gloo::transport::tcp::CreateDeviceAttr,
// the lookup CreateDevice does, without starting a device): {"source", "loopback_fallback",
// "ignored_GLOO_SOCKET_IFNAME", "devices": [{"iface" | "hostname", "address" | "error"}]}.
// `pairperf doctor` reads each side's from its hello (the gloo library's description).
nlohmann::json describe(const device_choice& choice);

// gloo's device for one spec (gloo::transport::tcp::CreateDevice); throws what gloo throws (an
// interface without an address: "Unable to find address for: NAME").
std::shared_ptr<gloo::transport::Device> make_device(const device_spec& spec);

}  // namespace pairperf::gloo_env
