// The UCX transport's data path: posting, completion bookkeeping, active-message matching and
// progress. Setup, connection and description are in ucx_transport.cpp.
#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "transports/ucx/ucx_transport.h"
#include "transports/ucx/ucx_wire.h"

namespace pairperf {

using namespace ucx_wire;

ucx_transport::request_ctx* ucx_transport::acquire(const op& operation, bool inspect) noexcept {
  request_ctx* ctx = nullptr;
  if (m_ctx_free.empty()) {
    ctx = &m_ctx_store.emplace_back();  // grows while warming up, then recycles
  } else {
    ctx = m_ctx_free.back();
    m_ctx_free.pop_back();
  }
  *ctx = request_ctx{this, operation.cookie, operation.kind, inspect, false, true, nullptr};
  return ctx;
}

ucp_request_param_t ucx_transport::params(const op& operation, bool probe) noexcept {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  if (probe) p.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.user_data = acquire(operation, probe);
  // Sync messages live in host memory; data in the case's memory type.
  p.memory_type = operation.channel == op_channel::data ? m_mem_type : UCS_MEMORY_TYPE_HOST;
  return p;
}

int ucx_transport::track(ucs_status_ptr_t request, request_ctx* ctx, const char* what) noexcept {
  if (request == nullptr) {  // done at once
    m_done.push(completion{ctx->cookie, ctx->kind});
    release(ctx);
    return 0;
  }
  if (UCS_PTR_IS_ERR(request)) {
    const ucs_status_t st = UCS_PTR_STATUS(request);
    m_error = fmt::format("{}: {}", what, ucs_status_string(st));
    m_peer_gone = means_peer_gone(st);
    m_failed = true;
    release(ctx);
    return -1;
  }
  ctx->request = request;
  if (ctx->inspect) {
    inspect(request);
    ctx->inspect = false;
    if (ctx->done_early) {
      ucp_request_free(request);
      release(ctx);
    }
  }
  return 0;
}

void ucx_transport::complete(void* request, ucs_status_t status, request_ctx* ctx) noexcept {
  if (status == UCS_OK) {
    m_done.push(completion{ctx->cookie, ctx->kind});
  } else if (!m_failed) {
    m_error = fmt::format("UCX operation failed: {}", ucs_status_string(status));
    m_peer_gone = means_peer_gone(status);
    m_failed = true;
  }
  if (ctx->inspect) {  // still inside the posting call, which queries and then frees it
    ctx->done_early = true;
    return;
  }
  ucp_request_free(request);
  release(ctx);
}

void ucx_transport::on_send(void* request, ucs_status_t status, void* user_data) {
  auto* ctx = static_cast<request_ctx*>(user_data);
  ctx->self->complete(request, status, ctx);
}

void ucx_transport::on_tag_recv(void* request, ucs_status_t status,
                                const ucp_tag_recv_info_t* /*info*/, void* user_data) {
  auto* ctx = static_cast<request_ctx*>(user_data);
  ctx->self->complete(request, status, ctx);
}

void ucx_transport::on_am_data(void* request, ucs_status_t status, std::size_t /*length*/,
                               void* user_data) {
  auto* ctx = static_cast<request_ctx*>(user_data);
  ctx->self->complete(request, status, ctx);
}

void ucx_transport::on_flush(void* request, ucs_status_t status, void* user_data) {
  auto* self = static_cast<ucx_transport*>(user_data);
  if (status != UCS_OK && !self->m_failed) {
    self->m_error = fmt::format("UCX flush failed: {}", ucs_status_string(status));
    self->m_peer_gone = means_peer_gone(status);
    self->m_failed = true;
  }
  self->m_flush_done = true;
  ucp_request_free(request);
}

void ucx_transport::start_flush() noexcept {
  if (m_failed) return;
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &ucx_transport::on_worker_flush;
  p.user_data = this;
  ucs_status_ptr_t request = ucp_worker_flush_nbx(m_worker.get(), &p);
  if (UCS_PTR_IS_ERR(request)) {
    m_error = fmt::format("ucp_worker_flush_nbx: {}", ucs_status_string(UCS_PTR_STATUS(request)));
    m_failed = true;
    return;
  }
  m_worker_flushed = request == nullptr;
}

void ucx_transport::on_worker_flush(void* request, ucs_status_t status, void* user_data) {
  auto* self = static_cast<ucx_transport*>(user_data);
  if (status != UCS_OK && !self->m_failed) {
    self->m_error = fmt::format("UCX worker flush failed: {}", ucs_status_string(status));
    self->m_failed = true;
  }
  self->m_worker_flushed = true;
  ucp_request_free(request);
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
    ucp_request_param_t p = params(recv, false);
    p.cb.recv_am = &ucx_transport::on_am_data;
    return track(ucp_am_recv_data_nbx(m_worker.get(), arrival.data, recv.local, arrival.length, &p),
                 static_cast<request_ctx*>(p.user_data), "ucp_am_recv_data_nbx");
  }
  std::memcpy(recv.local, arrival.data != nullptr ? arrival.data : arrival.copy.data(),
              arrival.length);
  if (arrival.persistent) ucp_am_data_release(m_worker.get(), arrival.data);
  m_done.push(completion{recv.cookie, op_kind::recv});
  return 0;
}

int ucx_transport::post(const op& operation) noexcept {
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
      if (operation.channel == op_channel::data && m_use_am) return post_data_recv(operation);
      ucp_request_param_t p = params(operation, false);
      p.cb.recv = &ucx_transport::on_tag_recv;
      const ucp_tag_t tag = operation.channel == op_channel::sync ? m_sync_tag : m_data_tag;
      return track(
          ucp_tag_recv_nbx(m_worker.get(), operation.local, operation.length, tag, full_mask, &p),
          static_cast<request_ctx*>(p.user_data), "ucp_tag_recv_nbx");
    }
    case op_kind::put:
    case op_kind::get:
      return post_rma(operation);
  }
  return -1;
}

int ucx_transport::post_data_send(const op& operation) noexcept {
  const bool probe = std::exchange(m_probe, false);
  ucp_request_param_t p = params(operation, probe);
  p.cb.send = &ucx_transport::on_send;
  ucs_status_ptr_t request =
      m_use_am
          ? ucp_am_send_nbx(m_ep->get(), am_id, nullptr, 0, operation.local, operation.length, &p)
          : ucp_tag_send_nbx(m_ep->get(), operation.local, operation.length, m_data_tag, &p);
  return track(request, static_cast<request_ctx*>(p.user_data),
               m_use_am ? "ucp_am_send_nbx" : "ucp_tag_send_nbx");
}

void ucx_transport::inspect(ucs_status_ptr_t request) noexcept {
  if (!UCS_PTR_IS_PTR(request)) return;  // NO_IMM_CMPL makes a request unless the post failed
  std::array<char, 1024> text{};
  ucp_request_attr_t attr{};
  attr.field_mask = UCP_REQUEST_ATTR_FIELD_INFO_STRING | UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
  attr.debug_string = text.data();
  attr.debug_string_size = text.size();
  if (ucp_request_query(request, &attr) == UCS_OK) m_request_info = text.data();
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
  const bool probe = std::exchange(m_probe, false);
  ucp_request_param_t p = params(operation, probe);
  p.cb.send = &ucx_transport::on_send;
  const std::uint64_t remote = m_remote[operation.remote].address;
  ucp_rkey_h key = m_rkeys[operation.remote].get();
  ucs_status_ptr_t request =
      operation.kind == op_kind::put
          ? ucp_put_nbx(m_ep->get(), operation.local, operation.length, remote, key, &p)
          : ucp_get_nbx(m_ep->get(), operation.local, operation.length, remote, key, &p);
  m_rma_since_flush = true;
  return track(request, static_cast<request_ctx*>(p.user_data),
               operation.kind == op_kind::put ? "ucp_put_nbx" : "ucp_get_nbx");
}

int ucx_transport::post_sync_send(const op& operation) noexcept {
  if (m_rma_since_flush) {
    // The sync message must not overtake the puts before it: flush the endpoint first.
    m_rma_since_flush = false;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &ucx_transport::on_flush;
    p.user_data = this;
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(m_ep->get(), &p);
    if (UCS_PTR_IS_ERR(flush)) {
      m_error = fmt::format("ucp_ep_flush_nbx: {}", ucs_status_string(UCS_PTR_STATUS(flush)));
      m_failed = true;
      return -1;
    }
    if (flush != nullptr) {
      m_flush_done = false;
      m_sync_after_flush = operation;
      return 0;
    }
  }
  ucp_request_param_t p = params(operation, false);
  p.cb.send = &ucx_transport::on_send;
  return track(ucp_tag_send_nbx(m_ep->get(), operation.local, operation.length, m_sync_tag, &p),
               static_cast<request_ctx*>(p.user_data), "ucp_tag_send_nbx (sync)");
}

int ucx_transport::poll(std::span<completion> out) noexcept {
  // Completions already known (an eager send completes in its post) are returned without a
  // progress call first: ucp_worker_progress is the costliest step of a small-message loop.
  if (m_done.empty() && !m_failed) ucp_worker_progress(m_worker.get());
  if (m_failed) return -1;
  if (m_sync_after_flush && m_flush_done) {
    const op sync = *m_sync_after_flush;
    m_sync_after_flush.reset();
    if (post_sync_send(sync) != 0) return -1;
  }
  std::size_t n = 0;
  while (n < out.size() && !m_done.empty()) {
    out[n++] = m_done.front();
    m_done.pop();
  }
  return static_cast<int>(n);
}

}  // namespace pairperf
