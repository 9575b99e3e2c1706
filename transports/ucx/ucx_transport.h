#pragma once
// UCX (UCP) as a transport: tag matching, active messages and RMA over one endpoint per side,
// with a context built per case from ucp_config_read + ucp_config_modify (TLS from the case's
// tls, NET_DEVICES from its interface on the client, --ucx KEY=VALUE) + ucp_init, so that cases
// with different transport sets coexist in one process.
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transports/fifo.h"
#include "transports/registry.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_handles.h"
#include "transports/ucx/ucx_provenance.h"
#include "transports/ucx/ucx_wire.h"

namespace pairperf {

class ucx_transport final : public transport {
 public:
  explicit ucx_transport(const transport_params& params);
  ~ucx_transport() override;
  ucx_transport(const ucx_transport&) = delete;
  ucx_transport& operator=(const ucx_transport&) = delete;

  static transport_entry entry();

  [[nodiscard]] capabilities caps() const override;
  std::vector<std::byte> local_address() override;
  void check_peer_address(std::span<const std::byte> peer_address) override;
  void connect(std::span<const std::byte> peer_address) override;
  mem_region register_memory(std::byte* address, std::size_t length, memory_type type) override;
  void set_remote_regions(const std::vector<remote_region>& regions) override;
  void probe_next_operation() override { m_probe = true; }
  // post() and poll() are defined below, inlined into this transport's loops (run_phase): a
  // data message's post and the loop's every step.
  [[nodiscard]] int post(const op& operation) noexcept override;
  [[nodiscard]] int poll(std::span<completion> out) noexcept override;
  // A ping-pong's receives (op::counted) complete into a counter: their callback only unlinks
  // and counts, and the loop reads the count, with no completion queued and none to pop.
  [[nodiscard]] std::uint64_t counted_completions() const noexcept override { return m_counted; }
  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override;
  void start_flush() noexcept override;
  [[nodiscard]] bool flushed() const noexcept override { return m_worker_flushed; }
  [[nodiscard]] std::string last_error() const override { return m_error; }
  [[nodiscard]] bool peer_gone() const noexcept override { return m_peer_gone; }
  [[nodiscard]] provenance describe() const override;

 private:
  // What a posted operation reports when it completes, kept in the space UCX reserves in every
  // request (ucx::request_user_bytes): an operation costs no allocation and no pool of ours, and
  // one that completes inside its post (an eager send) no bookkeeping at all. The outstanding
  // ones form a list, so that a case that ends early can cancel them.
  struct request_info {
    std::uint64_t cookie;
    op_kind kind;
    request_info* prev;
    request_info* next;
  };
  static_assert(sizeof(request_info) <= ucx::request_user_bytes);
  struct am_arrival {
    void* data;
    std::size_t length;
    bool rndv;                    // data is a descriptor for ucp_am_recv_data_nbx
    bool persistent;              // data must be released with ucp_am_data_release
    std::vector<std::byte> copy;  // eager data UCX would not keep
  };

  static void on_send(void* request, ucs_status_t status, void* user_data);
  static void on_tag_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                          void* user_data);
  // A counted receive's (op::counted): into m_counted, no completion queued.
  static void on_counted_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                              void* user_data);
  static void on_am_data(void* request, ucs_status_t status, std::size_t length, void* user_data);
  static void on_flush(void* request, ucs_status_t status, void* user_data);
  static void on_worker_flush(void* request, ucs_status_t status, void* user_data);
  static ucs_status_t on_am(void* arg, const void* header, std::size_t header_length, void* data,
                            std::size_t length, const ucp_am_recv_param_t* param);

  static void on_probed(void* request, ucs_status_t status, void* user_data);
  // Queues a completion, or records the failure.
  void settle(const completion& done, ucs_status_t status) noexcept;
  void complete(void* request, ucs_status_t status) noexcept;
  // Takes a post's return: done at once (its completion is queued), failed, or outstanding.
  int track(ucs_status_ptr_t request, const op& operation, const char* what) noexcept;
  [[gnu::noinline, gnu::cold]] int post_failed(ucs_status_ptr_t request, const char* what) noexcept;
  // Every post but a data message's tag send or receive when nothing is probed or failed: sync
  // messages, active messages, RMA, a probed post, refusals.
  int post_other(const op& operation) noexcept;
  // Posts through `post` (a call taking the request parameters), asking UCX which protocol and
  // lanes carried it when probe_next_operation() asked for that.
  template <class Post>
  int post_probed(const op& operation, const ucp_request_param_t& params, const char* what,
                  Post post) noexcept;
  void link(request_info* info) noexcept;
  void unlink(request_info* info) noexcept;
  // The request parameters of each kind of post, built once (user_data is the transport).
  void build_params() noexcept;
  void cancel_outstanding() noexcept;
  int post_data_send(const op& operation) noexcept;
  int post_data_recv(const op& operation) noexcept;
  int post_rma(const op& operation) noexcept;
  int post_sync_send(const op& operation) noexcept;
  // The sync message a put's flush held back (post_sync_send), once the flush is done. Out of
  // poll()'s line: poll is the polling loop's every step.
  [[gnu::noinline, gnu::cold]] int post_sync_after_flush() noexcept;
  void handshake();
  // Records what UCX says about the protocol and lanes of a request (ucp_request_query).
  void inspect(ucs_status_ptr_t request) noexcept;
  int deliver_am(const am_arrival& arrival, const op& recv) noexcept;

  transport_params m_params;
  bool m_use_am = false;  // this test's data moves as active messages, not tagged messages
  ucs_memory_type_t m_mem_type = UCS_MEMORY_TYPE_HOST;
  ucx::shared_context m_context;
  ucx::worker_ptr m_worker;
  std::size_t m_worker_cases = 1;            // the cases the worker has served, this one included
  ucp_tag_t m_data_tag = 0, m_sync_tag = 0;  // ucx_wire::case_tag of this case
  std::vector<ucx::memory_handle> m_memory;
  std::optional<ucx::endpoint> m_ep;
  std::vector<ucx::rkey_ptr> m_rkeys;
  std::vector<remote_region> m_remote;
  fifo<completion> m_done;
  request_info* m_outstanding = nullptr;  // the list of posted, not yet completed operations
  ucp_request_param_t m_send_params{}, m_recv_params{}, m_counted_recv_params{},
      m_sync_send_params{}, m_sync_recv_params{}, m_am_data_params{};
  std::uint64_t m_counted = 0;  // counted receives completed (counted_completions())
  // A probed post (UCP_OP_ATTR_FLAG_NO_IMM_CMPL) may complete inside the call, before its
  // request_info is written; its callback (on_probed, user_data this) then takes the operation
  // from here and leaves the freeing to the poster, which queries the request first.
  struct probe_state {
    ucx_transport* self = nullptr;
    const op* posting = nullptr;  // while inside the posting call
    bool done_early = false;
  } m_probe_state;
  fifo<op> m_am_posted;           // AM receives waiting for a message
  fifo<am_arrival> m_am_arrived;  // messages waiting for a receive
  bool m_rma_since_flush = false;
  std::optional<op> m_sync_after_flush;
  bool m_flush_done = false;
  bool m_worker_flushed = true;
  bool m_probe = false;
  std::array<std::byte, 8> m_hello_out{}, m_hello_in{};
  std::string m_request_info;
  std::string m_error;
  bool m_failed = false;
  bool m_peer_gone = false;
};

inline void ucx_transport::link(request_info* info) noexcept {
  info->prev = nullptr;
  info->next = m_outstanding;
  if (m_outstanding != nullptr) m_outstanding->prev = info;
  m_outstanding = info;
}

[[gnu::always_inline]] inline int ucx_transport::track(ucs_status_ptr_t request,
                                                       const op& operation,
                                                       const char* what) noexcept {
  if (request == nullptr) {  // done at once
    m_done.push(completion{operation.cookie, operation.kind});
    return 0;
  }
  if (UCS_PTR_IS_ERR(request)) [[unlikely]]
    return post_failed(request, what);
  auto* info = static_cast<request_info*>(request);
  info->cookie = operation.cookie;
  info->kind = operation.kind;
  link(info);
  return 0;
}

[[gnu::always_inline]] inline int ucx_transport::post(const op& operation) noexcept {
  if (operation.channel == op_channel::data && !m_use_am && !m_probe && !m_failed && m_ep)
      [[likely]] {
    if (operation.kind == op_kind::send) {
      const ucs_status_ptr_t request = ucx::api::ucp_tag_send_nbx(
          m_ep->get(), operation.local, operation.length, m_data_tag, &m_send_params);
      // Sent inside the call (eager): the poster counts it now, if it may.
      if (request == nullptr && operation.may_complete_in_post) return 1;
      return track(request, operation, "ucp_tag_send_nbx");
    }
    if (operation.kind == op_kind::recv) {
      const ucs_status_ptr_t request = ucx::api::ucp_tag_recv_nbx(
          m_worker.get(), operation.local, operation.length, m_data_tag, ucx_wire::full_mask,
          operation.counted ? &m_counted_recv_params : &m_recv_params);
      if (request == nullptr && operation.counted) {  // matched a message already there
        ++m_counted;
        return 0;
      }
      return track(request, operation, "ucp_tag_recv_nbx");
    }
  }
  return post_other(operation);
}

[[gnu::always_inline]] inline int ucx_transport::poll(std::span<completion> out) noexcept {
  // Completions already known (an eager send completes in its post) are returned without a
  // progress call first: ucp_worker_progress is the costliest step of a small-message loop.
  if (m_done.empty() && !m_failed) ucx::api::ucp_worker_progress(m_worker.get());
  if (m_failed) [[unlikely]]
    return -1;
  if (m_sync_after_flush) [[unlikely]] {
    if (post_sync_after_flush() != 0) return -1;
  }
  std::size_t n = 0;
  while (n < out.size() && !m_done.empty()) {
    out[n++] = m_done.front();
    m_done.pop();
  }
  return static_cast<int>(n);
}

}  // namespace pairperf
