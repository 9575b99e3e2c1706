#pragma once
// The server side: accepts clients one after another on the control port and runs each case
// they send. It survives any client failure: a client that disappears, hangs, or sends garbage
// costs at most its timeouts, then the next client is served.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "harness/config.h"

namespace pairperf {

struct server_options {
  std::string listen_host;  // "" = all addresses
  std::uint16_t port = 0;   // 0 = ephemeral (reported through ready_fd)
  bool once = false;        // serve one client, then return (or after timeouts.idle without one)
  std::optional<int> ready_fd;  // write "<port>\n" here once listening, then close it
  std::string token;            // clients must present it ("" = none needed)
  struct timeouts timeouts;     // handshake and idle waits for clients
  std::FILE* log = stderr;      // one line per client and per case; nullptr = silent
};

// Serves until `stop` becomes true (checked at least every 200 ms while idle) or, with once, after
// one client. Returns 0, or throws step_error when the control port cannot be opened.
int run_server(const server_options& options, const std::atomic<bool>& stop);

}  // namespace pairperf
