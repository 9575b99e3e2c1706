#pragma once
// The environment variables that pick interfaces and devices for UCX, NCCL and gloo, read the
// way each library reads them, and checked on both sides of a pair against what exists there and
// what reaches the peer (the findings of `pairperf doctor`).
//   NCCL_SOCKET_IFNAME, NCCL_IB_HCA   comma list of prefixes; "^" excludes, "=" matches exactly;
//                                     NCCL_IB_HCA entries may end in ":port"
//   GLOO_SOCKET_IFNAME                comma list of exact interface names
//   UCX_NET_DEVICES                   comma list of devices (netdevs, or RDMA "mlx5_0:1"), or all
//   CUDA_VISIBLE_DEVICES              indices or GPU UUIDs (a unique prefix is enough)
//   NVIDIA_VISIBLE_DEVICES            all, none, void, or indices / UUIDs (the container runtime)
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/interfaces.h"
#include "core/units.h"  // split_list
#include "host/nccl_probe.h"

namespace pairperf {

// NCCL's interface and HCA filters.
struct nccl_filter {
  bool exclude = false;  // "^..."
  bool exact = false;    // "=..."
  std::vector<std::string> entries;
};
nccl_filter parse_nccl_filter(const std::string& value);
// Whether the filter selects `name` (NCCL's matchIfList; the ":port" of an entry is ignored).
bool nccl_matches(const nccl_filter& f, const std::string& name);
// Which of `names` the filter selects.
std::vector<std::string> nccl_select(const nccl_filter& f, const std::vector<std::string>& names);

// NCCL's interface search as its source has it, for a side where no libnccl.so.2 answered
// (followed from NCCL 2.30.7 src/misc/socket.cc ncclFindInterfaces and src/os/linux.cc
// ncclOsFindInterfaces, ncclFindInterfaceMatchSubnet; nccl_rule_version names it). getifaddrs'
// order (every IPv4 address by ifindex, then every IPv6 one), an interface without carrier
// skipped (IFF_RUNNING, since 2.28.3), NCCL_SOCKET_FAMILY (AF_INET / AF_INET6), ::1 skipped, one
// address per interface name. NCCL_SOCKET_IFNAME longer than one character: only its list; else
// "ib", NCCL_COMM_ID's subnet, "^docker,lo,virbr", "docker", "lo", "virbr".
struct nccl_pick {
  std::string iface;
  std::string address;
};
inline constexpr const char* nccl_rule_version = "2.30.7";
// The interfaces NCCL's search finds, at most `max` (the bootstrap takes 1, NET/Socket 16).
// `env`: the side's NCCL_* variables. `interfaces` in any order (sorted by index here).
std::vector<nccl_pick> nccl_rule_interfaces(std::vector<interface_info> interfaces,
                                            const nlohmann::json& env, std::size_t max);
// The bootstrap's one interface: with NCCL_COMM_ID set, the first address on that address's
// subnet (NCCL_SOCKET_IFNAME and _FAMILY are not read then); else nccl_rule_interfaces(.., 1).
std::optional<nccl_pick> nccl_rule_bootstrap(const std::vector<interface_info>& interfaces,
                                             const nlohmann::json& env);

// A side's NCCL libraries and their answers (host/nccl_probe.h describe_nccl(), in its hello).
struct nccl_side {
  bool known = false;  // the side asked its libraries (its hello carried the answer)
  std::string searched;
  std::vector<nccl_answer> answers;
};
nccl_side nccl_side_from(const nlohmann::json& description);

// One side of the pair as the checks see it.
struct gpu_info {
  unsigned index = 0;
  std::string uuid;    // "GPU-..."
  std::string bus_id;  // "00000000:18:00.0"
  std::string name;
  std::vector<std::string> nvlink_peers;  // PCI bus id at the far end of each active NVLink
};
void to_json(nlohmann::json& j, const gpu_info& g);
void from_json(const nlohmann::json& j, gpu_info& g);

// A side's gloo devices as torch.distributed would make them there (the gloo library's
// description in its hello: transports/gloo/gloo_device.h describe()).
struct gloo_device_fact {
  std::string iface;     // from GLOO_SOCKET_IFNAME, or ""
  std::string hostname;  // else the hostname (or 127.0.0.1, torch's fallback)
  std::string address;   // the address gloo binds ("" when it could not make the device)
  std::string error;     // gloo's error making it
};
struct gloo_side {
  bool known = false;  // the side described its gloo devices (a pairperf built with gloo)
  std::string source;  // how the devices were chosen, in words
  bool loopback_fallback = false;
  std::string ignored_ifname;  // a one-character GLOO_SOCKET_IFNAME torch ignored
  std::vector<gloo_device_fact> devices;
};
gloo_side gloo_side_from(const nlohmann::json& description);
// How gloo orders the two addresses of a pair (libgloo 0.5.0 gloo/transport/tcp/pair.cc,
// Pair::connect: memcmp of the IP addresses; the side whose address sorts lower listens, the
// other connects): the family, then the address in network byte order. nullopt for text that
// is not a numeric address; keys of different families are not comparable (gloo refuses them).
std::optional<std::vector<unsigned char>> gloo_order_key(const std::string& address);

struct side_view {
  std::string name;                               // "client" or "server"
  nlohmann::json env = nlohmann::json::object();  // relevant_environment() of that side
  std::vector<std::string> ifaces;                // interfaces that are up with an address
  std::vector<std::string> rdma;                  // RDMA device names
  std::set<std::string> tested;                   // interfaces the matrix tried on this side
  std::set<std::string> reaching;                 // of those, the ones that reached the peer
  // Of `reaching`, those whose data connection came up but whose probe then failed (its stream
  // stalled past the probe's bound): a path that loses or delays packets, not one that is cut.
  std::set<std::string> degraded;
  std::vector<std::string> ranked;  // reaching interfaces, fastest first
  // Of `ranked`, those a multi-node variable may name: never a loopback interface, which
  // reaches only this host (pasted into a multi-node job, "lo" breaks it).
  std::vector<std::string> recommendable;
  std::set<std::string> loopback;  // this side's loopback interfaces
  // Each library's variable that selects its transports (UCX_TLS), as the transport using that
  // library judges this side's value (registry.h env_axis): the names the side's library lacks,
  // and those it has. One entry per such variable, whether this side sets it or not.
  struct axis_variable {
    std::string transport;  // registry name, e.g. "ucx"
    std::string variable;   // e.g. "UCX_TLS"
    std::vector<std::string> missing, available;
  };
  std::vector<axis_variable> axis_variables;
  std::optional<std::vector<gpu_info>> gpus;  // nullopt: unknown (no NVML)
  std::string hostname_address;               // what the hostname resolves to ("" if it does not)
  std::string hostname_iface;                 // the interface holding that address ("" if none)
  bool loopback_reaches_peer = false;         // one network namespace: 127.0.0.1 is the peer's too
  std::map<std::string, std::string> addresses;  // every address of its interfaces -> interface
  gloo_side gloo;
  std::vector<interface_info> interfaces;  // all of them, with flags, index and addresses
  nccl_side nccl;
};

// What NCCL's bootstrap takes on one side and whether the peer can reach it: asked of a library
// (each answer of the side's nccl), or by NCCL's rule where none answered.
struct nccl_verdict {
  std::string side;
  std::string source;   // "library" or "rule"
  std::string library;  // the file that answered ("" for the rule)
  std::string version;  // its version, or the rule's
  std::string iface, address;
  // reaches: the peer reaches it; fails: it cannot, or NCCL finds no interface; unknown: the
  // library did not answer, or the interface was not probed
  std::string outcome;
  std::string why;
};
void to_json(nlohmann::json& j, const nccl_verdict& v);
std::vector<nccl_verdict> judge_nccl(const side_view& s);

// How sure a finding is that the application fails:
//   fails    the application's connection fails between these nodes: measured by running its
//            library, or certain by the library's rule
//   fragile  it works for this pair but fails for other peers or by chance
//   advice   inconsistent or risky settings that work
enum class severity { fails, fragile, advice };
const char* to_string(severity s) noexcept;

struct finding {
  std::string side;     // "client", "server" or "pair"
  std::string subject;  // the variable, or the topic ("path", "interface")
  std::string problem;
  std::string fix;
  enum severity severity = severity::fails;
  // The transport whose probe failed to make this finding ("ucx"); "" for a rule's finding.
  std::string measured_by = {};
};
void to_json(nlohmann::json& j, const finding& f);

// The application's own connection between the two sides, run through its library with each
// side's environment (doctor's application probe): whether it ran, and how it ended.
struct application_outcome {
  bool ran = false;
  bool ok = false;
  std::string message;  // the library's error where it failed
};

// "Findings (N: F fails, R fragile, A advice):" and one numbered entry each with its severity,
// side, subject, problem and fix; nothing when there are none.
void print_findings(std::FILE* out, const std::vector<finding>& findings);

// The libraries' own connections that doctor ran, by the variable whose findings each decides:
// "GLOO_SOCKET_IFNAME" (gloo, torch.distributed's devices on each side), "UCX_NET_DEVICES" (UCX
// with each side's UCX_* environment).
using measured_connections = std::map<std::string, application_outcome>;

// Every variable check on both sides, and between them. Where a library's own connection was
// measured, its outcome decides whether the findings of its variable are `fails`; else its rules
// decide.
std::vector<finding> check_variables(const side_view& client, const side_view& server,
                                     const measured_connections& measured = {});

}  // namespace pairperf
