#include "transports/verbs/verbs_transport.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <net/if.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "core/errors.h"
#include "core/hex.h"
#include "patterns/run.h"
#include "transports/verbs/verbs_addressing.h"

namespace pairperf {
namespace {

constexpr std::array<test_spec, 7> tests{{
    {"write_lat", pattern_kind::pingpong, op_kind::put,
     "RDMA write made visible to the target, then a send to notify it (one-way = RTT / 2)"},
    {"write_bw", pattern_kind::stream_uni, op_kind::put,
     "streaming RDMA writes (sender-measured: the target sees no arrivals)"},
    {"write_bibw", pattern_kind::stream_bi, op_kind::put, "RDMA writes both ways at once"},
    {"read_lat", pattern_kind::pingpong, op_kind::get,
     "one RDMA read at a time (one-way = round trip / 2)"},
    {"read_bw", pattern_kind::stream_uni, op_kind::get, "streaming RDMA reads (reader-measured)"},
    {"send_lat", pattern_kind::pingpong, op_kind::send,
     "send/receive ping-pong (one-way = RTT / 2)"},
    {"send_bw", pattern_kind::stream_uni, op_kind::send, "streaming sends (receiver-measured)"},
}};

constexpr int stream_shift = 56;

std::uint64_t wr_id_of(unsigned stream, std::uint64_t seq) {
  return (static_cast<std::uint64_t>(stream) << stream_shift) | seq;
}
unsigned stream_of(std::uint64_t wr_id) { return static_cast<unsigned>(wr_id >> stream_shift); }
std::uint64_t seq_of_wr(std::uint64_t wr_id) {
  return wr_id & ((std::uint64_t{1} << stream_shift) - 1);
}

}  // namespace

namespace verbs {

void ordered_ring::reset(std::size_t capacity) {
  m_slots.assign(std::bit_ceil(std::max<std::size_t>(capacity, 2)), slot{});
  m_mask = m_slots.size() - 1;
  m_head = m_tail = 0;
}

std::uint64_t ordered_ring::push(std::uint64_t cookie, op_kind kind) noexcept {
  const std::uint64_t seq = m_tail++;
  m_slots[seq & m_mask] = slot{cookie, kind, false};
  return seq;
}

std::size_t ordered_ring::release(std::span<completion> out, std::size_t n) noexcept {
  while (n < out.size() && m_head != m_tail && m_slots[m_head & m_mask].done) {
    const slot& s = m_slots[m_head & m_mask];
    out[n++] = completion{s.cookie, s.kind};
    ++m_head;
  }
  return n;
}

}  // namespace verbs

transport_entry verbs_transport::entry() {
  transport_entry e;
  e.name = verbs::name;
  e.description = "raw verbs over RC queue pairs (InfiniBand, RoCE)";
  e.tests.assign(tests.begin(), tests.end());
  e.create = [](const transport_params& p) { return std::make_unique<verbs_transport>(p); };
  e.add_run_options = verbs::add_run_options;
  e.describe_library = [] {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : verbs::device_names()) devices.push_back(d);
    return nlohmann::json{{"library", "libibverbs"}, {"devices", devices}};
  };
  e.unavailable = [] {
    return verbs::device_names().empty()
               ? std::string("no RDMA device on this host (/sys/class/infiniband is empty)")
               : std::string();
  };
  e.lane_kind_of = [](std::string_view name) {
    return name == "rc" ? lane_kind::rdma : lane_kind::unknown;
  };
  return e;
}

verbs_transport::verbs_transport(const transport_params& params)
    : m_params(params), m_options(verbs::options_from(own_options(params.options, verbs::name))) {
  const test_case& c = m_params.test;
  m_stream_test = c.pattern != pattern_kind::pingpong;
  open_device();
  create_queues();
}

verbs_transport::~verbs_transport() {
  // QPs before the CQ, MRs and the PD: the handles are declared in an order that does this, but
  // CM ids own their QPs and must go first explicitly.
  m_cm_ids.clear();
  m_cm_listener.reset();
  m_qp_handles.clear();
  m_mrs.clear();
  m_cq.reset();
  m_channel.reset();
  m_pd.reset();
}

where verbs_transport::place(const std::string& step) const {
  return where{step, m_params.peer_host,
               m_params.side == side::client ? m_params.test.iface : std::string()};
}

capabilities verbs_transport::caps() const {
  return capabilities{true, true, true, {memory_type::host, memory_type::cuda}};
}

std::vector<std::byte> verbs_transport::local_address() {
  if (m_mrs.empty() ||
      m_regions.back().begin != reinterpret_cast<std::uintptr_t>(m_fence_buf.data()))
    (void)register_memory(m_fence_buf.data(), m_fence_buf.size(), memory_type::host);
  std::uint32_t fence_rkey = 0;
  for (const auto& mr : m_mrs) {
    if (mr->addr == m_fence_buf.data()) fence_rkey = mr->rkey;
  }
  nlohmann::json j{{"lid", m_port_attr.lid},
                   {"gid", verbs::gid_text(m_gid)},
                   {"gid_index", m_gid_index},
                   {"mtu", static_cast<int>(m_port_attr.active_mtu)},
                   {"ethernet", m_port_attr.link_layer == IBV_LINK_LAYER_ETHERNET},
                   {"fence_addr", reinterpret_cast<std::uint64_t>(m_fence_buf.data())},
                   {"fence_rkey", fence_rkey}};
  nlohmann::json qps = nlohmann::json::array();
  for (const auto& q : m_qps)
    qps.push_back({{"qpn", q.qp != nullptr ? q.qp->qp_num : 0}, {"psn", q.psn}});
  j["qps"] = qps;
  if (m_cm_listener) {
    j["cm_port"] = ntohs(rdma_get_src_port(m_cm_listener.get()));
    j["cm_ip"] = verbs::ipv4_of_gid(verbs::gid_text(m_gid)).value_or("");
  }
  const std::string text = j.dump();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

void verbs_transport::set_remote_regions(const std::vector<remote_region>& regions) {
  m_remote = regions;
  m_remote_rkeys.clear();
  for (const auto& r : regions) {
    std::uint32_t key = 0;
    if (r.packed_key.size() >= 4) std::memcpy(&key, r.packed_key.data(), 4);
    m_remote_rkeys.push_back(key);
  }
}

std::uint32_t verbs_transport::lkey_of(const std::byte* p) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (m_last_region < m_regions.size() && a >= m_regions[m_last_region].begin &&
      a < m_regions[m_last_region].end)
    return m_regions[m_last_region].lkey;
  for (std::size_t i = 0; i < m_regions.size(); ++i) {
    if (a >= m_regions[i].begin && a < m_regions[i].end) {
      m_last_region = i;
      return m_regions[i].lkey;
    }
  }
  return 0;
}

int verbs_transport::fail(const std::string& what, bool peer_gone) noexcept {
  m_error = what;
  m_peer_gone = peer_gone;
  return -1;
}

int verbs_transport::post_send_wr(qp_state& q, ibv_send_wr& wr, bool signal) noexcept {
  if (signal) wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(q.qp, &wr, &bad); rc != 0)
    return fail(fmt::format("ibv_post_send: {}", std::strerror(rc)));
  q.fifo[q.tail++ & (q.fifo.size() - 1)] = wr.wr_id;
  q.unsignaled = signal ? 0 : q.unsignaled + 1;
  q.last_signaled = signal;
  if (signal) q.unreported = 0;  // its completion will retire everything before it
  return 0;
}

// A signalled 1-byte write into the peer's fence buffer: its completion retires every unsignalled
// post before it on this QP.
int verbs_transport::post_fence(qp_state& q) noexcept {
  ibv_sge sge{reinterpret_cast<std::uint64_t>(m_fence_buf.data()), 1, lkey_of(m_fence_buf.data())};
  ibv_send_wr wr{};
  wr.wr_id = wr_id_of(fence, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = m_max_inline >= 1 ? IBV_SEND_INLINE : 0;
  wr.wr.rdma.remote_addr = m_peer_fence_addr;
  wr.wr.rdma.rkey = m_peer_fence_rkey;
  return post_send_wr(q, wr, true);
}

int verbs_transport::post(const op& o) noexcept {
  const bool sync = o.channel == op_channel::sync;
  if (o.kind == op_kind::recv) {
    const unsigned s = sync ? sync_recv : data_recv;
    if (m_rings[s].full()) return fail("too many receives outstanding");
    qp_state& q = sync ? m_qps[0] : next_data_qp(m_data_recvs);
    const std::uint64_t seq = m_rings[s].push(o.cookie, o.kind);
    ibv_sge sge{reinterpret_cast<std::uint64_t>(o.local), static_cast<std::uint32_t>(o.length),
                lkey_of(o.local)};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id_of(s, seq);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (const int rc = ibv_post_recv(q.qp, &wr, &bad); rc != 0)
      return fail(fmt::format("ibv_post_recv: {}", std::strerror(rc)));
    return 0;
  }
  if (sync) {
    // A sync message follows the data posted before it: wait until that data is done.
    const bool data_pending =
        std::any_of(m_qps.begin() + 1, m_qps.end(), [](const qp_state& q) { return !q.idle(); });
    if (data_pending) {
      if (m_deferred_sync.size() >= verbs::sync_depth)
        return fail("too many sync messages waiting");
      m_deferred_sync.push_back(o);
      return 0;
    }
  }
  const unsigned s = sync ? sync_send : data_send;
  if (m_rings[s].full()) return fail("too many operations outstanding");
  qp_state& q = sync ? m_qps[0] : next_data_qp(m_data_sends);
  const std::uint64_t seq = m_rings[s].push(o.cookie, o.kind);
  ibv_sge sge{reinterpret_cast<std::uint64_t>(o.local), static_cast<std::uint32_t>(o.length),
              lkey_of(o.local)};
  ibv_send_wr wr{};
  wr.wr_id = wr_id_of(s, seq);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  switch (o.kind) {
    case op_kind::send:
      wr.opcode = IBV_WR_SEND;
      break;
    case op_kind::put:
    case op_kind::get:
      if (o.remote >= m_remote.size()) return fail(fmt::format("no remote region {}", o.remote));
      wr.opcode = o.kind == op_kind::put ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.wr.rdma.remote_addr = m_remote[o.remote].address;
      wr.wr.rdma.rkey = m_remote_rkeys[o.remote];
      break;
    case op_kind::recv:
      break;
  }
  const bool inlined = o.kind != op_kind::get && o.length <= m_max_inline;
  if (inlined) wr.send_flags = IBV_SEND_INLINE;
  // An inline message is copied at post time, so its buffer is free at once: in ping-pong tests
  // (one message in flight) its completion is reported now and only every Nth post asks the
  // hardware for one, as perftest's latency tests do. Streams keep real completions, which pace
  // the sender to what the queue pair drains.
  const bool early = inlined && !sync && !m_stream_test;
  const bool batched = m_stream_test || early;
  const bool signal = sync || !batched || q.unsignaled + 1 >= m_options.signal_every;
  if (const int rc = post_send_wr(q, wr, signal); rc != 0) return rc;
  if (early) {
    m_rings[s].mark(seq);
  } else if (!signal) {
    ++q.unreported;
  }
  return 0;
}

void verbs_transport::retire(qp_state& q, std::uint64_t wr_id) noexcept {
  const std::size_t mask = q.fifo.size() - 1;
  while (q.head != q.tail) {
    const std::uint64_t id = q.fifo[q.head++ & mask];
    if (stream_of(id) != fence) m_rings[stream_of(id)].mark(seq_of_wr(id));
    if (id == wr_id) break;
  }
}

int verbs_transport::wait_for_event() noexcept {
  if (ibv_req_notify_cq(m_cq.get(), 0) != 0) return fail("ibv_req_notify_cq failed");
  pollfd p{m_channel->fd, POLLIN, 0};
  if (::poll(&p, 1, 10) > 0) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(m_channel.get(), &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
  }
  return 0;
}

int verbs_transport::poll(std::span<completion> out) noexcept {
  // Not cleared: ibv_poll_cq fills the entries it returns, and clearing 1.5 KiB on every poll of
  // a busy loop delays the poll that finds a completion (under emulation, by a visible share of
  // a round trip).
  std::array<ibv_wc, 32> wc;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  const int n = ibv_poll_cq(m_cq.get(), static_cast<int>(wc.size()), wc.data());
  if (n < 0) return fail("ibv_poll_cq failed");
  for (int i = 0; i < n; ++i) {
    const ibv_wc& c = wc[static_cast<std::size_t>(i)];
    if (c.status != IBV_WC_SUCCESS) {
      const bool gone = c.status == IBV_WC_RETRY_EXC_ERR || c.status == IBV_WC_RNR_RETRY_EXC_ERR ||
                        c.status == IBV_WC_WR_FLUSH_ERR;
      return fail(fmt::format("work completion error: {} (vendor error {:#x}, QP {:#x})",
                              ibv_wc_status_str(c.status), c.vendor_err, c.qp_num),
                  gone);
    }
    const unsigned s = stream_of(c.wr_id);
    if (s == data_recv || s == sync_recv) {
      m_rings[s].mark(seq_of_wr(c.wr_id));
      continue;
    }
    for (auto& q : m_qps) {
      if (q.qp != nullptr && q.qp->qp_num == c.qp_num) {
        retire(q, c.wr_id);
        break;
      }
    }
  }
  // Sync messages held back for the data before them.
  if (!m_deferred_sync.empty() &&
      std::all_of(m_qps.begin() + 1, m_qps.end(), [](const qp_state& q) { return q.idle(); })) {
    std::vector<op> pending;
    pending.swap(m_deferred_sync);
    for (const op& o : pending) {
      if (post(o) != 0) return -1;
    }
  }
  std::size_t got = 0;
  for (auto& r : m_rings) got = r.release(out, got);
  if (got == 0 && n == 0) {
    // Nothing arrived: unsignalled posts with no signalled one after them would never complete.
    for (std::size_t i = 1; i < m_qps.size(); ++i) {
      qp_state& q = m_qps[i];
      const bool needed = q.unreported > 0 || !m_deferred_sync.empty();
      if (!q.idle() && !q.last_signaled && needed && post_fence(q) != 0) return -1;
    }
    if (m_channel) return wait_for_event();
  }
  return static_cast<int>(got);
}

// The loops over this class: post() and poll() above are direct calls in them.
pattern_outcome verbs_transport::run_phase(const pattern_run& run, const pattern_buffers& buffers,
                                           sample_recorder& samples, message_check* checker,
                                           const where& place) {
  return run_pattern(*this, run, buffers, samples, checker, place);
}

provenance verbs_transport::describe() const {
  provenance p;
  const std::string dev = fmt::format("{}:{}", m_device_name, m_port);
  p.lanes.push_back(lane{"rc", dev, lane_kind::rdma});
  const auto it = std::find_if(tests.begin(), tests.end(),
                               [&](const test_spec& t) { return t.name == m_params.test.test; });
  const op_kind data = it != tests.end() ? it->data_op : op_kind::send;
  const char* what = data == op_kind::put   ? "RDMA write"
                     : data == op_kind::get ? "RDMA read"
                                            : "send/receive";
  p.protocol = fmt::format(
      "RC {} over {} data QP(s), path MTU {} B, inline up to {} B{}, {}", what, m_qps.size() - 1,
      verbs::mtu_bytes(m_path_mtu), m_max_inline,
      m_stream_test ? fmt::format(", a completion every {} posts", m_options.signal_every) : "",
      m_connection);
  const bool ethernet = m_port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  nlohmann::json d{
      {"device", m_device_name},
      {"port", m_port},
      {"firmware", m_dev_attr.fw_ver},
      {"link_layer", ethernet ? "Ethernet" : "InfiniBand"},
      {"gid", verbs::gid_text(m_gid)},
      {"gid_index", m_gid_index},
      {"gid_type", m_gid_type},
      {"gid_netdev", m_gid_ndev},
      {"gid_chosen_by", m_gid_why},
      {"lid", m_port_attr.lid},
      {"active_mtu_bytes", verbs::mtu_bytes(m_port_attr.active_mtu)},
      {"path_mtu_bytes", verbs::mtu_bytes(m_path_mtu)},
      {"active_speed", verbs::speed_text(m_port_attr.active_speed)},
      {"active_width", verbs::width_text(m_port_attr.active_width)},
      {"data_qps", m_qps.size() - 1},
      {"max_inline_bytes", m_max_inline},
      {"max_rd_atomic", m_rd_atomic},
      {"queue_depth", m_depth},
      {"signal_every", m_stream_test ? m_options.signal_every : 1},
      {"connection", m_connection},
      {"gpu_registration",
       m_gpu_registration.empty() ? nlohmann::json() : nlohmann::json(m_gpu_registration)},
      {"progress", m_channel ? "event" : "busy"}};
  (m_params.side == side::client ? p.client : p.server) = std::move(d);
  return p;
}

}  // namespace pairperf
