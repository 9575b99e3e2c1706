#pragma once
// gloo's TCP transport (libgloo, the library torch.distributed's ProcessGroupGloo runs on) as a
// pairperf transport. Each side makes its devices from its own environment as torch does
// (gloo_device.h), one gloo context of two ranks per device, and one pair per context; the pairs'
// addresses travel over the control channel and connect through gloo's own Pair::connect, so
// gloo's rules decide whether the pair connects (the side whose address sorts lower listens, the
// other connects to it) and its own error says why not.
//
// Operations are sends and receives on the first device's pair, all in one slot, each through an
// unbound buffer of its own (as torch.distributed's ProcessGroupGloo makes one per operation):
// gloo matches a slot's messages to receives in posting order, so the data and sync channels stay
// ordered with each other (the contract of transport.h). gloo's event loop thread moves the bytes;
// the measuring thread waits for each completion in gloo's own blocking wait
// (UnboundBuffer::waitSend / waitRecv), as torch does, so no thread of pairperf's competes with
// gloo's loop for the CPU (the loops of patterns/blocking.h; caps().time_budget is false). A wait
// is bounded by the phase's deadline; gloo closes every pair when one times out, which ends the
// case as the deadline would.
#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/socket.h"
#include "transports/gloo/gloo_device.h"
#include "transports/registry.h"
#include "transports/transport.h"

namespace gloo {
class Context;
namespace transport {
class Context;
class Device;
class Pair;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace pairperf {

class gloo_transport final : public transport {
 public:
  static transport_entry entry();
  explicit gloo_transport(const transport_params& params);
  ~gloo_transport() override;
  gloo_transport(const gloo_transport&) = delete;
  gloo_transport& operator=(const gloo_transport&) = delete;

  [[nodiscard]] capabilities caps() const override;
  std::vector<std::byte> local_address() override;
  void check_peer_address(std::span<const std::byte> peer_address) override;
  void connect(std::span<const std::byte> peer_address) override;
  mem_region register_memory(std::byte* address, std::size_t length, memory_type type) override;
  [[nodiscard]] int post(const op& operation) noexcept override;
  // Waits for the oldest operation of either kind, in posting order, until the phase's deadline
  // (gloo has no wait that can look and come back): for callers outside the phases' loops.
  [[nodiscard]] int poll(std::span<completion> out) noexcept override;
  // The loops' wait (patterns/blocking.h): the oldest posted operation of `kind`.
  [[nodiscard]] int wait(op_kind kind, deadline_t deadline, completion& done) noexcept;
  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override;
  [[nodiscard]] std::string last_error() const override;
  [[nodiscard]] bool peer_gone() const noexcept override { return m_peer_gone.load(); }
  [[nodiscard]] provenance describe() const override;

  // gloo's own collective context over the first device's connected pair (rank 0 the client,
  // 1 the server), for gloo's algorithms (gloo::allreduce). Valid after connect().
  [[nodiscard]] std::shared_ptr<gloo::Context> collective_context() const;
  [[nodiscard]] const gloo_env::device_choice& choice() const noexcept { return m_choice; }

 private:
  // A registered buffer (operations must lie inside one).
  struct region {
    std::byte* base = nullptr;
    std::size_t length = 0;
  };
  // A posted operation and gloo's unbound buffer over its bytes.
  struct pending {
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    completion done;
    std::uint64_t seq = 0;  // posting order across both kinds (poll)
  };

  void fail(const std::string& why, bool peer_gone) noexcept;
  [[nodiscard]] where place(const std::string& step, const std::string& peer) const;

  transport_params m_params;
  gloo_env::device_choice m_choice;
  int m_rank = 0;
  std::vector<std::shared_ptr<gloo::transport::Device>> m_devices;
  std::vector<std::shared_ptr<gloo::transport::Context>> m_contexts;
  std::vector<std::string> m_self;  // each pair's address as gloo prints it
  std::vector<std::string> m_peer;
  std::vector<region> m_regions;
  bool m_connected = false;
  std::deque<pending> m_sends, m_recvs;
  // Completed operations' buffers, destroyed in a later wait (see wait()).
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> m_retired;
  std::uint64_t m_posted = 0;
  deadline_t m_deadline{};  // the current phase's, for poll()

  std::string m_error;
  bool m_failed = false;
  std::atomic<bool> m_peer_gone{false};
};

}  // namespace pairperf
