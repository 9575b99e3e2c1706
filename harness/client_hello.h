#pragma once
// The client's side of hello (core/control.h): the server's hello, or its reasons not to serve.
// A busy server (its queue full) is a queue, not a failure: open_hello() waits its turn.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "core/config.h"
#include "core/control.h"
#include "core/socket.h"

namespace pairperf {

// The server's `busy` reply: come back after retry_after_s, presenting the ticket to keep the
// place in line. Kind refused, as before tickets, for a caller that does not wait.
class busy_reply : public step_error {
 public:
  busy_reply(where place, const std::string& reason, double retry_after_s,
             std::optional<std::uint64_t> ticket, std::optional<std::uint64_t> position)
      : step_error(error_kind::refused, std::move(place),
                   "peer is busy: " + reason + " (retry after " +
                       nlohmann::json(retry_after_s).dump() + " s)"),
        reason(reason),
        retry_after_s(retry_after_s),
        ticket(ticket),
        position(position) {}
  std::string reason;  // the server's words
  double retry_after_s;
  std::optional<std::uint64_t> ticket;
  std::optional<std::uint64_t> position;  // this client's place in line (1 = next)
};

// The server stayed busy past the client's bound (--wait-busy): nothing was measured, which the
// exit contract calls inconclusive (4), not a failed measurement (1).
class server_stayed_busy : public step_error {
 public:
  using step_error::step_error;
};

// What a client tells the server in its hello beyond the token, and how long it waits its turn.
struct hello_request {
  std::string token;
  // What this client's cases should take, in seconds (planned_seconds, client.h): the server
  // estimates its queue's wait from it. 0 = unknown.
  double budget_s = 0;
  // How long to wait out `busy` replies (and, once queued, the server's other clients) before
  // giving up; 0 = fail at the first busy, as a client without the option would.
  std::chrono::nanoseconds wait_busy = std::chrono::minutes(2);
  std::FILE* progress = stderr;  // where the one "waiting" line goes; null = silent
  const std::atomic<int>* interrupted = nullptr;  // a signal ends the wait within 0.1 s
  // Not zero: the hello asks for NCCL's answer on the server's host ("want": ["nccl"]) and grants
  // the server this long to ask its libraries, on top of the handshake bound for the reply.
  std::chrono::nanoseconds nccl_budget{0};
};

// Says hello on a connected channel and waits for the server's: through `queued` replies while
// others are served (up to max(timeouts.idle, queue_wait)), or until `refused` (thrown, kind
// refused) or `busy` (thrown as busy_reply).
nlohmann::json say_hello(control_channel& channel, const hello_request& request, const timeouts& t,
                         std::optional<std::uint64_t> ticket = std::nullopt,
                         std::chrono::nanoseconds queue_wait = std::chrono::nanoseconds::zero());

// Connects to `server` and says hello, waiting out a busy server: after each `busy`, it sleeps the
// server's retry-after (with +-20% jitter, so clients turned away together do not return together)
// and comes back with its ticket, until request.wait_busy has passed; then server_stayed_busy.
// Prints once where it stands in line. `step` names the connection in errors ("control connect").
std::pair<control_channel, nlohmann::json> open_hello(const endpoint& server,
                                                      const std::string& step,
                                                      const hello_request& request,
                                                      const timeouts& t);

}  // namespace pairperf
