#pragma once
// The transport interface. A transport moves bytes between two peers for one case; it owns no
// loops, no timing and no statistics (the harness's patterns do). The harness:
//   1. builds one per side from transport_params (constructor: setup, may throw);
//   2. registers every buffer (register_memory) and ships local_address() and the packed keys to
//      the peer over the control channel;
//   3. calls connect() with the peer's address (bounded by params.connect_timeout), then
//      set_remote_regions() with the peer's buffers (for put/get);
//   4. runs each phase of the case's pattern through run_phase(), which every transport
//      defines as patterns/run.h's loops over its own type, so that post()/poll() (noexcept, no
//      allocation once warm) are direct calls inside the timed loop, not virtual ones;
//   5. asks describe() what actually carried the bytes.
// All methods are called from one thread. Sizes are bytes.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/ops.h"
#include "core/result.h"
#include "patterns/pattern_types.h"

namespace pairperf {

// The largest transport address a peer may send (a UCX worker address with many devices is a few
// hundred bytes; a TCP one a short JSON list).
inline constexpr std::size_t max_peer_address_bytes = 64 * 1024;

struct capabilities {
  bool send_recv = false;
  bool put = false;
  bool get = false;
  std::vector<memory_type> memory;  // buffer types this transport can move
  // A message that arrives before its receive is posted waits for it (UCX's unexpected queue, a
  // socket's buffer). Ping-pong then posts the receive after the send, off the round trip's
  // critical path, as ucx_perftest does. False: receives must be posted first (verbs RC answers
  // an early send with RNR).
  bool keeps_early_arrivals = false;
  // Whether its loops honour a ping-pong's time budget (patterns/run.h: the server's loop asks the
  // control channel between polls). False for a transport that waits blocking inside its library
  // (patterns/blocking.h): the harness then plans counted phases.
  bool time_budget = true;
};

// A local buffer registered with the transport; packed_key travels to the peer for RMA.
struct mem_region {
  std::byte* address = nullptr;
  std::size_t length = 0;
  std::vector<std::byte> packed_key;
};

// A peer's buffer as shipped over the control channel: its address in the peer's space and the
// key the transport packed for it (empty where none is needed).
struct remote_region {
  std::uint64_t address = 0;
  std::size_t length = 0;
  std::vector<std::byte> packed_key;
};

// What a transport is built from, per case and side.
struct transport_params {
  test_case test;
  transport_options options;
  enum side side = side::client;
  std::string peer_host;    // the peer's numeric address as the control channel sees it
  std::string listen_host;  // server: the address its control socket listens on ("" = any)
  std::chrono::nanoseconds connect_timeout = std::chrono::seconds(3);
};

// Thrown by a transport's constructor when this host or build cannot run the case (a UCX
// transport name this host lacks, a memory type it cannot move); the case becomes `skipped`.
class transport_unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class transport {
 public:
  virtual ~transport() = default;

  [[nodiscard]] virtual capabilities caps() const = 0;
  // Opaque bytes the peer passes to connect().
  virtual std::vector<std::byte> local_address() = 0;
  // Checks the peer's address (it came over the control channel: untrusted) before any library
  // sees it; throws std::invalid_argument saying what is wrong. The default bounds its size.
  virtual void check_peer_address(std::span<const std::byte> peer_address) {
    if (peer_address.empty() || peer_address.size() > max_peer_address_bytes)
      throw std::invalid_argument("the peer's transport address is empty or larger than 64 KiB");
  }
  // Connects to the peer; both sides call it at the same time. Returns within
  // params.connect_timeout; throws step_error (kind unreachable when the peer cannot be reached).
  virtual void connect(std::span<const std::byte> peer_address) = 0;
  // `type` is the memory the buffer lives in (the case's allocator), passed on to the library.
  virtual mem_region register_memory(std::byte* address, std::size_t length, memory_type type) = 0;
  // The peer's registered buffers, in the order the peer listed them; op.remote indexes them.
  virtual void set_remote_regions(const std::vector<remote_region>& regions) { (void)regions; }
  // Asks the transport to inspect the next data operation it posts for provenance (which
  // protocol and lane carried it); the harness calls it before the measured phase.
  virtual void probe_next_operation() {}

  // Starts an operation; the buffer must stay valid until its completion. Returns 0, or a
  // negative value on failure (last_error() says why), or, only where the operation allows it
  // (op::may_complete_in_post), 1: it completed inside the call and no completion follows.
  [[nodiscard]] virtual int post(const op& operation) noexcept = 0;
  // Makes progress and writes up to out.size() completions; returns how many, or a negative
  // value on failure. Does not block, except in progress_mode::block, where it may sleep up to
  // 10 ms when nothing is ready, and in a transport whose library offers only blocking waits
  // (gloo: caps().time_budget false), which waits for its oldest operation until the phase's
  // deadline and runs its phases through patterns/blocking.h instead.
  [[nodiscard]] virtual int poll(std::span<completion> out) noexcept = 0;
  // How many operations posted with op::counted completed into this transport's counter rather
  // than through poll(): monotonic over the transport's life, advanced only inside post() and
  // poll(). 0 from a transport that queues every completion.
  [[nodiscard]] virtual std::uint64_t counted_completions() const noexcept { return 0; }
  // Runs one phase of the case's pattern: each transport defines it, in the file that defines
  // its post() and poll(), as `return run_pattern(*this, run, buffers, samples, checker,
  // place);` (patterns/run.h), which instantiates the loops for its own final class. The
  // harness's one call per phase; the loops own the timing, a transport only its operations.
  virtual pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                                    sample_recorder& samples, message_check* checker,
                                    const where& place) = 0;
  // A completed send may not have left the process yet (a library may still hold it for its
  // progress engine). After each phase the harness calls start_flush() and polls until
  // flushed(), so nothing stays behind while the harness waits on the control channel.
  virtual void start_flush() noexcept {}
  [[nodiscard]] virtual bool flushed() const noexcept { return true; }
  [[nodiscard]] virtual std::string last_error() const = 0;
  // Whether the last failure was the peer going away (closed or reset), not a local fault.
  [[nodiscard]] virtual bool peer_gone() const noexcept = 0;

  // What really carried the bytes; call after the measured phase.
  [[nodiscard]] virtual provenance describe() const = 0;
};

// One row of a transport's test table: adding a test is one row, not a new code path. A data_op
// of put or get makes the test one-sided: the target side posts nothing for the data.
struct test_spec {
  std::string_view name;
  pattern_kind pattern;
  op_kind data_op;
  std::string_view description;
};

}  // namespace pairperf
