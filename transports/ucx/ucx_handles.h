#pragma once
// RAII for every UCX handle. Constructors throw std::runtime_error carrying ucs_status_string;
// nothing here runs in the timed loop.
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transports/ucx/ucx_library.h"

namespace pairperf::ucx {

// Bytes every request of a context_for() context reserves for its poster (ucp_params_t
// request_size): the transport keeps each operation's cookie there.
inline constexpr std::size_t request_user_bytes = 32;

// Throws std::runtime_error("<what>: <ucs_status_string>") unless status is UCS_OK.
void check(ucs_status_t status, std::string_view what);

struct config_deleter {
  void operator()(ucp_config_t* c) const noexcept { lib().ucp_config_release(c); }
};
struct context_deleter {
  void operator()(ucp_context_h c) const noexcept { lib().ucp_cleanup(c); }
};
struct worker_deleter {
  void operator()(ucp_worker_h w) const noexcept { lib().ucp_worker_destroy(w); }
};
struct rkey_deleter {
  void operator()(ucp_rkey_h k) const noexcept { lib().ucp_rkey_destroy(k); }
};

using config_ptr = std::unique_ptr<ucp_config_t, config_deleter>;
using context_ptr = std::unique_ptr<std::remove_pointer_t<ucp_context_h>, context_deleter>;
using worker_ptr = std::unique_ptr<std::remove_pointer_t<ucp_worker_h>, worker_deleter>;
using rkey_ptr = std::unique_ptr<std::remove_pointer_t<ucp_rkey_h>, rkey_deleter>;

// ucp_config_read with the environment's UCX_* as defaults.
config_ptr read_config();

using shared_context = std::shared_ptr<std::remove_pointer_t<ucp_context_h>>;
// A context for this configuration (UCX_TLS, UCX_NET_DEVICES, KEY=VALUE options; "" = the
// environment's; UCP_FEATURE_* bits), made once per process: ucp_init costs far more than a
// case's worker and endpoint, and contexts with different transport sets coexist. Only the
// features a test needs are asked for: each one can add interfaces every progress call polls.
// Throws on bad options.
shared_context context_for(const std::string& tls, const std::string& net_devices,
                           const std::vector<std::string>& options, std::uint64_t features);

// Workers kept for the next case of the same configuration in this process: creating one costs
// 5-15 ms (each transport's interfaces, a TCP listener, shared-memory segments), more than a
// short case measures. A case takes its context's kept worker or a new one (single-threaded
// mode), and gives it back only if it ended clean: nothing outstanding, no error, no message left
// unmatched. One is kept per context and thread: a worker never crosses threads.
struct taken_worker {
  worker_ptr worker;
  std::size_t cases = 1;  // the cases this worker has served, this one included
};
taken_worker take_worker(const shared_context& context);
void keep_worker(const shared_context& context, taken_worker worker);
// Whether a message the worker received is still waiting for a tagged receive.
bool has_unmatched_message(ucp_worker_h worker);

// A worker address, released through its worker.
class worker_address {
 public:
  explicit worker_address(ucp_worker_h worker);
  worker_address(const worker_address&) = delete;
  worker_address& operator=(const worker_address&) = delete;
  ~worker_address() { lib().ucp_worker_release_address(m_worker, m_address); }
  [[nodiscard]] std::vector<std::byte> bytes() const;

 private:
  ucp_worker_h m_worker;
  ucp_address_t* m_address = nullptr;
  std::size_t m_length = 0;
};

// A registered memory region and its packed remote key.
class memory_handle {
 public:
  memory_handle(ucp_context_h context, void* address, std::size_t length, ucs_memory_type_t type);
  memory_handle(memory_handle&& other) noexcept;
  memory_handle& operator=(memory_handle&&) = delete;
  memory_handle(const memory_handle&) = delete;
  memory_handle& operator=(const memory_handle&) = delete;
  ~memory_handle();
  [[nodiscard]] ucp_mem_h get() const noexcept { return m_memh; }
  [[nodiscard]] std::vector<std::byte> packed_key() const;

 private:
  ucp_context_h m_context;
  ucp_mem_h m_memh = nullptr;
};

// An endpoint; closing is forced and progresses the worker for at most `close_timeout`, so a
// dead or busy peer never hangs teardown.
class endpoint {
 public:
  endpoint() = default;
  endpoint(ucp_worker_h worker, ucp_ep_h ep) : m_worker(worker), m_ep(ep) {}
  endpoint(const endpoint&) = delete;
  endpoint& operator=(const endpoint&) = delete;
  ~endpoint() { close(); }
  [[nodiscard]] ucp_ep_h get() const noexcept { return m_ep; }
  void close() noexcept;

 private:
  ucp_worker_h m_worker = nullptr;
  ucp_ep_h m_ep = nullptr;
  static constexpr std::chrono::milliseconds close_timeout{1000};
};

// What a UCX function printing to a FILE* wrote, as text (ucp_ep_print_info and friends).
template <class F>
std::string capture(F&& print);
std::string capture_stream(void (*fill)(FILE*, const void*), const void* arg);

template <class F>
std::string capture(F&& print) {
  return capture_stream([](FILE* f, const void* a) { (*static_cast<const F*>(a))(f); }, &print);
}

}  // namespace pairperf::ucx
