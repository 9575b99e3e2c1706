#pragma once
// The vocabulary of a transport's operations, shared by the transports (transports/transport.h)
// and the measurement loops that drive them (patterns/): what is posted and what completes.
#include <cstddef>
#include <cstdint>

namespace pairperf {

enum class op_kind : std::uint8_t { send, recv, put, get };

// Two independent, ordered streams of messages between the peers: `data` carries the measured
// payload, `sync` the pattern's small acknowledgements. Within one channel and direction,
// messages arrive in the order they were posted and match receives in the order those were
// posted; a sync message posted after data messages is delivered after them.
enum class op_channel : std::uint8_t { data, sync };

enum class side { client, server };

struct op {
  op_kind kind = op_kind::send;
  op_channel channel = op_channel::data;
  std::byte* local = nullptr;
  std::size_t length = 0;
  std::uint64_t cookie = 0;  // returned in the completion
  std::uint32_t remote = 0;  // put/get: index into the regions given to set_remote_regions()
  // The poster takes post()'s return of 1 as this operation's completion: a transport that
  // finished it inside the call (UCX's eager send) may say so instead of queueing a completion
  // for the next poll. A transport is free to ignore it (return 0 and queue one as always).
  bool may_complete_in_post = false;
  // The poster counts this operation's completion and needs no cookie back (a ping-pong's
  // receive: one at a time, in order): a transport may add it to its counter
  // (transport::counted_completions()) instead of queueing a completion, sparing the callback
  // and the poll their bookkeeping. A transport is free to ignore it and queue one as always.
  bool counted = false;
};

struct completion {
  std::uint64_t cookie = 0;
  op_kind kind = op_kind::send;
};

}  // namespace pairperf
