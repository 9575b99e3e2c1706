#pragma once
// The verbs transport's own options: device, addressing and work-request shaping. They travel as
// the "verbs" object of the run's transport options and are checked on both sides (the server's
// come from the peer).
#include <nlohmann/json.hpp>
#include <string>

#include "transports/registry.h"

namespace pairperf::verbs {

inline constexpr const char* name = "verbs";  // the registry name, and its options' key

struct options {
  std::string device;    // --ib-dev NAME[:PORT]; "" = from --iface, else the first active port
  int gid_index = -1;    // --gid-index; -1 = automatic (RoCE v2 IPv4-mapped first)
  unsigned mtu = 0;      // --mtu in bytes (256..4096); 0 = the port's active MTU
  unsigned qps = 1;      // --qps: data queue pairs (a separate one carries sync messages)
  bool rdma_cm = false;  // --rdma-cm: connect through librdmacm, not the control channel
  unsigned inline_bytes = 64;  // --inline: messages up to this size are posted inline (0 = never)
  unsigned signal_every = 16;  // --signal-every: stream tests request a completion every Nth post
};

// Throws usage_error naming the option and its range.
void check(const options& o);

nlohmann::json to_json(const options& o);
// Absent keys take the defaults; a wrong type or a value out of range throws usage_error.
options options_from(const nlohmann::json& own);

// --ib-dev, --gid-index, --mtu, --qps, --rdma-cm, --inline, --signal-every on `run`.
transport_cli add_run_options(CLI::App& run);

}  // namespace pairperf::verbs
