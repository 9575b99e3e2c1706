#pragma once
// The control channel between client and server: framed JSON messages (frame.h) over one TCP
// connection, in named states (iperf3's PARAM_EXCHANGE ... EXCHANGE_RESULTS):
//
//   client                         server
//   hello {protocol, token, host,  ->
//          budget_s?, ticket?}        (budget_s: what its cases should take; ticket: from a busy)
//                                  <- queued {position} (zero or more: others are being served)
//                                  <- hello {protocol, host} | refused {reason, protocol}
//                                     | busy {reason, retry_after_s, position, ticket?} (the
//                                       queue is full: come back after retry_after_s, the queue's
//                                       expected wait, with the ticket, which keeps the place
//                                       `position` in line ahead of later clients)
//   case {case, config, address,   ->
//         regions}
//                                  <- ready {address, regions} | error {status, message}
//   (both connect the data transport at once; a failure is the client's result, and the
//    server answers the next `run` with its own)
//   run {phase, iterations,        ->
//        continues?, budget_s?}
//                                  <- running
//   (both run the pattern)
//                                  <- results {...} | error {...}
//   (a measured phase with continues: true adds to the measurement before it: the results are
//    those of every phase of it together)
//   A timed phase (run {budget_s}: a ping-pong for that long, `iterations` its cap) ends so:
//   stop {iterations}              ->  (the client's last round trip is done)
//                                  <- stopped
//   (the client sends one closing data message into the receive the server had posted)
//                                  <- results {...} | error {...}
//   ... next case ...
//   bye                            ->
//
// A mesh driven from outside (`pairperf mesh --hosts`) asks a server to measure towards another:
//   drive {target, config, cases}  ->
//                                  <- driven {results} | error {message}
// (the server runs the cases as a client of `target`, bounded by the config's timeouts)
//
// Every call takes the step name and a timeout; failures throw step_error naming the step, the
// peer address and the local interface. A malformed, truncated or oversized frame is answered
// with an `error` message to the peer and then thrown as a protocol error. Not thread-safe.
#include <chrono>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/errors.h"
#include "core/frame.h"
#include "core/socket.h"

namespace pairperf {

// Version of the control protocol; a hello with another version is refused. 4: each transport's
// own options travel as its object under the run config's "transports" (3 had "ucx" and
// "verbs" keys, which a 4 peer would silently ignore), and `results` carries "path_evidence".
// 5: UCX's tags carry the case's index (a worker serves consecutive cases; a 4 peer's tags would
// match none of a 5 peer's receives).
inline constexpr int control_protocol_version = 5;
inline constexpr std::uint16_t default_control_port = 18515;

enum class msg_type {
  hello,
  case_,
  ready,
  run,
  running,
  results,
  bye,
  refused,
  error,
  drive,
  driven,
  queued,
  busy,
  stop,
  stopped
};

const char* to_string(msg_type type) noexcept;
std::optional<msg_type> parse_msg_type(std::string_view text) noexcept;

struct message {
  msg_type type;
  nlohmann::json body;  // the whole object, "type" included
};

class control_channel {
 public:
  // `place` names the peer and the local interface; each call supplies the step.
  control_channel(unique_fd fd, where place);

  void send(msg_type type, nlohmann::json body, std::string_view step,
            std::chrono::nanoseconds timeout);
  message receive(std::string_view step, std::chrono::nanoseconds timeout);
  // Receives and requires `want`. A peer's `refused` throws kind refused, its `error` throws kind
  // error (the peer's text in both); any other type is a protocol error.
  nlohmann::json expect(msg_type want, std::string_view step, std::chrono::nanoseconds timeout);
  // Throws what expect() would for `msg` when `want` was expected (it never returns).
  [[noreturn]] void unexpected(message msg, msg_type want, std::string_view step);
  // Best effort: tells the peer why we stop. Never throws.
  void send_error(const std::string& text) noexcept;

  [[nodiscard]] const where& place() const noexcept { return m_place; }
  [[nodiscard]] int fd() const noexcept { return m_fd.get(); }
  // Whether bytes from the peer wait to be read (a message may follow). Does not block.
  [[nodiscard]] bool readable() const noexcept;
  // Whether the peer has sent a single byte yet.
  [[nodiscard]] bool received_anything() const noexcept { return m_received > 0; }

 private:
  [[nodiscard]] where at(std::string_view step) const;

  unique_fd m_fd;
  where m_place;
  frame_decoder m_decoder;
  std::size_t m_received = 0;
};

}  // namespace pairperf
