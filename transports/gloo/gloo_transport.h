#pragma once
// gloo's TCP transport (libgloo, the library torch.distributed's ProcessGroupGloo runs on) as a
// pairperf transport. Each side makes its devices from its own environment as torch does
// (gloo_device.h), one gloo context of two ranks per device, and one pair per context; the pairs'
// addresses travel over the control channel and connect through gloo's own Pair::connect, so
// gloo's rules decide whether the pair connects (the side whose address sorts lower listens, the
// other connects to it) and its own error says why not.
//
// Operations are unbound-buffer sends and receives on the first device's pair, all in one slot:
// gloo matches a slot's messages to receives in posting order, so the data and sync channels stay
// ordered with each other (the contract of transport.h). gloo's completions are waited for by
// blocking calls (UnboundBuffer::waitSend / waitRecv; a wait that times out closes every pair), so
// two waiter threads, one for sends and one for receives, each waiting in posting order, hand
// completions to poll(), which never blocks.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/errors.h"
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
  [[nodiscard]] int poll(std::span<completion> out) noexcept override;
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
  // One registered buffer and gloo's unbound buffer over it.
  struct region {
    std::byte* base = nullptr;
    std::size_t length = 0;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  struct pending {
    gloo::transport::UnboundBuffer* buffer = nullptr;
    completion done;
  };
  // Waits for one kind of operation in posting order and queues its completions.
  class waiter {
   public:
    waiter(gloo_transport& owner, op_kind kind);
    ~waiter();
    waiter(const waiter&) = delete;
    waiter& operator=(const waiter&) = delete;
    void push(const pending& p);

   private:
    void loop();
    gloo_transport& m_owner;
    op_kind m_kind;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<pending> m_queue;  // front: the operation being waited for
    bool m_stop = false;
    std::thread m_thread;
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
  std::unique_ptr<waiter> m_sends, m_recvs;

  std::mutex m_done_mutex;
  std::deque<completion> m_done;
  std::atomic<std::size_t> m_done_count{0};
  mutable std::mutex m_error_mutex;
  std::string m_error;
  std::atomic<bool> m_failed{false};
  std::atomic<bool> m_peer_gone{false};
};

}  // namespace pairperf
