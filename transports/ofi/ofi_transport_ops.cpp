// The OFI transport's data path: posting, completion bookkeeping and progress. Setup, connection
// and description are in ofi_transport.cpp.
#include <fmt/format.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>

#include "patterns/run.h"
#include "transports/ofi/ofi_transport.h"
#include "transports/ofi/ofi_wire.h"

namespace pairperf {

using namespace ofi_wire;

namespace {
constexpr std::size_t cq_batch = 16;
}  // namespace

ofi_transport::request* ofi_transport::acquire(const op& operation) noexcept {
  request* r = nullptr;
  if (m_free.empty()) {
    r = &m_requests.emplace_back();  // grows while warming up, then recycles
  } else {
    r = m_free.back();
    m_free.pop_back();
  }
  r->context = fi_context2{};
  r->cookie = operation.cookie;
  r->kind = operation.kind;
  r->write = operation.kind == op_kind::put;
  return r;
}

void* ofi_transport::desc_of(const void* p) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (m_last_region < m_regions.size() && a >= m_regions[m_last_region].begin &&
      a < m_regions[m_last_region].end)
    return m_regions[m_last_region].desc;
  for (std::size_t i = 0; i < m_regions.size(); ++i) {
    if (a >= m_regions[i].begin && a < m_regions[i].end) {
      m_last_region = i;
      return m_regions[i].desc;
    }
  }
  return nullptr;
}

int ofi_transport::fail(std::string what, int err) noexcept {
  if (!m_failed) {
    m_error = std::move(what);
    m_peer_gone = means_peer_gone(err);
  }
  m_failed = true;
  return -1;
}

bool ofi_transport::means_peer_gone(int err) noexcept {
  switch (err) {
    case FI_ECONNRESET:
    case FI_ECONNREFUSED:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ETIMEDOUT:
    case EPIPE:
      return true;
    default:
      return false;
  }
}

int ofi_transport::progress() noexcept {
  std::array<fi_cq_tagged_entry, cq_batch> entries{};
  const ssize_t n = fi_cq_read(m_cq.get(), entries.data(), entries.size());
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    if (fi_cq_readerr(m_cq.get(), &err, 0) < 0)
      return fail("fi_cq_readerr failed after an error completion", 0);
    std::array<char, 256> detail{};
    const char* text =
        fi_cq_strerror(m_cq.get(), err.prov_errno, err.err_data, detail.data(), detail.size());
    auto* r = static_cast<request*>(err.op_context);
    const char* what = r == nullptr               ? "an operation"
                       : r->kind == op_kind::send ? "a tagged send"
                       : r->kind == op_kind::recv ? "a tagged receive"
                       : r->kind == op_kind::put  ? "an RMA write"
                                                  : "an RMA read";
    return fail(fmt::format("{} failed: {} (provider: {})", what, ofi::lib().strerror(err.err),
                            text != nullptr ? text : "no detail"),
                err.err);
  }
  if (n < 0) return fail(ofi::failure("fi_cq_read", static_cast<int>(n)), static_cast<int>(-n));
  for (ssize_t i = 0; i < n; ++i) {
    auto* r = static_cast<request*>(entries[static_cast<std::size_t>(i)].op_context);
    if (r == nullptr) continue;
    if (r->kind != op_kind::recv) --m_sends_outstanding;
    if (r->write) --m_writes_outstanding;
    if (r->cookie != flush_cookie) m_done.push_back(completion{r->cookie, r->kind});
    m_free.push_back(r);
  }
  return static_cast<int>(n);
}

int ofi_transport::post(const op& operation) noexcept {
  if (!m_ep || m_peer == FI_ADDR_UNSPEC) return fail("ofi: post before connect", 0);
  if (m_failed) return -1;
  if (operation.kind == op_kind::send && operation.channel == op_channel::sync &&
      (!m_deferred_sync.empty() || (m_writes_outstanding > 0 && !m_send_after_write))) {
    // The notification must not overtake the writes before it: it waits for their delivery.
    m_deferred_sync.push_back(operation);
    return 0;
  }
  return submit(operation);
}

bool ofi_transport::small(const op& operation) const noexcept {
  return operation.kind == op_kind::send && operation.cookie != flush_cookie &&
         (operation.channel == op_channel::sync || !m_gpu) &&
         operation.length <= m_info->tx_attr->inject_size;
}

// Posts now, or queues behind what the provider could not take yet (-FI_EAGAIN): poll() posts
// the queues in order. Receives queue apart from sends, writes and reads: a receive waiting behind
// a send that waits for the peer's receives would deadlock both sides. A post never blocks, so
// the harness's deadlines bound everything.
int ofi_transport::submit(const op& operation) noexcept {
  request* r = injects(operation) ? nullptr : acquire(operation);
  // Counted from here, queued or posted: a notification after it waits for its delivery.
  if (r != nullptr && r->write) ++m_writes_outstanding;
  auto& queue = operation.kind == op_kind::recv ? m_pending_rx : m_pending_tx;
  if (!queue.empty()) {
    queue.emplace_back(operation, r);
    return 0;
  }
  int rc = try_post(operation, r);
  if (rc == -FI_EAGAIN) {
    if (progress() < 0) return -1;
    rc = try_post(operation, r);
  }
  if (rc == -FI_EAGAIN) {
    queue.emplace_back(operation, r);
    return 0;
  }
  return rc;
}

int ofi_transport::try_post(const op& operation, request* r) noexcept {
  const int rc = r == nullptr ? inject_one(operation) : post_one(operation, r);
  if (rc == -FI_EAGAIN) return rc;
  if (rc != 0) {
    if (r != nullptr) m_free.push_back(r);
    return fail(fmt::format("posting {} bytes: {}", operation.length,
                            ofi::lib().strerror(rc < 0 ? -rc : rc)),
                -rc);
  }
  if (r == nullptr) {  // injected: complete at once; start_flush() covers what the provider holds
    m_injected = true;
    if (operation.cookie != flush_cookie)
      m_done.push_back(completion{operation.cookie, operation.kind});
    return 0;
  }
  if (operation.kind != op_kind::recv) ++m_sends_outstanding;
  return 0;
}

int ofi_transport::post_pending() noexcept {
  for (auto* queue : {&m_pending_rx, &m_pending_tx}) {
    while (!queue->empty()) {
      const auto [operation, r] = queue->front();
      const int rc = try_post(operation, r);
      if (rc == -FI_EAGAIN) break;
      queue->pop_front();
      if (rc != 0) return -1;
    }
  }
  while (!m_deferred_sync.empty() && m_writes_outstanding == 0 && m_pending_tx.empty()) {
    const op sync = m_deferred_sync.front();
    m_deferred_sync.pop_front();
    if (submit(sync) != 0) return -1;
  }
  if (m_flush_wanted && m_pending_tx.empty() && m_deferred_sync.empty()) {
    // Ordered after the injected messages (FI_ORDER_SAS): its completion says they left too.
    m_flush_wanted = false;
    m_injected = false;
    return submit(op{op_kind::send, op_channel::sync, m_flush_out.data(), m_flush_out.size(),
                     flush_cookie, 0});
  }
  return 0;
}

int ofi_transport::inject_one(const op& operation) noexcept {
  return static_cast<int>(fi_tinject(m_ep.get(), operation.local, operation.length, m_peer,
                                     operation.channel == op_channel::data ? data_tag : sync_tag));
}

void ofi_transport::start_flush() noexcept {
  if (!m_injected || m_failed || !m_ep || m_peer == FI_ADDR_UNSPEC) return;
  m_flush_wanted = true;
  (void)post_pending();
}

int ofi_transport::post_one(const op& operation, request* r) noexcept {
  iovec iov{operation.local, operation.length};
  void* desc = desc_of(operation.local);
  switch (operation.kind) {
    case op_kind::send: {
      fi_msg_tagged msg{};
      msg.msg_iov = &iov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.addr = m_peer;
      msg.tag = operation.cookie == flush_cookie        ? flush_tag
                : operation.channel == op_channel::data ? data_tag
                                                        : sync_tag;
      msg.context = &r->context;
      const std::uint64_t flags =
          FI_COMPLETION | (m_inject == ofi::inject_mode::flag && small(operation) ? FI_INJECT : 0);
      return static_cast<int>(fi_tsendmsg(m_ep.get(), &msg, flags));
    }
    case op_kind::recv:
      return static_cast<int>(
          fi_trecv(m_ep.get(), operation.local, operation.length, desc, FI_ADDR_UNSPEC,
                   operation.channel == op_channel::data ? data_tag : sync_tag, 0, &r->context));
    case op_kind::put:
    case op_kind::get: {
      if (operation.remote >= m_remote.size() ||
          operation.length > m_remote[operation.remote].length)
        return -FI_EINVAL;
      const std::uint64_t remote_address = (m_info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0
                                               ? m_remote[operation.remote].address
                                               : 0;
      fi_rma_iov rma{remote_address, operation.length, m_remote_keys[operation.remote]};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.addr = m_peer;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = &r->context;
      if (operation.kind == op_kind::get)
        return static_cast<int>(fi_readmsg(m_ep.get(), &msg, FI_COMPLETION));
      // Without send-after-write ordering, a write completes only once the target has it.
      const std::uint64_t flags = FI_COMPLETION | (m_send_after_write ? 0 : FI_DELIVERY_COMPLETE);
      return static_cast<int>(fi_writemsg(m_ep.get(), &msg, flags));
    }
  }
  return -FI_EINVAL;
}

int ofi_transport::poll(std::span<completion> out) noexcept {
  // Completions already known are returned without reading the queue first.
  if (m_done.empty() && !m_failed && progress() < 0) return -1;
  if (m_failed || post_pending() < 0) return -1;
  std::size_t n = 0;
  while (n < out.size() && !m_done.empty()) {
    out[n++] = m_done.front();
    m_done.pop_front();
  }
  return static_cast<int>(n);
}

// The loops over this class: post() and poll() above are direct calls in them.
pattern_outcome ofi_transport::run_phase(const pattern_run& run, const pattern_buffers& buffers,
                                         sample_recorder& samples, message_check* checker,
                                         const where& place) {
  return run_pattern(*this, run, buffers, samples, checker, place);
}

bool ofi_transport::flushed() const noexcept {
  // The harness polls between start_flush() and flushed(): progress happens there.
  return m_failed || (m_sends_outstanding == 0 && m_pending_tx.empty() && m_deferred_sync.empty() &&
                      !m_flush_wanted);
}

}  // namespace pairperf
