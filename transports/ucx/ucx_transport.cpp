#include "transports/ucx/ucx_transport.h"

#include <algorithm>
#include <array>
#include <map>
#include <cstring>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/errors.h"
#include "transports/ucx/ucx_describe.h"
#include "transports/ucx/ucx_options.h"

namespace pairperf {
namespace {

constexpr ucp_tag_t data_tag = 0x1;
constexpr ucp_tag_t sync_tag = 0x2;
constexpr ucp_tag_t wireup_tag = 0x3;
constexpr std::uint64_t handshake_cookie = ~std::uint64_t{0} - 1;
constexpr ucp_tag_t full_mask = ~ucp_tag_t{0};
constexpr unsigned am_id = 0;

struct ucx_test {
  test_spec spec;
  bool active_messages;
};

constexpr std::array<ucx_test, 8> tests{{
    {{"tag_lat", pattern_kind::pingpong, op_kind::send, "ping-pong latency of tagged messages"}, false},
    {{"tag_bw", pattern_kind::stream_uni, op_kind::send, "streaming bandwidth of tagged messages"}, false},
    {{"tag_bibw", pattern_kind::stream_bi, op_kind::send, "bidirectional bandwidth of tagged messages"}, false},
    {{"put_lat", pattern_kind::pingpong, op_kind::put, "ping-pong latency of a put made visible to the target (put, flush, notification)"}, false},
    {{"put_bw", pattern_kind::stream_uni, op_kind::put, "streaming bandwidth of puts (flushed, sender-measured)"}, false},
    {{"get_bw", pattern_kind::stream_uni, op_kind::get, "streaming bandwidth of gets (measured by the reader)"}, false},
    {{"am_lat", pattern_kind::pingpong, op_kind::send, "ping-pong latency of active messages"}, true},
    {{"am_bw", pattern_kind::stream_uni, op_kind::send, "streaming bandwidth of active messages"}, true},
}};

ucs_memory_type_t to_ucs(memory_type m) {
  switch (m) {
    case memory_type::host: return UCS_MEMORY_TYPE_HOST;
    case memory_type::cuda: return UCS_MEMORY_TYPE_CUDA;
  }
  return UCS_MEMORY_TYPE_UNKNOWN;
}

bool means_peer_gone(ucs_status_t s) {
  return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_UNREACHABLE || s == UCS_ERR_REJECTED;
}


}  // namespace

transport_entry ucx_transport::entry() {
  std::vector<test_spec> specs;
  for (const auto& t : tests) specs.push_back(t.spec);
  return transport_entry{
      "ucx",
      "UCX (UCP): tagged messages, active messages and RMA over the transports UCX_TLS selects",
      specs,
      [](const transport_params& p) -> std::unique_ptr<transport> { return std::make_unique<ucx_transport>(p); },
      true,
      ucx::check_options,
      [] {
        return nlohmann::json{{"version", ucp_get_version_string()}, {"transports", ucx::available_transports()}};
      },
  };
}

ucx_transport::ucx_transport(const transport_params& params) : m_params(params) {
  const test_case& c = params.test;
  for (const auto& t : tests) {
    if (t.spec.name == c.test) m_use_am = t.active_messages;
  }
  const memory_type mine = params.side == side::client ? c.client_memory : c.server_memory;
  m_mem_type = to_ucs(mine);
  const auto& available = ucx::available_transports();
  if (const auto missing = ucx::missing_transports(c.tls, available); !missing.empty()) {
    throw transport_unsupported(fmt::format("UCX on this host does not offer {} (available: {})", fmt::join(missing, ", "), fmt::join(available, ", ")));
  }
  if (mine == memory_type::cuda && available.count("cuda_copy") == 0) {
    throw transport_unsupported(fmt::format("this host's UCX cannot move cuda memory: it has no cuda_copy transport (available: {})", fmt::join(available, ", ")));
  }
  if (m_use_am && mine != memory_type::host) throw transport_unsupported("active-message tests copy on the CPU: host memory only");

  // The interface is the client's; the server's devices stay as its environment sets them.
  m_context = ucx::context_for(c.tls, params.side == side::client ? c.iface : std::string(), params.options.ucx);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  ucx::check(ucp_worker_create(m_context.get(), &wp, &worker), "ucp_worker_create");
  m_worker.reset(worker);

  if (m_use_am) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = am_id;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = &ucx_transport::on_am;
    hp.arg = this;
    ucx::check(ucp_worker_set_am_recv_handler(m_worker.get(), &hp), "ucp_worker_set_am_recv_handler");
  }
}

ucx_transport::~ucx_transport() {
  // Remote keys before their endpoint, the endpoint before memory and worker (member order does
  // the rest); AM data UCX lent us goes back first.
  while (!m_am_arrived.empty()) {
    if (m_am_arrived.front().persistent) ucp_am_data_release(m_worker.get(), m_am_arrived.front().data);
    m_am_arrived.pop();
  }
  m_rkeys.clear();
  // Operations still outstanding (a peer that died mid-case) are cancelled, not left behind.
  const bool outstanding = m_ctx_store.size() > m_ctx_free.size();
  if (outstanding) cancel_outstanding();
  m_ep.reset();
}

void ucx_transport::cancel_outstanding() noexcept {
  for (auto& ctx : m_ctx_store) {
    if (ctx.in_use && ctx.request != nullptr) ucp_request_cancel(m_worker.get(), ctx.request);
  }
  // Cancelled requests complete through their callbacks, which free them.
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (m_ctx_store.size() > m_ctx_free.size() && std::chrono::steady_clock::now() < end) ucp_worker_progress(m_worker.get());
  for (auto& ctx : m_ctx_store) {
    if (ctx.in_use && ctx.request != nullptr) {
      ucp_request_free(ctx.request);
      release(&ctx);
    }
  }
}

capabilities ucx_transport::caps() const {
  capabilities c{true, true, true, {memory_type::host}};
  if (ucx::available_transports().count("cuda_copy") > 0) c.memory.push_back(memory_type::cuda);
  return c;
}

std::vector<std::byte> ucx_transport::local_address() { return ucx::worker_address(m_worker.get()).bytes(); }

void ucx_transport::connect(std::span<const std::byte> peer_address) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  // No peer-failure mode: with it UCX drops the transports that cannot report a dead peer (in
  // 1.13 all of shared memory) and the lanes would not be those an application gets by default.
  // A dead peer is bounded by the case timeout instead; the provenance records the mode.
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucp_ep_h handle = nullptr;
  const ucs_status_t st = ucp_ep_create(m_worker.get(), &ep, &handle);
  if (st != UCS_OK) {
    throw step_error(st == UCS_ERR_UNREACHABLE ? error_kind::unreachable : error_kind::error,
                     where{"ucx endpoint create", m_params.peer_host, m_params.side == side::client ? m_params.test.iface : ""},
                     fmt::format("ucp_ep_create: {}", ucs_status_string(st)));
  }
  m_ep.emplace(m_worker.get(), handle);
  handshake();
}

void ucx_transport::handshake() {
  // One tagged message each way completes the wireup on both sides before any measurement (the
  // peer runs the same at the same time), and proves the path exists.
  const where place{"ucx wireup", m_params.peer_host, m_params.side == side::client ? m_params.test.iface : ""};
  const op recv{op_kind::recv, op_channel::sync, m_hello_in.data(), m_hello_in.size(), handshake_cookie, 0};
  const op send{op_kind::send, op_channel::sync, m_hello_out.data(), m_hello_out.size(), handshake_cookie, 0};
  ucp_request_param_t rp = params(recv, false);
  rp.cb.recv = &ucx_transport::on_tag_recv;
  const bool posted = track(ucp_tag_recv_nbx(m_worker.get(), recv.local, recv.length, wireup_tag, full_mask, &rp),
                            static_cast<request_ctx*>(rp.user_data), "wireup receive") == 0;
  ucp_request_param_t sp = params(send, false);
  sp.cb.send = &ucx_transport::on_send;
  if (!posted || track(ucp_tag_send_nbx(m_ep->get(), send.local, send.length, wireup_tag, &sp), static_cast<request_ctx*>(sp.user_data),
                       "wireup send") != 0) {
    throw step_error(m_peer_gone ? error_kind::unreachable : error_kind::error, place, m_error);
  }
  const auto deadline = std::chrono::steady_clock::now() + m_params.connect_timeout;
  std::size_t done = 0;
  while (done < 2) {
    ucp_worker_progress(m_worker.get());
    if (m_failed) throw step_error(error_kind::unreachable, place, m_error);
    while (!m_done.empty()) {
      done += m_done.front().cookie == handshake_cookie ? 1 : 0;
      m_done.pop();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw step_error(error_kind::unreachable, place,
                       fmt::format("no wireup with the peer within {:.1f} s (timeout)", std::chrono::duration<double>(m_params.connect_timeout).count()));
    }
  }
}

mem_region ucx_transport::register_memory(std::byte* address, std::size_t length, memory_type type) {
  const auto& h = m_memory.emplace_back(m_context.get(), address, length, to_ucs(type));
  return mem_region{address, length, h.packed_key()};
}

void ucx_transport::set_remote_regions(const std::vector<remote_region>& regions) {
  m_rkeys.clear();
  m_remote = regions;
  for (const auto& r : regions) {
    ucp_rkey_h key = nullptr;
    ucx::check(ucp_ep_rkey_unpack(m_ep->get(), r.packed_key.data(), &key), "ucp_ep_rkey_unpack");
    m_rkeys.emplace_back(key);
  }
}

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
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
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

void ucx_transport::on_tag_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* /*info*/, void* user_data) {
  auto* ctx = static_cast<request_ctx*>(user_data);
  ctx->self->complete(request, status, ctx);
}

void ucx_transport::on_am_data(void* request, ucs_status_t status, std::size_t /*length*/, void* user_data) {
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

ucs_status_t ucx_transport::on_am(void* arg, const void* /*header*/, std::size_t /*header_length*/, void* data, std::size_t length,
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
    m_error = fmt::format("active message of {} bytes for a receive of {}", arrival.length, recv.length);
    m_failed = true;
    return -1;
  }
  if (arrival.rndv) {
    ucp_request_param_t p = params(recv, false);
    p.cb.recv_am = &ucx_transport::on_am_data;
    return track(ucp_am_recv_data_nbx(m_worker.get(), arrival.data, recv.local, arrival.length, &p), static_cast<request_ctx*>(p.user_data),
                 "ucp_am_recv_data_nbx");
  }
  std::memcpy(recv.local, arrival.data != nullptr ? arrival.data : arrival.copy.data(), arrival.length);
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
      return operation.channel == op_channel::sync ? post_sync_send(operation) : post_data_send(operation);
    case op_kind::recv: {
      if (operation.channel == op_channel::data && m_use_am) return post_data_recv(operation);
      ucp_request_param_t p = params(operation, false);
      p.cb.recv = &ucx_transport::on_tag_recv;
      const ucp_tag_t tag = operation.channel == op_channel::sync ? sync_tag : data_tag;
      return track(ucp_tag_recv_nbx(m_worker.get(), operation.local, operation.length, tag, full_mask, &p),
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
  ucs_status_ptr_t request = m_use_am ? ucp_am_send_nbx(m_ep->get(), am_id, nullptr, 0, operation.local, operation.length, &p)
                                      : ucp_tag_send_nbx(m_ep->get(), operation.local, operation.length, data_tag, &p);
  return track(request, static_cast<request_ctx*>(p.user_data), m_use_am ? "ucp_am_send_nbx" : "ucp_tag_send_nbx");
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
    m_error = fmt::format("ucx: remote region {} cannot take {} bytes", operation.remote, operation.length);
    m_failed = true;
    return -1;
  }
  const bool probe = std::exchange(m_probe, false);
  ucp_request_param_t p = params(operation, probe);
  p.cb.send = &ucx_transport::on_send;
  const std::uint64_t remote = m_remote[operation.remote].address;
  ucp_rkey_h key = m_rkeys[operation.remote].get();
  ucs_status_ptr_t request = operation.kind == op_kind::put
                                 ? ucp_put_nbx(m_ep->get(), operation.local, operation.length, remote, key, &p)
                                 : ucp_get_nbx(m_ep->get(), operation.local, operation.length, remote, key, &p);
  m_rma_since_flush = true;
  return track(request, static_cast<request_ctx*>(p.user_data), operation.kind == op_kind::put ? "ucp_put_nbx" : "ucp_get_nbx");
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
  return track(ucp_tag_send_nbx(m_ep->get(), operation.local, operation.length, sync_tag, &p), static_cast<request_ctx*>(p.user_data),
               "ucp_tag_send_nbx (sync)");
}

int ucx_transport::poll(std::span<completion> out) noexcept {
  if (!m_failed) ucp_worker_progress(m_worker.get());
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

provenance ucx_transport::describe() const {
  if (!m_ep) return {};
  const auto it = std::find_if(tests.begin(), tests.end(), [&](const ucx_test& t) { return t.spec.name == m_params.test.test; });
  ucx::endpoint_facts facts;
  facts.ep = m_ep->get();
  facts.client = m_params.side == side::client;
  facts.tls = m_params.test.tls;
  facts.iface = m_params.test.iface;
  facts.data_op = it != tests.end() ? it->spec.data_op : op_kind::send;
  facts.active_messages = m_use_am;
  facts.size = m_params.test.size_bytes;
  facts.request_info = m_request_info;
  return ucx::describe_endpoint(facts);
}

}  // namespace pairperf
