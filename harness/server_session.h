#pragma once
// One client's session on the server, after its hello was accepted: the hello reply, then the
// cases it sends, one after another, each checked against the server's limits before anything
// is allocated. It runs in a child process of the server's supervisor (server.h).
#include <chrono>
#include <string>

#include "core/control.h"
#include "harness/server.h"

namespace pairperf {

// Returns when the client says bye; throws step_error when it goes away or breaks the protocol.
// A byte on `others_waiting` (-1: none) says that clients are queued: from then on a client
// silent for longer than the handshake bound between requests loses its turn. `nccl_budget` not
// zero: the client's hello asked for NCCL's own answer on this host (doctor, mesh), which the
// hello reply then carries, asked here, in the session, within that time.
void serve_session(const server_options& options, control_channel& channel,
                   const std::string& listen_host, int others_waiting = -1,
                   std::chrono::milliseconds nccl_budget = std::chrono::milliseconds(0));

}  // namespace pairperf
