#pragma once
// The server side. A supervisor process accepts connections and takes their hellos concurrently
// (each under its own handshake deadline, so an idle or slow peer never blocks another), checks
// the token, and runs one measurement session at a time in a child process it watches: a
// transport library that aborts, or a session stuck inside one, ends that child and its client's
// case, never the server. Authenticated clients that arrive meanwhile wait in a short queue
// (`queued {position}`), beyond it they get `busy {retry_after_s}`.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "harness/server_limits.h"

namespace pairperf {

struct server_options {
  std::string listen_host;  // "" = every address with a token, loopback without (listen_address)
  std::uint16_t port = 0;   // 0 = ephemeral (reported through ready_fd)
  bool once = false;        // serve one client, then return (or after timeouts.idle without one)
  std::optional<int> ready_fd;  // write "<port>\n" here once listening, then close it
  std::string token;            // clients must present it ("" = none needed)
  struct timeouts timeouts;     // handshake (each hello, each reply) and idle waits for clients
  server_limits limits;         // what one client may ask for
  drive_allowlist drive;        // where `drive` may send this server; empty = refused
  std::FILE* log = stderr;      // one line per client and per case; nullptr = silent
  // The transports served (empty: every built-in one): cases of others are refused, and their
  // libraries are neither loaded nor probed (libfabric's discovery: 0.3 s at start).
  std::vector<std::string> transports;
  // Each session in a child process. Off where forking is unsafe (a server thread inside an MPI
  // process): the session then runs in the supervisor, which waits for it.
  bool isolate = true;
};

// Where the server listens: what --listen said, else every address when a token guards the
// port and 127.0.0.1 when none does.
std::string listen_address(const server_options& options);

// Serves until `stop` becomes true (the current session is ended within a second, its client
// told why) or, with once, after one client. Returns 0, or throws step_error when the control
// port cannot be opened.
int run_server(const server_options& options, const std::atomic<bool>& stop);

}  // namespace pairperf
