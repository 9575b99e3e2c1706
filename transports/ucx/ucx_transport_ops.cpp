// The UCX transport's data path: posting, completion bookkeeping, active-message matching and
// progress. Setup, connection and description are in ucx_transport.cpp.
#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "patterns/run.h"
#include "transports/ucx/ucx_transport.h"
#include "transports/ucx/ucx_wire.h"

namespace pairperf {

using namespace ucx_wire;

void ucx_transport::build_params() noexcept {
  m_probe_state.self = this;
  ucp_request_param_t base{};
  base.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  base.user_data = this;
  // Sync messages live in host memory; data in the case's memory type.
  ucx::store_memory_type(base.memory_type,
                         ucx::to_library(UCS_MEMORY_TYPE_HOST, ucx::lib().loaded));
  m_sync_send_params = m_sync_recv_params = base;
  m_sync_send_params.cb.send = &ucx_transport::on_send;
  m_sync_recv_params.cb.recv = &ucx_transport::on_tag_recv;
  ucx::store_memory_type(base.memory_type, ucx::to_library(m_mem_type, ucx::lib().loaded));
  m_send_params = m_recv_params = m_am_data_params = base;
  m_send_params.cb.send = &ucx_transport::on_send;
  m_recv_params.cb.recv = &ucx_transport::on_tag_recv;
  m_counted_recv_params = m_recv_params;
  m_counted_recv_params.cb.recv = &ucx_transport::on_counted_recv;
  m_am_data_params.cb.recv_am = &ucx_transport::on_am_data;
}

void ucx_transport::unlink(request_info* info) noexcept {
  (info->prev != nullptr ? info->prev->next : m_outstanding) = info->next;
  if (info->next != nullptr) info->next->prev = info->prev;
}

int ucx_transport::post_failed(ucs_status_ptr_t request, const char* what) noexcept {
  const ucs_status_t st = UCS_PTR_STATUS(request);
  m_error = fmt::format("{}: {}", what, ucx::lib().ucs_status_string(st));
  m_peer_gone = means_peer_gone(st);
  m_failed = true;
  return -1;
}

template <class Post>
int ucx_transport::post_probed(const op& operation, const ucp_request_param_t& params,
                               const char* what, Post post) noexcept {
  if (!std::exchange(m_probe, false)) return track(post(&params), operation, what);
  ucp_request_param_t p = params;
  p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;  // a request to query, even for an eager send
  p.cb.send = &ucx_transport::on_probed;
  p.user_data = &m_probe_state;
  m_probe_state.posting = &operation;
  m_probe_state.done_early = false;
  const ucs_status_ptr_t request = post(&p);
  m_probe_state.posting = nullptr;
  inspect(request);
  if (!m_probe_state.done_early) return track(request, operation, what);
  ucx::api::ucp_request_free(request);  // on_probed settled it and left the request to us
  return m_failed ? -1 : 0;
}

void ucx_transport::on_probed(void* request, ucs_status_t status, void* user_data) {
  auto* state = static_cast<probe_state*>(user_data);
  if (state->posting == nullptr) {  // completed after its post returned and track() linked it
    state->self->complete(request, status);
    return;
  }
  state->done_early = true;
  state->self->settle(completion{state->posting->cookie, state->posting->kind}, status);
}

void ucx_transport::settle(const completion& done, ucs_status_t status) noexcept {
  if (status == UCS_OK) {
    m_done.push(done);
  } else if (!m_failed) {
    m_error = fmt::format("UCX operation failed: {}", ucx::lib().ucs_status_string(status));
    m_peer_gone = means_peer_gone(status);
    m_failed = true;
  }
}

void ucx_transport::complete(void* request, ucs_status_t status) noexcept {
  auto* info = static_cast<request_info*>(request);
  settle(completion{info->cookie, info->kind}, status);
  unlink(info);
  ucx::api::ucp_request_free(request);
}

void ucx_transport::on_send(void* request, ucs_status_t status, void* user_data) {
  static_cast<ucx_transport*>(user_data)->complete(request, status);
}

void ucx_transport::on_tag_recv(void* request, ucs_status_t status,
                                const ucp_tag_recv_info_t* /*info*/, void* user_data) {
  static_cast<ucx_transport*>(user_data)->complete(request, status);
}

void ucx_transport::on_counted_recv(void* request, ucs_status_t status,
                                    const ucp_tag_recv_info_t* /*info*/, void* user_data) {
  auto* self = static_cast<ucx_transport*>(user_data);
  auto* info = static_cast<request_info*>(request);
  if (status == UCS_OK) {
    ++self->m_counted;
  } else {
    self->settle(completion{info->cookie, info->kind}, status);  // records the failure
  }
  self->unlink(info);
  ucx::api::ucp_request_free(request);
}

void ucx_transport::on_am_data(void* request, ucs_status_t status, std::size_t /*length*/,
                               void* user_data) {
  static_cast<ucx_transport*>(user_data)->complete(request, status);
}

void ucx_transport::on_flush(void* request, ucs_status_t status, void* user_data) {
  auto* self = static_cast<ucx_transport*>(user_data);
  if (status != UCS_OK && !self->m_failed) {
    self->m_error = fmt::format("UCX flush failed: {}", ucx::lib().ucs_status_string(status));
    self->m_peer_gone = means_peer_gone(status);
    self->m_failed = true;
  }
  self->m_flush_done = true;
  ucx::api::ucp_request_free(request);
}

void ucx_transport::start_flush() noexcept {
  if (m_failed) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &ucx_transport::on_worker_flush;
  p.user_data = this;
  ucs_status_ptr_t request = ucx::api::ucp_worker_flush_nbx(m_worker.get(), &p);
  if (UCS_PTR_IS_ERR(request)) {
    m_error = fmt::format("ucp_worker_flush_nbx: {}",
                          ucx::lib().ucs_status_string(UCS_PTR_STATUS(request)));
    m_failed = true;
    return;
  }
  m_worker_flushed = request == nullptr;
}

void ucx_transport::on_worker_flush(void* request, ucs_status_t status, void* user_data) {
  auto* self = static_cast<ucx_transport*>(user_data);
  if (status != UCS_OK && !self->m_failed) {
    self->m_error =
        fmt::format("UCX worker flush failed: {}", ucx::lib().ucs_status_string(status));
    self->m_failed = true;
  }
  self->m_worker_flushed = true;
  ucx::api::ucp_request_free(request);
}

ucs_status_t ucx_transport::on_am(void* arg, const void* /*header*/, std::size_t /*header_length*/,
                                  void* data, std::size_t length,
                                  const ucp_am_recv_param_t* param) {
  auto* self = static_cast<ucx_transport*>(arg);
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  const bool keep = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0;
  if (!self->m_am_posted.empty()) {
    const op recv = self->m_am_posted.front();
    self->m_am_posted.pop();
    (void)self->deliver_am(am_arrival{data, length, rndv, false, {}}, recv);
    return UCS_OK;
  }
  // No receive posted yet: keep the message (UCX keeps descriptors and persistent data for us).
  am_arrival a{data, length, rndv, keep && !rndv, {}};
  if (!rndv && !keep) {
    const auto* p = static_cast<const std::byte*>(data);
    a.copy.assign(p, p + length);
    a.data = nullptr;
  }
  self->m_am_arrived.push(a);
  return rndv || keep ? UCS_INPROGRESS : UCS_OK;
}

int ucx_transport::deliver_am(const am_arrival& arrival, const op& recv) noexcept {
  if (arrival.length > recv.length) {
    m_error =
        fmt::format("active message of {} bytes for a receive of {}", arrival.length, recv.length);
    m_failed = true;
    return -1;
  }
  if (arrival.rndv) {
    return track(ucx::api::ucp_am_recv_data_nbx(m_worker.get(), arrival.data, recv.local,
                                                arrival.length, &m_am_data_params),
                 recv, "ucp_am_recv_data_nbx");
  }
  std::memcpy(recv.local, arrival.data != nullptr ? arrival.data : arrival.copy.data(),
              arrival.length);
  if (arrival.persistent) ucx::api::ucp_am_data_release(m_worker.get(), arrival.data);
  m_done.push(completion{recv.cookie, op_kind::recv});
  return 0;
}

int ucx_transport::post_other(const op& operation) noexcept {
  if (!m_ep) {
    m_error = "ucx: post before connect";
    return -1;
  }
  if (m_failed) return -1;
  switch (operation.kind) {
    case op_kind::send:
      return operation.channel == op_channel::sync ? post_sync_send(operation)
                                                   : post_data_send(operation);
    case op_kind::recv: {
      const bool sync = operation.channel == op_channel::sync;
      if (!sync && m_use_am) return post_data_recv(operation);
      return track(ucx::api::ucp_tag_recv_nbx(m_worker.get(), operation.local, operation.length,
                                              sync ? m_sync_tag : m_data_tag, full_mask,
                                              sync ? &m_sync_recv_params : &m_recv_params),
                   operation, "ucp_tag_recv_nbx");
    }
    case op_kind::put:
    case op_kind::get:
      return post_rma(operation);
  }
  return -1;
}

int ucx_transport::post_data_send(const op& operation) noexcept {
  if (m_use_am) {
    return post_probed(operation, m_send_params, "ucp_am_send_nbx", [&](const auto* p) {
      return ucx::api::ucp_am_send_nbx(m_ep->get(), am_id, nullptr, 0, operation.local,
                                       operation.length, p);
    });
  }
  return post_probed(operation, m_send_params, "ucp_tag_send_nbx", [&](const auto* p) {
    return ucx::api::ucp_tag_send_nbx(m_ep->get(), operation.local, operation.length, m_data_tag,
                                      p);
  });
}

void ucx_transport::inspect(ucs_status_ptr_t request) noexcept {
  if (!UCS_PTR_IS_PTR(request)) return;  // NO_IMM_CMPL makes a request unless the post failed
  std::array<char, 1024> text{};
  ucp_request_attr_t attr{};
  attr.field_mask = UCP_REQUEST_ATTR_FIELD_INFO_STRING | UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
  attr.debug_string = text.data();
  attr.debug_string_size = text.size();
  if (ucx::api::ucp_request_query(request, &attr) == UCS_OK) m_request_info = text.data();
}

int ucx_transport::post_data_recv(const op& operation) noexcept {
  if (m_am_arrived.empty()) {
    m_am_posted.push(operation);
    return 0;
  }
  const am_arrival a = m_am_arrived.front();
  m_am_arrived.pop();
  return deliver_am(a, operation);
}

int ucx_transport::post_rma(const op& operation) noexcept {
  if (operation.remote >= m_remote.size() || operation.length > m_remote[operation.remote].length) {
    m_error = fmt::format("ucx: remote region {} cannot take {} bytes", operation.remote,
                          operation.length);
    m_failed = true;
    return -1;
  }
  const std::uint64_t remote = m_remote[operation.remote].address;
  ucp_rkey_h key = m_rkeys[operation.remote].get();
  m_rma_since_flush = true;
  if (operation.kind == op_kind::put) {
    return post_probed(operation, m_send_params, "ucp_put_nbx", [&](const auto* p) {
      return ucx::api::ucp_put_nbx(m_ep->get(), operation.local, operation.length, remote, key, p);
    });
  }
  return post_probed(operation, m_send_params, "ucp_get_nbx", [&](const auto* p) {
    return ucx::api::ucp_get_nbx(m_ep->get(), operation.local, operation.length, remote, key, p);
  });
}

int ucx_transport::post_sync_send(const op& operation) noexcept {
  if (m_rma_since_flush) {
    // The sync message must not overtake the puts before it: flush the endpoint first.
    m_rma_since_flush = false;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &ucx_transport::on_flush;
    p.user_data = this;
    ucs_status_ptr_t flush = ucx::api::ucp_ep_flush_nbx(m_ep->get(), &p);
    if (UCS_PTR_IS_ERR(flush)) {
      m_error =
          fmt::format("ucp_ep_flush_nbx: {}", ucx::lib().ucs_status_string(UCS_PTR_STATUS(flush)));
      m_failed = true;
      return -1;
    }
    if (flush != nullptr) {
      m_flush_done = false;
      m_sync_after_flush = operation;
      return 0;
    }
  }
  return track(ucx::api::ucp_tag_send_nbx(m_ep->get(), operation.local, operation.length,
                                          m_sync_tag, &m_sync_send_params),
               operation, "ucp_tag_send_nbx (sync)");
}

int ucx_transport::post_sync_after_flush() noexcept {
  if (!m_flush_done) return 0;
  const op sync = *m_sync_after_flush;
  m_sync_after_flush.reset();
  return post_sync_send(sync);
}

// The loops over this class: post() and poll() above are direct calls in them.
pattern_outcome ucx_transport::run_phase(const pattern_run& run, const pattern_buffers& buffers,
                                         sample_recorder& samples, message_check* checker,
                                         const where& place) {
  return run_pattern(*this, run, buffers, samples, checker, place);
}

}  // namespace pairperf
