// Connecting the verbs transport's queue pairs: through the control channel (QP numbers, GIDs,
// LIDs and PSNs exchanged, QPs moved to RTR and RTS here) or through librdmacm.
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
namespace verbs {

void cm_id_deleter::operator()(rdma_cm_id* id) const noexcept {
  if (id == nullptr) return;
  if (id->qp != nullptr) rdma_destroy_qp(id);
  rdma_destroy_id(id);
}

}  // namespace verbs

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
                               m_options.mtu);
  if (m_options.rdma_cm) {
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

rdma_conn_param verbs_transport::cm_param() const {
  rdma_conn_param param{};
  param.responder_resources = static_cast<std::uint8_t>(m_rd_atomic);
  param.initiator_depth = static_cast<std::uint8_t>(m_rd_atomic);
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  return param;
}

void verbs_transport::cm_create_qp(rdma_cm_id* id, std::size_t index) {
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = m_cq.get();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = m_options.inline_bytes;
  init.cap.max_send_wr = init.cap.max_recv_wr = index == 0 ? verbs::sync_depth : m_depth;
  if (rdma_create_qp(id, m_pd.get(), &init) != 0)
    throw step_error(error_kind::error, place("rdma_cm connect"),
                     fmt::format("rdma_create_qp: {}", std::strerror(errno)));
  m_qps[index].qp = id->qp;
  if (index == 1) m_max_inline = init.cap.max_inline_data;
}

// Client: one CM id per QP, each resolved, connected and established in turn; the QP's index
// travels as private data so the server pairs them up.
void verbs_transport::cm_connect_all(const nlohmann::json& peer) {
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
  rdma_conn_param param = cm_param();
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
    cm_create_qp(id, i);
    const auto index = static_cast<std::uint32_t>(i);
    param.private_data = &index;
    param.private_data_len = sizeof(index);
    if (rdma_connect(id, &param) != 0)
      throw step_error(error_kind::unreachable, place("rdma_cm connect"), std::strerror(errno),
                       errno);
    cm_wait(RDMA_CM_EVENT_ESTABLISHED, &ev, "rdma_cm connect");
    rdma_ack_cm_event(ev);
  }
}

// Server: one connection request per QP, placed by the index it carries.
void verbs_transport::cm_accept_all() {
  rdma_conn_param param = cm_param();
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
    cm_create_qp(id, index);
    if (rdma_accept(id, &param) != 0)
      throw step_error(error_kind::error, place("rdma_cm accept"),
                       fmt::format("rdma_accept: {}", std::strerror(errno)));
    cm_wait(RDMA_CM_EVENT_ESTABLISHED, &ev, "rdma_cm accept");
    rdma_ack_cm_event(ev);
  }
}

void verbs_transport::connect_with_cm(const nlohmann::json& peer) {
  m_cm_ids.resize(m_qps.size());
  if (m_params.side == side::client) {
    cm_connect_all(peer);
  } else {
    cm_accept_all();
  }
  ibv_qp_attr a{};
  ibv_qp_init_attr unused{};
  if (ibv_query_qp(m_qps[1].qp, &a, IBV_QP_PATH_MTU, &unused) == 0) m_path_mtu = a.path_mtu;
}

}  // namespace pairperf
