// The OFI transport's data path: posting, completion bookkeeping and progress. Setup, connection
// and description are in ofi_transport.cpp.
#include <fmt/format.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>

#include "transports/ofi/ofi_transport.h"
#include "transports/ofi/ofi_wire.h"

namespace pairperf {

using namespace ofi_wire;

namespace {
// How long a post may wait for room in the provider's queues (progressing meanwhile) before the
// case fails; the harness's case timeout bounds the phase as a whole.
constexpr auto post_retry_limit = std::chrono::seconds(10);
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
    return fail(fmt::format("{} failed: {} (provider: {})", what, fi_strerror(err.err),
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
  const bool inject = m_inject && operation.kind == op_kind::send &&
                      (operation.channel == op_channel::sync || !m_gpu) &&
                      operation.length <= m_info->tx_attr->inject_size;
  request* r = inject ? nullptr : acquire(operation);
  const auto deadline = std::chrono::steady_clock::now() + post_retry_limit;
  for (;;) {
    const int rc = inject ? inject_one(operation) : post_one(operation, r);
    if (rc == 0) break;
    if (rc != -FI_EAGAIN) {
      if (r != nullptr) m_free.push_back(r);
      return fail(
          fmt::format("posting {} bytes: {}", operation.length, fi_strerror(rc < 0 ? -rc : rc)),
          -rc);
    }
    if (progress() < 0 || std::chrono::steady_clock::now() >= deadline) {
      if (r != nullptr) m_free.push_back(r);
      return m_failed ? -1
                      : fail(fmt::format("the provider's queue stayed full for {} s",
                                         post_retry_limit.count()),
                             0);
    }
  }
  if (inject) {
    m_injected = true;
    m_done.push_back(completion{operation.cookie, operation.kind});
    return 0;
  }
  if (operation.kind != op_kind::recv) ++m_sends_outstanding;
  if (r->write) ++m_writes_outstanding;
  return 0;
}

int ofi_transport::inject_one(const op& operation) noexcept {
  return static_cast<int>(fi_tinject(m_ep.get(), operation.local, operation.length, m_peer,
                                     operation.channel == op_channel::data ? data_tag : sync_tag));
}

void ofi_transport::start_flush() noexcept {
  if (!m_injected || m_failed || !m_ep || m_peer == FI_ADDR_UNSPEC) return;
  // Ordered after the injected messages (FI_ORDER_SAS): its completion says they left too.
  request* r = acquire(
      op{op_kind::send, op_channel::sync, m_flush_out.data(), m_flush_out.size(), flush_cookie, 0});
  const auto deadline = std::chrono::steady_clock::now() + post_retry_limit;
  ssize_t rc = 0;
  while ((rc = fi_tsend(m_ep.get(), m_flush_out.data(), m_flush_out.size(),
                        desc_of(m_flush_out.data()), m_peer, flush_tag, &r->context)) ==
             -FI_EAGAIN &&
         std::chrono::steady_clock::now() < deadline) {
    if (progress() < 0) return;
  }
  if (rc != 0) {
    m_free.push_back(r);
    (void)fail(fmt::format("flushing: {}", fi_strerror(rc < 0 ? static_cast<int>(-rc) : 0)),
               static_cast<int>(-rc));
    return;
  }
  ++m_sends_outstanding;
  m_injected = false;
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
      msg.tag = operation.channel == op_channel::data ? data_tag : sync_tag;
      msg.context = &r->context;
      return static_cast<int>(fi_tsendmsg(m_ep.get(), &msg, FI_COMPLETION));
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
  if (m_failed) return -1;
  while (!m_deferred_sync.empty() && m_writes_outstanding == 0) {
    const op sync = m_deferred_sync.front();
    m_deferred_sync.pop_front();
    request* r = acquire(sync);
    int rc = 0;
    const auto deadline = std::chrono::steady_clock::now() + post_retry_limit;
    while ((rc = post_one(sync, r)) == -FI_EAGAIN && std::chrono::steady_clock::now() < deadline) {
      if (progress() < 0) return -1;
    }
    if (rc != 0) {
      m_free.push_back(r);
      return fail(fmt::format("posting a sync message: {}", fi_strerror(rc < 0 ? -rc : rc)), -rc);
    }
    ++m_sends_outstanding;
  }
  std::size_t n = 0;
  while (n < out.size() && !m_done.empty()) {
    out[n++] = m_done.front();
    m_done.pop_front();
  }
  return static_cast<int>(n);
}

bool ofi_transport::flushed() const noexcept {
  // The harness polls between start_flush() and flushed(): progress happens there.
  return m_failed || (m_sends_outstanding == 0 && m_deferred_sync.empty());
}

}  // namespace pairperf
