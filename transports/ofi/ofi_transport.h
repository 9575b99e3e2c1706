#pragma once
// libfabric (OFI) over reliable-datagram (FI_EP_RDM) endpoints, the kind EFA, NCCL's aws-ofi
// plugin and NIXL use: tagged messages and RMA as rows of one table, the provider as the axis
// (--ofi-provider 'tcp;ofi_rxm', shm, verbs;ofi_rxm, efa...). Each side opens fabric, domain, one
// endpoint, an address vector and one completion queue; the endpoint names travel over the
// control channel, each side inserts the other's into its address vector, and one tagged message
// each way proves the path before the measurement.
//
// Data and sync messages are tagged apart and ordered (FI_ORDER_SAS is required). A sync message
// after RMA writes waits for the writes' delivery completions unless the provider orders sends
// after writes (FI_ORDER_SAW). Receives are posted before the sends they answer (an arrival then
// takes the provider's expected path, as in fi_pingpong). Posts never block: what the provider
// cannot take yet waits in order (receives apart) and poll() posts it. Host messages up to the
// provider's inject size go as --ofi-inject says (ofi::use_inject): by fi_tinject, complete at
// once (start_flush() then sends one more message with a completion, ordered after them and never
// received, and flushed() waits for it), with FI_INJECT and a completion, or not injected.
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "transports/ofi/ofi_handles.h"
#include "transports/ofi/ofi_options.h"
#include "transports/registry.h"
#include "transports/transport.h"

namespace pairperf {

class ofi_transport final : public transport {
 public:
  static transport_entry entry();
  explicit ofi_transport(const transport_params& params);
  ~ofi_transport() override;
  ofi_transport(const ofi_transport&) = delete;
  ofi_transport& operator=(const ofi_transport&) = delete;

  [[nodiscard]] capabilities caps() const override;
  std::vector<std::byte> local_address() override;
  void check_peer_address(std::span<const std::byte> peer_address) override;
  void connect(std::span<const std::byte> peer_address) override;
  mem_region register_memory(std::byte* address, std::size_t length, memory_type type) override;
  void set_remote_regions(const std::vector<remote_region>& regions) override;
  [[nodiscard]] int post(const op& operation) noexcept override;
  [[nodiscard]] int poll(std::span<completion> out) noexcept override;
  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override;
  void start_flush() noexcept override;
  [[nodiscard]] bool flushed() const noexcept override;
  [[nodiscard]] std::string last_error() const override { return m_error; }
  [[nodiscard]] bool peer_gone() const noexcept override { return m_peer_gone; }
  [[nodiscard]] provenance describe() const override;

 private:
  // One posted operation: libfabric's context first (FI_CONTEXT2 mode), then ours.
  struct request {
    fi_context2 context{};
    std::uint64_t cookie = 0;
    op_kind kind = op_kind::send;
    bool write = false;  // an RMA write: the deferred sync waits for it
  };
  struct region {
    std::uintptr_t begin = 0, end = 0;
    void* desc = nullptr;
  };

  void choose_info();
  std::string choose_source(std::uint32_t format);
  void open_objects();
  void handshake();
  [[nodiscard]] where place(const std::string& step) const;
  [[nodiscard]] void* desc_of(const void* p) noexcept;
  request* acquire(const op& operation) noexcept;
  // Whether a send is a small host message the provider may take by injection.
  [[nodiscard]] bool small(const op& operation) const noexcept;
  [[nodiscard]] bool injects(const op& operation) const noexcept {
    return m_inject == ofi::inject_mode::tinject && small(operation);
  }
  int submit(const op& operation) noexcept;
  int try_post(const op& operation, request* r) noexcept;  // -FI_EAGAIN: not taken, retry
  int post_one(const op& operation, request* r) noexcept;
  int inject_one(const op& operation) noexcept;
  int post_pending() noexcept;
  int post_sync_now(const op& operation) noexcept;
  int progress() noexcept;  // reads the CQ into m_done; negative on failure
  // Operations the provider holds: posted (not left pending) and not completed.
  [[nodiscard]] std::size_t in_provider() const noexcept {
    return m_requests.size() - m_free.size() - m_pending_rx.size() - m_pending_tx.size();
  }
  int fail(std::string what, int err) noexcept;
  // Errors that mean the peer is gone or cannot be reached, not a local fault.
  static bool means_peer_gone(int err) noexcept;

  transport_params m_params;
  std::string m_provider;  // as asked ("" = libfabric's choice)
  ofi::options m_options;  // this transport's own options, checked (both sides)
  ofi::inject_mode m_inject = ofi::inject_mode::tinject;  // how small host sends go
  std::string m_inject_why;
  std::string m_source_why;  // how the source address was chosen
  bool m_rma_test = false;
  bool m_gpu = false;
  ofi::info_ptr m_infos;  // fi_getinfo's list; m_info points into it
  fi_info* m_info = nullptr;
  ofi::fabric_ptr m_fabric;
  ofi::domain_ptr m_domain;
  ofi::cq_ptr m_cq;
  ofi::av_ptr m_av;
  ofi::endpoint_ptr m_ep;         // declared last among the fids: closed first
  std::vector<std::byte> m_name;  // fi_getname
  fi_addr_t m_peer = FI_ADDR_UNSPEC;
  std::string m_peer_text;
  std::vector<ofi::mr_ptr> m_mrs;
  std::vector<region> m_regions;
  std::size_t m_last_region = 0;
  std::uint64_t m_next_key = 1;
  bool m_send_after_write = false;  // FI_ORDER_SAW both ways
  std::vector<remote_region> m_remote;
  std::vector<std::uint64_t> m_remote_keys;

  std::deque<request> m_requests;  // stable addresses; recycled through m_free
  std::vector<request*> m_free;
  std::size_t m_sends_outstanding = 0;   // sends, writes, reads posted and not yet completed
  std::size_t m_writes_outstanding = 0;  // writes queued or posted, not yet completed
  std::deque<op> m_deferred_sync;        // sync sends waiting for earlier writes' delivery
  // Not taken yet (-FI_EAGAIN), in posting order: receives, and everything else.
  std::deque<std::pair<op, request*>> m_pending_rx, m_pending_tx;
  bool m_flush_wanted = false;
  std::deque<completion> m_done;

  bool m_injected = false;  // a message went by fi_tinject since the last flush
  std::array<std::byte, 8> m_hello_in{}, m_hello_out{}, m_flush_out{};
  std::string m_error;
  bool m_failed = false;
  bool m_peer_gone = false;
};

}  // namespace pairperf
