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

#include "harness/errors.h"
#include "harness/hex.h"
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

constexpr std::uint32_t sync_depth = 16;
constexpr int stream_shift = 56;

std::uint64_t wr_id_of(unsigned stream, std::uint64_t seq) {
  return (static_cast<std::uint64_t>(stream) << stream_shift) | seq;
}
unsigned stream_of(std::uint64_t wr_id) { return static_cast<unsigned>(wr_id >> stream_shift); }
std::uint64_t seq_of_wr(std::uint64_t wr_id) {
  return wr_id & ((std::uint64_t{1} << stream_shift) - 1);
}

std::string gid_text(const ibv_gid& g) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i > 0) out += ':';
    out += fmt::format("{:02x}{:02x}", g.raw[i], g.raw[i + 1]);
  }
  return out;
}

const char* gid_type_text(unsigned t) {
  switch (t) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return "unknown";
  }
}

std::vector<std::string> device_names() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::vector<std::string> out;
  for (int i = 0; list != nullptr && i < n; ++i) out.emplace_back(ibv_get_device_name(list[i]));
  if (list != nullptr) ibv_free_device_list(list);
  return out;
}

std::vector<verbs::gid_row> gid_table(ibv_context* ctx, unsigned port, const ibv_port_attr& attr) {
  std::vector<verbs::gid_row> rows;
  std::vector<ibv_gid_entry> entries(static_cast<std::size_t>(std::max(attr.gid_tbl_len, 1)));
  const ssize_t n = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  for (ssize_t i = 0; i < n; ++i) {
    const auto& e = entries[static_cast<std::size_t>(i)];
    if (e.port_num != port) continue;
    std::array<char, IF_NAMESIZE> name{};
    const bool has_ndev =
        e.ndev_ifindex != 0 && if_indextoname(e.ndev_ifindex, name.data()) != nullptr;
    rows.push_back(verbs::gid_row{static_cast<int>(e.gid_index), gid_text(e.gid),
                                  gid_type_text(e.gid_type), has_ndev ? name.data() : ""});
  }
  if (n <= 0) {  // older providers: index order, no types
    for (int i = 0; i < attr.gid_tbl_len; ++i) {
      ibv_gid g{};
      if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port), i, &g) == 0)
        rows.push_back(verbs::gid_row{i, gid_text(g), "unknown", ""});
    }
  }
  return rows;
}

}  // namespace

namespace verbs {

void cm_id_deleter::operator()(rdma_cm_id* id) const noexcept {
  if (id == nullptr) return;
  if (id->qp != nullptr) rdma_destroy_qp(id);
  rdma_destroy_id(id);
}

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
  e.name = "verbs";
  e.description = "raw verbs over RC queue pairs (InfiniBand, RoCE)";
  e.tests.assign(tests.begin(), tests.end());
  e.create = [](const transport_params& p) { return std::make_unique<verbs_transport>(p); };
  e.check_options = [](const transport_options& o) {
    if (!o.verbs.device.empty()) (void)verbs::parse_device_spec(o.verbs.device);
    if (o.verbs.mtu != 0) (void)verbs::mtu_enum(o.verbs.mtu);
    if (o.verbs.qps < 1 || o.verbs.qps > 16) throw usage_error("--qps must be 1 to 16");
    if (o.verbs.signal_every < 1 || o.verbs.signal_every > 1024)
      throw usage_error("--signal-every must be 1 to 1024");
    if (o.verbs.inline_bytes > 1024) throw usage_error("--inline must be 0 to 1024 bytes");
  };
  e.describe_library = [] {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : device_names()) devices.push_back(d);
    return nlohmann::json{{"library", "libibverbs"}, {"devices", devices}};
  };
  e.unavailable = [] {
    return device_names().empty()
               ? std::string("no RDMA device on this host (/sys/class/infiniband is empty)")
               : std::string();
  };
  return e;
}

verbs_transport::verbs_transport(const transport_params& params) : m_params(params) {
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

void verbs_transport::open_device() {
  int n = 0;
  m_devices.reset(rdma_get_devices(&n));
  if (!m_devices || n == 0) throw transport_unsupported("no RDMA device on this host");
  const verbs_options& o = m_params.options.verbs;
  const verbs::device_spec want =
      o.device.empty() ? verbs::device_spec{} : verbs::parse_device_spec(o.device);
  // The client's --iface picks the device whose GID table holds that netdev.
  const std::string iface = m_params.side == side::client ? m_params.test.iface : std::string();
  std::vector<std::string> seen;
  std::string last_why;
  for (int i = 0; i < n; ++i) {
    ibv_context* ctx = m_devices.get()[i];
    const std::string name = ibv_get_device_name(ctx->device);
    seen.push_back(name);
    if (!want.name.empty() && name != want.name) continue;
    ibv_device_attr dev{};
    if (ibv_query_device(ctx, &dev) != 0) continue;
    for (unsigned port = 1; port <= dev.phys_port_cnt; ++port) {
      if (want.port != 0 && port != want.port) continue;
      ibv_port_attr attr{};
      if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &attr) != 0) continue;
      if (attr.state != IBV_PORT_ACTIVE) {
        last_why = fmt::format("{}:{} is not active", name, port);
        continue;
      }
      const bool ethernet = attr.link_layer == IBV_LINK_LAYER_ETHERNET;
      try {
        const auto table = gid_table(ctx, port, attr);
        const verbs::gid_choice g =
            verbs::choose_gid(table, ethernet ? iface : "", o.gid_index, ethernet);
        m_ctx = ctx;
        m_device_name = name;
        m_port = port;
        m_port_attr = attr;
        m_dev_attr = dev;
        m_gid_index = g.index;
        m_gid_why = g.why;
        for (const auto& r : table) {
          if (r.index == g.index) {
            m_gid_type = r.type;
            m_gid_ndev = r.ndev;
          }
        }
        if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port), m_gid_index, &m_gid) != 0)
          throw std::runtime_error(
              fmt::format("ibv_query_gid {}: {}", m_gid_index, std::strerror(errno)));
        return;
      } catch (const std::runtime_error& e) {
        last_why = fmt::format("{}:{}: {}", name, port, e.what());
      }
    }
  }
  if (!want.name.empty() && std::find(seen.begin(), seen.end(), want.name) == seen.end()) {
    throw transport_unsupported(
        fmt::format("no RDMA device {} here (this host has {})", want.name, fmt::join(seen, ", ")));
  }
  if (!iface.empty() && o.device.empty()) {
    throw transport_unsupported(fmt::format("no RDMA device on {} ({})", iface,
                                            last_why.empty() ? "no GID belongs to it" : last_why));
  }
  throw transport_unsupported(
      fmt::format("no usable RDMA port ({})", last_why.empty() ? "none active" : last_why));
}

void verbs_transport::create_queues() {
  const verbs_options& o = m_params.options.verbs;
  m_pd.reset(ibv_alloc_pd(m_ctx));
  if (!m_pd)
    throw step_error(error_kind::error, place("verbs setup"),
                     fmt::format("ibv_alloc_pd: {}", std::strerror(errno)));
  // Room for the window plus what selective signalling and fences keep on the send queue.
  const std::uint32_t wanted = 2 * 1024;
  m_depth = std::min<std::uint32_t>(wanted, static_cast<std::uint32_t>(m_dev_attr.max_qp_wr));
  if (m_depth < 64) m_depth = static_cast<std::uint32_t>(m_dev_attr.max_qp_wr);
  m_rd_atomic =
      std::min<std::uint32_t>(16, static_cast<std::uint32_t>(std::min(
                                      m_dev_attr.max_qp_rd_atom, m_dev_attr.max_qp_init_rd_atom)));
  const unsigned qps = o.qps + 1;
  const int cqe = static_cast<int>(
      std::min<std::uint64_t>(static_cast<std::uint64_t>(qps) * 2 * m_depth + 2 * sync_depth,
                              static_cast<std::uint64_t>(m_dev_attr.max_cqe)));
  if (m_params.options.progress == progress_mode::block) {
    m_channel.reset(ibv_create_comp_channel(m_ctx));
    if (!m_channel)
      throw step_error(error_kind::error, place("verbs setup"),
                       fmt::format("ibv_create_comp_channel: {}", std::strerror(errno)));
    ::fcntl(m_channel->fd, F_SETFL, ::fcntl(m_channel->fd, F_GETFL) | O_NONBLOCK);
  }
  m_cq.reset(ibv_create_cq(m_ctx, cqe, nullptr, m_channel.get(), 0));
  if (!m_cq)
    throw step_error(error_kind::error, place("verbs setup"),
                     fmt::format("ibv_create_cq({}): {}", cqe, std::strerror(errno)));
  for (auto& r : m_rings) r.reset(static_cast<std::size_t>(qps) * m_depth);
  m_qps.resize(qps);
  std::mt19937 rng(std::random_device{}());
  for (auto& q : m_qps) {
    q.psn = rng() & 0xffffff;
    q.fifo.assign(std::bit_ceil(static_cast<std::size_t>(m_depth) + 1), 0);
  }
  if (o.rdma_cm) {
    m_connection = "rdma_cm";
    m_cm_channel.reset(rdma_create_event_channel());
    if (!m_cm_channel)
      throw step_error(error_kind::error, place("rdma_cm setup"),
                       fmt::format("rdma_create_event_channel: {}", std::strerror(errno)));
    ::fcntl(m_cm_channel->fd, F_SETFL, ::fcntl(m_cm_channel->fd, F_GETFL) | O_NONBLOCK);
    if (m_params.side == side::server) {
      rdma_cm_id* id = nullptr;
      if (rdma_create_id(m_cm_channel.get(), &id, nullptr, RDMA_PS_TCP) != 0)
        throw step_error(error_kind::error, place("rdma_cm listen"),
                         fmt::format("rdma_create_id: {}", std::strerror(errno)));
      m_cm_listener.reset(id);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      const auto ip = verbs::ipv4_of_gid(gid_text(m_gid));
      if (ip) ::inet_pton(AF_INET, ip->c_str(), &addr.sin_addr);
      if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)) != 0 || rdma_listen(id, 8) != 0)
        throw step_error(error_kind::error, place("rdma_cm listen"),
                         fmt::format("rdma_bind_addr/rdma_listen: {}", std::strerror(errno)));
    }
    return;  // QPs come with the CM ids at connect()
  }
  ibv_qp_init_attr init{};
  init.send_cq = m_cq.get();
  init.recv_cq = m_cq.get();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = o.inline_bytes;
  for (std::size_t i = 0; i < m_qps.size(); ++i) {
    init.cap.max_send_wr = init.cap.max_recv_wr = i == 0 ? sync_depth : m_depth;
    ibv_qp* qp = ibv_create_qp(m_pd.get(), &init);
    if (qp == nullptr && init.cap.max_inline_data > 0) {  // the provider may cap inline data
      init.cap.max_inline_data = 0;
      qp = ibv_create_qp(m_pd.get(), &init);
    }
    if (qp == nullptr)
      throw step_error(error_kind::error, place("verbs setup"),
                       fmt::format("ibv_create_qp: {}", std::strerror(errno)));
    m_qp_handles.emplace_back(qp);
    m_qps[i].qp = qp;
    if (i == 1) m_max_inline = init.cap.max_inline_data;
  }
}

capabilities verbs_transport::caps() const {
  return capabilities{true, true, true, {memory_type::host, memory_type::cuda}};
}

mem_region verbs_transport::register_memory(std::byte* address, std::size_t length,
                                            memory_type type) {
  constexpr int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ibv_mr* mr = type == memory_type::cuda ? register_gpu_memory(address, length, access)
                                         : ibv_reg_mr(m_pd.get(), address, length, access);
  if (mr == nullptr)
    throw step_error(error_kind::error, place("verbs register"),
                     fmt::format("ibv_reg_mr({} bytes): {}", length, std::strerror(errno)));
  m_mrs.emplace_back(mr);
  m_regions.push_back(region{reinterpret_cast<std::uintptr_t>(address),
                             reinterpret_cast<std::uintptr_t>(address) + length, mr->lkey});
  std::vector<std::byte> key(4);
  std::memcpy(key.data(), &mr->rkey, 4);
  return mem_region{address, length, key};
}

// GPU memory: a dma-buf of the range from the CUDA driver (cuMemGetHandleForAddressRange,
// loaded with dlopen so the binary needs no CUDA to run) registered with ibv_reg_dmabuf_mr;
// where the driver or the NIC cannot, plain ibv_reg_mr, which works through nvidia-peermem.
// Neither is possible without a driver: the case is refused with both reasons.
ibv_mr* verbs_transport::register_gpu_memory(std::byte* address, std::size_t length, int access) {
  using get_handle_fn = int (*)(void*, unsigned long long, std::size_t, int, unsigned long long);
  constexpr int dma_buf_fd = 1;  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
  std::string dmabuf_why = "no CUDA driver (libcuda.so.1)";
  if (void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); cuda != nullptr) {
    auto get_handle =
        reinterpret_cast<get_handle_fn>(::dlsym(cuda, "cuMemGetHandleForAddressRange"));
    int fd = -1;
    const auto base = reinterpret_cast<unsigned long long>(address);
    if (get_handle == nullptr) {
      dmabuf_why = "the CUDA driver has no cuMemGetHandleForAddressRange (driver < 515)";
    } else if (const int rc = get_handle(&fd, base, length, dma_buf_fd, 0); rc != 0 || fd < 0) {
      dmabuf_why = fmt::format("cuMemGetHandleForAddressRange failed (CUresult {})", rc);
    } else {
      ibv_mr* mr = ibv_reg_dmabuf_mr(m_pd.get(), 0, length, base, fd, access);
      ::close(fd);
      if (mr != nullptr) {
        m_gpu_registration = "dma-buf";
        return mr;
      }
      dmabuf_why = fmt::format("ibv_reg_dmabuf_mr: {}", std::strerror(errno));
    }
  }
  if (ibv_mr* mr = ibv_reg_mr(m_pd.get(), address, length, access); mr != nullptr) {
    m_gpu_registration = "peer memory (nvidia-peermem)";
    return mr;
  }
  throw transport_unsupported(fmt::format(
      "cannot register GPU memory with {}: dma-buf: {}; peer memory: ibv_reg_mr: {} (load "
      "nvidia-peermem, or use a driver and NIC with dma-buf support)",
      m_device_name, dmabuf_why, std::strerror(errno)));
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
                   {"gid", gid_text(m_gid)},
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
    j["cm_ip"] = verbs::ipv4_of_gid(gid_text(m_gid)).value_or("");
  }
  const std::string text = j.dump();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

void verbs_transport::to_rts(qp_state& q, const nlohmann::json& peer, std::size_t index) {
  const auto& pq = peer.at("qps").at(index);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<std::uint8_t>(m_port);
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (ibv_modify_qp(q.qp, &a,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    throw step_error(error_kind::error, place("verbs connect"),
                     fmt::format("QP to INIT: {}", std::strerror(errno)));
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = static_cast<ibv_mtu>(m_path_mtu);
  a.dest_qp_num = pq.at("qpn").get<std::uint32_t>();
  a.rq_psn = pq.at("psn").get<std::uint32_t>();
  a.max_dest_rd_atomic = static_cast<std::uint8_t>(m_rd_atomic);
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = static_cast<std::uint8_t>(m_port);
  a.ah_attr.dlid = peer.at("lid").get<std::uint16_t>();
  if (peer.value("ethernet", false) || a.ah_attr.dlid == 0) {
    a.ah_attr.is_global = 1;
    const std::vector<std::byte> raw = from_hex([&] {
      std::string h = peer.at("gid").get<std::string>();
      std::erase(h, ':');
      return h;
    }());
    std::memcpy(a.ah_attr.grh.dgid.raw, raw.data(), std::min<std::size_t>(raw.size(), 16));
    a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(m_gid_index);
    a.ah_attr.grh.hop_limit = 64;
  }
  if (ibv_modify_qp(q.qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    throw step_error(error_kind::unreachable, place("verbs connect"),
                     fmt::format("QP to RTR: {}", std::strerror(errno)), errno);
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;  // the peer may post its receives a little after our first send
  a.sq_psn = q.psn;
  a.max_rd_atomic = static_cast<std::uint8_t>(m_rd_atomic);
  if (ibv_modify_qp(q.qp, &a,
                    IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) != 0)
    throw step_error(error_kind::error, place("verbs connect"),
                     fmt::format("QP to RTS: {}", std::strerror(errno)));
}

void verbs_transport::connect(std::span<const std::byte> peer_address) {
  const nlohmann::json peer = nlohmann::json::parse(
      std::string(reinterpret_cast<const char*>(peer_address.data()), peer_address.size()));
  m_peer_fence_addr = peer.at("fence_addr").get<std::uint64_t>();
  m_peer_fence_rkey = peer.at("fence_rkey").get<std::uint32_t>();
  m_path_mtu = verbs::path_mtu(static_cast<int>(m_port_attr.active_mtu), peer.at("mtu").get<int>(),
                               m_params.options.verbs.mtu);
  if (m_params.options.verbs.rdma_cm) {
    connect_with_cm(peer);
  } else {
    connect_with_control(peer);
  }
}

void verbs_transport::connect_with_control(const nlohmann::json& peer) {
  if (peer.at("qps").size() != m_qps.size())
    throw step_error(error_kind::error, place("verbs connect"),
                     fmt::format("the peer has {} QPs, this side {} (same --qps on both?)",
                                 peer.at("qps").size(), m_qps.size()));
  for (std::size_t i = 0; i < m_qps.size(); ++i) to_rts(m_qps[i], peer, i);
}

void verbs_transport::cm_wait(rdma_cm_event_type want, rdma_cm_event** out, const char* step) {
  const auto deadline = std::chrono::steady_clock::now() + m_params.connect_timeout;
  for (;;) {
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(m_cm_channel.get(), &ev) == 0) {
      if (ev->event == want) {
        *out = ev;
        return;
      }
      const std::string what = fmt::format("{} (status {})", rdma_event_str(ev->event), ev->status);
      rdma_ack_cm_event(ev);
      throw step_error(error_kind::unreachable, place(step),
                       fmt::format("expected {}, got {}", rdma_event_str(want), what));
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      throw step_error(error_kind::error, place(step),
                       fmt::format("rdma_get_cm_event: {}", std::strerror(errno)));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw step_error(error_kind::unreachable, place(step),
                       fmt::format("no {} before the timeout", rdma_event_str(want)), ETIMEDOUT);
    pollfd p{m_cm_channel->fd, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 100)));
  }
}

void verbs_transport::connect_with_cm(const nlohmann::json& peer) {
  const verbs_options& o = m_params.options.verbs;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = m_cq.get();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = o.inline_bytes;
  rdma_conn_param param{};
  param.responder_resources = static_cast<std::uint8_t>(m_rd_atomic);
  param.initiator_depth = static_cast<std::uint8_t>(m_rd_atomic);
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  const auto make_qp = [&](rdma_cm_id* id, std::size_t index) {
    init.cap.max_send_wr = init.cap.max_recv_wr = index == 0 ? sync_depth : m_depth;
    if (rdma_create_qp(id, m_pd.get(), &init) != 0)
      throw step_error(error_kind::error, place("rdma_cm connect"),
                       fmt::format("rdma_create_qp: {}", std::strerror(errno)));
    m_qps[index].qp = id->qp;
    if (index == 1) m_max_inline = init.cap.max_inline_data;
  };
  m_cm_ids.resize(m_qps.size());
  if (m_params.side == side::client) {
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(peer.at("cm_port").get<std::uint16_t>());
    const std::string ip = peer.at("cm_ip").get<std::string>();
    if (::inet_pton(AF_INET, ip.c_str(), &dst.sin_addr) != 1)
      throw step_error(
          error_kind::error, place("rdma_cm connect"),
          fmt::format("the server's RDMA address '{}' is not IPv4 (RoCE v2 IPv4 GIDs only)", ip));
    const int ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(m_params.connect_timeout).count());
    for (std::size_t i = 0; i < m_qps.size(); ++i) {
      rdma_cm_id* id = nullptr;
      if (rdma_create_id(m_cm_channel.get(), &id, nullptr, RDMA_PS_TCP) != 0)
        throw step_error(error_kind::error, place("rdma_cm connect"),
                         fmt::format("rdma_create_id: {}", std::strerror(errno)));
      m_cm_ids[i].reset(id);
      rdma_cm_event* ev = nullptr;
      if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), ms) != 0)
        throw step_error(error_kind::unreachable, place("rdma_cm resolve address"),
                         std::strerror(errno), errno);
      cm_wait(RDMA_CM_EVENT_ADDR_RESOLVED, &ev, "rdma_cm resolve address");
      rdma_ack_cm_event(ev);
      if (rdma_resolve_route(id, ms) != 0)
        throw step_error(error_kind::unreachable, place("rdma_cm resolve route"),
                         std::strerror(errno), errno);
      cm_wait(RDMA_CM_EVENT_ROUTE_RESOLVED, &ev, "rdma_cm resolve route");
      rdma_ack_cm_event(ev);
      make_qp(id, i);
      const auto index = static_cast<std::uint32_t>(i);
      param.private_data = &index;
      param.private_data_len = sizeof(index);
      if (rdma_connect(id, &param) != 0)
        throw step_error(error_kind::unreachable, place("rdma_cm connect"), std::strerror(errno),
                         errno);
      cm_wait(RDMA_CM_EVENT_ESTABLISHED, &ev, "rdma_cm connect");
      rdma_ack_cm_event(ev);
    }
  } else {
    for (std::size_t accepted = 0; accepted < m_qps.size(); ++accepted) {
      rdma_cm_event* ev = nullptr;
      cm_wait(RDMA_CM_EVENT_CONNECT_REQUEST, &ev, "rdma_cm accept");
      rdma_cm_id* id = ev->id;
      std::uint32_t index = 0;
      if (ev->param.conn.private_data_len >= sizeof(index))
        std::memcpy(&index, ev->param.conn.private_data, sizeof(index));
      rdma_ack_cm_event(ev);
      if (index >= m_qps.size() || m_cm_ids[index]) {
        rdma_reject(id, nullptr, 0);
        rdma_destroy_id(id);
        throw step_error(error_kind::error, place("rdma_cm accept"),
                         fmt::format("unexpected connection for QP {}", index));
      }
      m_cm_ids[index].reset(id);
      make_qp(id, index);
      if (rdma_accept(id, &param) != 0)
        throw step_error(error_kind::error, place("rdma_cm accept"),
                         fmt::format("rdma_accept: {}", std::strerror(errno)));
      cm_wait(RDMA_CM_EVENT_ESTABLISHED, &ev, "rdma_cm accept");
      rdma_ack_cm_event(ev);
    }
  }
  ibv_qp_attr a{};
  ibv_qp_init_attr unused{};
  if (ibv_query_qp(m_qps[1].qp, &a, IBV_QP_PATH_MTU, &unused) == 0) m_path_mtu = a.path_mtu;
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
    qp_state& q = sync ? m_qps[0] : m_qps[1 + (m_data_recvs++ % (m_qps.size() - 1))];
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
      if (m_deferred_sync.size() >= sync_depth) return fail("too many sync messages waiting");
      m_deferred_sync.push_back(o);
      return 0;
    }
  }
  const unsigned s = sync ? sync_send : data_send;
  if (m_rings[s].full()) return fail("too many operations outstanding");
  qp_state& q = sync ? m_qps[0] : m_qps[1 + (m_data_sends++ % (m_qps.size() - 1))];
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
  const bool signal = sync || !batched || q.unsignaled + 1 >= m_params.options.verbs.signal_every;
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
  std::array<ibv_wc, 32> wc{};
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

provenance verbs_transport::describe() const {
  provenance p;
  const std::string dev = fmt::format("{}:{}", m_device_name, m_port);
  p.lanes.push_back(lane{"rc", dev});
  const auto it = std::find_if(tests.begin(), tests.end(),
                               [&](const test_spec& t) { return t.name == m_params.test.test; });
  const op_kind data = it != tests.end() ? it->data_op : op_kind::send;
  const char* what = data == op_kind::put   ? "RDMA write"
                     : data == op_kind::get ? "RDMA read"
                                            : "send/receive";
  p.protocol = fmt::format("RC {} over {} data QP(s), path MTU {} B, inline up to {} B{}, {}", what,
                           m_qps.size() - 1, verbs::mtu_bytes(m_path_mtu), m_max_inline,
                           m_stream_test ? fmt::format(", a completion every {} posts",
                                                       m_params.options.verbs.signal_every)
                                         : "",
                           m_connection);
  const bool ethernet = m_port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  nlohmann::json d{
      {"device", m_device_name},
      {"port", m_port},
      {"firmware", m_dev_attr.fw_ver},
      {"link_layer", ethernet ? "Ethernet" : "InfiniBand"},
      {"gid", gid_text(m_gid)},
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
      {"signal_every", m_stream_test ? m_params.options.verbs.signal_every : 1},
      {"connection", m_connection},
      {"gpu_registration",
       m_gpu_registration.empty() ? nlohmann::json() : nlohmann::json(m_gpu_registration)},
      {"progress", m_channel ? "event" : "busy"}};
  (m_params.side == side::client ? p.client : p.server) = std::move(d);
  return p;
}

}  // namespace pairperf
