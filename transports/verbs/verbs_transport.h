#pragma once
// Raw verbs over RC queue pairs: RDMA write, read and send/receive as rows of one table, on
// InfiniBand or RoCE. One QP carries the patterns' sync messages, `--qps N` QPs the data; queue
// pair numbers, GIDs, LIDs and PSNs travel over the control channel, or `--rdma-cm` connects
// them through librdmacm. Latency is one-way (round trip / 2) for every test, reads included.
//
// Work requests: small messages go inline; stream tests ask for a completion every
// `--signal-every` posts (a completion covers the unsignalled ones before it on its QP) and, when
// the completion queue runs dry with unsignalled posts outstanding, post a 1-byte signalled write
// to a fence buffer of the peer so nothing waits forever. Completions are handed to the harness
// in the order the operations were posted, per channel, whatever QP they used.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "core/errors.h"
#include "transports/registry.h"
#include "transports/transport.h"
#include "transports/verbs/verbs_options.h"

namespace pairperf {

namespace verbs {
template <class T, auto F>
struct deleter {
  void operator()(T* p) const noexcept {
    if (p != nullptr) F(p);
  }
};
template <class T, auto F>
using handle = std::unique_ptr<T, deleter<T, F>>;
using pd_ptr = handle<ibv_pd, ibv_dealloc_pd>;
using mr_ptr = handle<ibv_mr, ibv_dereg_mr>;
using cq_ptr = handle<ibv_cq, ibv_destroy_cq>;
using channel_ptr = handle<ibv_comp_channel, ibv_destroy_comp_channel>;
using qp_ptr = handle<ibv_qp, ibv_destroy_qp>;
using cm_channel_ptr = handle<rdma_event_channel, rdma_destroy_event_channel>;
// rdma_get_devices' array of contexts (the ones librdmacm uses, so CM ids and our PD agree).
struct device_array_deleter {
  void operator()(ibv_context** p) const noexcept {
    if (p != nullptr) rdma_free_devices(p);
  }
};
using device_array = std::unique_ptr<ibv_context*, device_array_deleter>;
// A CM id destroys its QP first (rdma_destroy_qp) and then itself.
struct cm_id_deleter {
  void operator()(rdma_cm_id* id) const noexcept;
};
using cm_id_ptr = std::unique_ptr<rdma_cm_id, cm_id_deleter>;

// Work requests the sync QP holds (a few acknowledgements at a time).
inline constexpr std::uint32_t sync_depth = 16;

// The RDMA devices of this host (ibv_get_device_list).
std::vector<std::string> device_names();

// Completions released in posting order: one ring per stream of operations.
class ordered_ring {
 public:
  void reset(std::size_t capacity);  // a power of two
  std::uint64_t push(std::uint64_t cookie, op_kind kind) noexcept;
  void mark(std::uint64_t seq) noexcept { m_slots[seq & m_mask].done = true; }
  [[nodiscard]] std::size_t outstanding() const noexcept { return m_tail - m_head; }
  [[nodiscard]] bool full() const noexcept { return outstanding() == m_slots.size(); }
  // Moves finished operations, oldest first, into out[n...]; returns the new n.
  std::size_t release(std::span<completion> out, std::size_t n) noexcept;

 private:
  struct slot {
    std::uint64_t cookie = 0;
    op_kind kind = op_kind::send;
    bool done = false;
  };
  std::vector<slot> m_slots;
  std::uint64_t m_mask = 0, m_head = 0, m_tail = 0;
};
}  // namespace verbs

class verbs_transport final : public transport {
 public:
  static transport_entry entry();
  explicit verbs_transport(const transport_params& params);
  ~verbs_transport() override;
  verbs_transport(const verbs_transport&) = delete;
  verbs_transport& operator=(const verbs_transport&) = delete;

  [[nodiscard]] capabilities caps() const override;
  std::vector<std::byte> local_address() override;
  void connect(std::span<const std::byte> peer_address) override;
  mem_region register_memory(std::byte* address, std::size_t length, memory_type type) override;
  void set_remote_regions(const std::vector<remote_region>& regions) override;
  [[nodiscard]] int post(const op& operation) noexcept override;
  [[nodiscard]] int poll(std::span<completion> out) noexcept override;
  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override;
  [[nodiscard]] std::string last_error() const override { return m_error; }
  [[nodiscard]] bool peer_gone() const noexcept override { return m_peer_gone; }
  [[nodiscard]] provenance describe() const override;

 private:
  enum stream : std::uint8_t { data_send, data_recv, sync_send, sync_recv, fence, stream_count };
  struct region {
    std::uintptr_t begin = 0, end = 0;
    std::uint32_t lkey = 0;
  };
  struct qp_state {
    ibv_qp* qp = nullptr;
    std::uint32_t psn = 0;
    std::vector<std::uint64_t> fifo;  // wr_ids on the send queue, oldest first
    std::size_t head = 0, tail = 0;
    unsigned unsignaled = 0;    // posts since the last signalled one
    unsigned unreported = 0;    // of those, the ones whose completion the harness still awaits
    bool last_signaled = true;  // the newest post on the send queue asks for a completion
    [[nodiscard]] bool idle() const { return head == tail; }
  };

  void open_device();
  void create_queues();
  void connect_with_control(const nlohmann::json& peer);
  void connect_with_cm(const nlohmann::json& peer);
  [[nodiscard]] rdma_conn_param cm_param() const;
  void cm_create_qp(rdma_cm_id* id, std::size_t index);
  void cm_connect_all(const nlohmann::json& peer);
  void cm_accept_all();
  void cm_wait(rdma_cm_event_type want, rdma_cm_event** out, const char* step);
  void to_rts(qp_state& q, const nlohmann::json& peer, std::size_t index);
  [[nodiscard]] std::uint32_t lkey_of(const std::byte* p) noexcept;
  ibv_mr* register_gpu_memory(std::byte* address, std::size_t length, int access);
  int post_send_wr(qp_state& q, ibv_send_wr& wr, bool signal) noexcept;
  int post_fence(qp_state& q) noexcept;
  void retire(qp_state& q, std::uint64_t wr_id) noexcept;
  int fail(const std::string& what, bool peer_gone = false) noexcept;
  int wait_for_event() noexcept;
  [[nodiscard]] where place(const std::string& step) const;

  transport_params m_params;
  verbs::options m_options;    // this transport's own options, checked (both sides)
  bool m_stream_test = false;  // selective signalling only where completions are batched
  verbs::device_array m_devices;
  ibv_context* m_ctx = nullptr;  // owned by m_devices
  std::string m_device_name;
  unsigned m_port = 1;
  ibv_port_attr m_port_attr{};
  ibv_device_attr m_dev_attr{};
  int m_gid_index = 0;
  std::string m_gid_why, m_gid_type, m_gid_ndev;
  ibv_gid m_gid{};
  int m_path_mtu = 0;
  verbs::pd_ptr m_pd;
  verbs::channel_ptr m_channel;
  verbs::cq_ptr m_cq;
  std::vector<verbs::qp_ptr> m_qp_handles;  // control-channel mode
  verbs::cm_channel_ptr m_cm_channel;       // rdma_cm mode
  verbs::cm_id_ptr m_cm_listener;
  std::vector<verbs::cm_id_ptr> m_cm_ids;
  std::vector<qp_state> m_qps;  // [0] sync, [1..] data
  std::uint32_t m_depth = 0, m_max_inline = 0, m_rd_atomic = 0;
  std::vector<verbs::mr_ptr> m_mrs;
  std::vector<region> m_regions;
  std::size_t m_last_region = 0;
  std::vector<remote_region> m_remote;
  std::vector<std::uint32_t> m_remote_rkeys;
  std::array<std::byte, 8> m_fence_buf{};
  std::uint64_t m_peer_fence_addr = 0;
  std::uint32_t m_peer_fence_rkey = 0;
  std::array<verbs::ordered_ring, stream_count> m_rings;
  std::uint64_t m_data_sends = 0, m_data_recvs = 0;  // round-robin over the data QPs
  // The next data QP of a round-robin; with one data QP (ping-pong), that one, with no division.
  qp_state& next_data_qp(std::uint64_t& counter) noexcept {
    return m_qps.size() == 2 ? m_qps[1] : m_qps[1 + (counter++ % (m_qps.size() - 1))];
  }
  std::vector<op> m_deferred_sync;  // sync sends waiting for the data before them
  std::string m_error;
  bool m_peer_gone = false;
  std::string m_connection = "control channel";
  std::string m_gpu_registration;  // how GPU buffers were registered, when there were any
};

}  // namespace pairperf
