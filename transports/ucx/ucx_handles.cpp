#include "transports/ucx/ucx_handles.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "transports/ucx/ucx_options.h"

namespace pairperf::ucx {

void check(ucs_status_t status, std::string_view what) {
  if (status != UCS_OK)
    throw std::runtime_error(fmt::format("{}: {}", what, lib().ucs_status_string(status)));
}

config_ptr read_config() {
  ucp_config_t* raw = nullptr;
  check(lib().ucp_config_read(nullptr, nullptr, &raw), "ucp_config_read");
  return config_ptr(raw);
}

worker_address::worker_address(ucp_worker_h worker) : m_worker(worker) {
  check(lib().ucp_worker_get_address(worker, &m_address, &m_length), "ucp_worker_get_address");
}

std::vector<std::byte> worker_address::bytes() const {
  const auto* p = reinterpret_cast<const std::byte*>(m_address);
  return {p, p + m_length};
}

memory_handle::memory_handle(ucp_context_h context, void* address, std::size_t length,
                             ucs_memory_type_t type)
    : m_context(context) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  params.address = address;
  params.length = length;
  store_memory_type(params.memory_type,
                    to_library(type, lib().loaded));  // the ABI trap: ucx_library.h
  check(lib().ucp_mem_map(context, &params, &m_memh),
        fmt::format("ucp_mem_map of {} bytes", length));
}

memory_handle::memory_handle(memory_handle&& other) noexcept
    : m_context(other.m_context), m_memh(other.m_memh) {
  other.m_memh = nullptr;
}

memory_handle::~memory_handle() {
  if (m_memh != nullptr) lib().ucp_mem_unmap(m_context, m_memh);
}

std::vector<std::byte> memory_handle::packed_key() const {
  void* buffer = nullptr;
  std::size_t size = 0;
  check(lib().ucp_rkey_pack(m_context, m_memh, &buffer, &size), "ucp_rkey_pack");
  const auto* p = static_cast<const std::byte*>(buffer);
  std::vector<std::byte> out(p, p + size);
  lib().ucp_rkey_buffer_release(buffer);
  return out;
}

void endpoint::close() noexcept {
  if (m_ep == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  // Forced, as ucx_perftest closes: a graceful close waits for the peer to progress, and the peer
  // is then waiting on the control channel, not in UCX. Nothing is in flight by now.
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t request = lib().ucp_ep_close_nbx(m_ep, &param);
  if (UCS_PTR_IS_PTR(request)) {
    const auto end = std::chrono::steady_clock::now() + close_timeout;
    while (api::ucp_request_check_status(request) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < end) {
      api::ucp_worker_progress(m_worker);
    }
    // A peer that does not answer within the bound leaves the close to the worker's destruction.
    api::ucp_request_free(request);
  }
  m_ep = nullptr;
}

shared_context context_for(const std::string& tls, const std::string& net_devices,
                           const std::vector<std::string>& options, std::uint64_t features) {
  // A context per distinct configuration, made once per process: ucp_init costs far more than
  // a case's worker and endpoint, and contexts with different transport sets coexist.
  static std::mutex lock;
  static std::map<std::string, shared_context> cache;
  const std::string key =
      fmt::format("{}|{}|{}|{}", tls, net_devices, fmt::join(options, ";"), features);
  const std::lock_guard<std::mutex> held(lock);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  config_ptr config = read_config();
  if (!tls.empty())
    check(lib().ucp_config_modify(config.get(), "TLS", tls.c_str()),
          fmt::format("UCX_TLS={}", tls));
  if (!net_devices.empty()) {
    check(lib().ucp_config_modify(config.get(), "NET_DEVICES", net_devices.c_str()),
          fmt::format("UCX_NET_DEVICES={}", net_devices));
  }
  for (const auto& text : options) {
    const auto [name, value] = split_option(text);
    check(lib().ucp_config_modify(config.get(), name.c_str(), value.c_str()),
          fmt::format("--ucx {}", text));
  }
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE;
  p.features = features;
  p.request_size = request_user_bytes;
  ucp_context_h context = nullptr;
  check(lib().init(&p, config.get(), &context),
        fmt::format("ucp_init with UCX_TLS={}", tls.empty() ? "(default)" : tls));
  shared_context shared(context, context_deleter{});
  cache.emplace(key, shared);
  return shared;
}

namespace {

// Per thread: a worker created with UCS_THREAD_MODE_SINGLE stays with the thread that made it
// (an MPI mesh rank runs its server in one thread and its client in another, pairs of a --hosts
// mesh run in threads of their own), and a thread's kept workers go when it ends. The main
// thread's go at exit before the contexts (thread-local objects before static ones).
std::map<ucp_context_h, taken_worker>& kept_workers() {
  thread_local std::map<ucp_context_h, taken_worker> kept;
  return kept;
}

}  // namespace

taken_worker take_worker(const shared_context& context) {
  auto& kept = kept_workers();
  if (auto it = kept.find(context.get()); it != kept.end()) {
    taken_worker w = std::move(it->second);
    kept.erase(it);
    ++w.cases;
    return w;
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  check(lib().ucp_worker_create(context.get(), &wp, &worker), "ucp_worker_create");
  return taken_worker{worker_ptr(worker), 1};
}

void keep_worker(const shared_context& context, taken_worker worker) {
  kept_workers()[context.get()] = std::move(worker);  // replaces (destroys) any other kept one
}

bool has_unmatched_message(ucp_worker_h worker) {
  ucp_tag_recv_info_t info{};
  return lib().ucp_tag_probe_nb(worker, 0, 0, 0, &info) != nullptr;
}

std::string capture_stream(void (*fill)(FILE*, const void*), const void* arg) {
  char* data = nullptr;
  std::size_t size = 0;
  FILE* f = open_memstream(&data, &size);
  if (f == nullptr) return {};
  fill(f, arg);
  std::fclose(f);
  std::string out(data, size);
  std::free(data);
  return out;
}

}  // namespace pairperf::ucx
