// Opening the device and port, making the PD, CQ and QPs, and registering memory (host, or GPU
// through dma-buf or peer memory) for the verbs transport.
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
#include "transports/verbs/verbs_addressing.h"
#include "transports/verbs/verbs_transport.h"

namespace pairperf {
namespace {

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
    rows.push_back(verbs::gid_row{static_cast<int>(e.gid_index), verbs::gid_text(e.gid),
                                  verbs::gid_type_text(e.gid_type), has_ndev ? name.data() : ""});
  }
  if (n <= 0) {  // older providers: index order, no types
    for (int i = 0; i < attr.gid_tbl_len; ++i) {
      ibv_gid g{};
      if (ibv_query_gid(ctx, static_cast<std::uint8_t>(port), i, &g) == 0)
        rows.push_back(verbs::gid_row{i, verbs::gid_text(g), "unknown", ""});
    }
  }
  return rows;
}

}  // namespace

namespace verbs {

std::vector<std::string> device_names() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  std::vector<std::string> out;
  for (int i = 0; list != nullptr && i < n; ++i) out.emplace_back(ibv_get_device_name(list[i]));
  if (list != nullptr) ibv_free_device_list(list);
  return out;
}

}  // namespace verbs

void verbs_transport::open_device() {
  int n = 0;
  m_devices.reset(rdma_get_devices(&n));
  if (!m_devices || n == 0) throw transport_unsupported("no RDMA device on this host");
  const verbs::options& o = m_options;
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
  const verbs::options& o = m_options;
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
      std::min<std::uint64_t>(static_cast<std::uint64_t>(qps) * 2 * m_depth + 2 * verbs::sync_depth,
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
      const auto ip = verbs::ipv4_of_gid(verbs::gid_text(m_gid));
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
    init.cap.max_send_wr = init.cap.max_recv_wr = i == 0 ? verbs::sync_depth : m_depth;
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

}  // namespace pairperf
