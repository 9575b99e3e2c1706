#include "transports/ucx/ucx_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <type_traits>

namespace pairperf::ucx {

namespace {

// "1.22.0" -> "1.22"; "" where the facts hold no version.
std::string minor_of(const nlohmann::json& facts) {
  if (!facts.is_object() || !facts.contains("version") || !facts.at("version").is_string())
    return {};
  const std::string v = facts.at("version").get<std::string>();
  const auto first = v.find('.');
  if (first == std::string::npos) return v;
  return v.substr(0, v.find('.', first + 1));
}

std::string version_and_file(const nlohmann::json& facts) {
  const std::string file =
      facts.contains("library") && facts.at("library").is_string() ? facts.at("library") : "";
  return fmt::format("UCX {}{}", facts.at("version").get<std::string>(),
                     file.empty() ? "" : " (" + file + ")");
}

}  // namespace

std::pair<std::string, std::string> version_mismatch(const nlohmann::json& client,
                                                     const nlohmann::json& server) {
  const std::string a = minor_of(client), b = minor_of(server);
  if (a.empty() || b.empty() || a == b) return {};
  return {fmt::format(
              "the client loads {} and the server {}: UCX does not promise that two minor versions "
              "work together (1.13.1 against 1.22.0, measured: every case failed in "
              "ucp_ep_rkey_unpack, 'Unsupported operation', and a 1.13 put aborted the 1.22 side's "
              "session)",
              version_and_file(client), version_and_file(server)),
          "run one UCX minor version on both sides (one image or package for every node); "
          "pairperf loads the libucp that PAIRPERF_UCX_LIBRARY names, else the loader's"};
}

unsigned memory_type_unknown(version v) {
  // The enumerators before UCS_MEMORY_TYPE_LAST (= UNKNOWN), by the tag that added them:
  // RDMA 1.16; ZE_HOST, ZE_DEVICE, ZE_MANAGED 1.17; GAUDI 1.21.
  if (v < version{1, 16}) return 5;
  if (v < version{1, 17}) return 6;
  if (v < version{1, 21}) return 9;
  return 10;
}

static_assert(sizeof(ucs_memory_type_t) == sizeof(unsigned));

// HOST, CUDA, CUDA_MANAGED, ROCM, ROCM_MANAGED: the same values in every version; the later
// ones were appended in order, so a value below both sides' UNKNOWN names the same type.
unsigned to_library(ucs_memory_type_t built, version v) {
  const auto value = static_cast<unsigned>(built);
  const unsigned unknown = memory_type_unknown(v);
  return value >= memory_type_unknown(built_version) || value >= unknown ? unknown : value;
}

ucs_memory_type_t from_library(unsigned loaded, version v) {
  const unsigned unknown = memory_type_unknown(built_version);
  return static_cast<ucs_memory_type_t>(
      loaded >= memory_type_unknown(v) || loaded >= unknown ? unknown : loaded);
}

void store_memory_type(ucs_memory_type_t& field, unsigned value) noexcept {
  std::memcpy(&field, &value, sizeof value);
}

unsigned load_memory_type(const ucs_memory_type_t& field) noexcept {
  unsigned value = 0;
  std::memcpy(&value, &field, sizeof value);
  return value;
}

void library::print_all_opts(FILE* stream, const char* prefix,
                             ucs_config_print_flags_t flags) const {
  if (loaded < version{1, 19}) {
    reinterpret_cast<print_all_opts_113>(ucs_config_parser_print_all_opts)(stream, prefix, flags,
                                                                           ucs_config_global_list);
  } else {
    reinterpret_cast<print_all_opts_119>(ucs_config_parser_print_all_opts)(
        stream, prefix, flags, ucs_config_global_list, nullptr);
  }
}

namespace {

struct loaded_library {
  library functions;
  std::string why;
};

std::string file_of(const void* symbol) {
  Dl_info info{};
  if (::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return {};
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(info.dli_fname, ec);
  return ec ? std::string(info.dli_fname) : canonical.string();
}

// PAIRPERF_UCX_LIBRARY (a file, or a folder holding libucp.so.0), or the loader's libucp.so.0.
std::string requested_file() {
  const char* env = std::getenv("PAIRPERF_UCX_LIBRARY");
  if (env == nullptr || *env == '\0') return "libucp.so.0";
  std::error_code ec;
  if (std::filesystem::is_directory(env, ec))
    return (std::filesystem::path(env) / "libucp.so.0").string();
  return env;
}

void resolve(void* handle, loaded_library& l) {
  const auto get = [&](auto& out, const char* name) {
    void* p = ::dlsym(handle, name);
    if (p == nullptr && l.why.empty()) l.why = fmt::format("this UCX has no {}", name);
    out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(p);
  };
  library& f = l.functions;
#define PAIRPERF_UCX_GET(name) get(f.name, #name)
  PAIRPERF_UCX_GET(ucp_get_version);
  PAIRPERF_UCX_GET(ucp_get_version_string);
  PAIRPERF_UCX_GET(ucp_config_read);
  PAIRPERF_UCX_GET(ucp_config_release);
  PAIRPERF_UCX_GET(ucp_config_modify);
  PAIRPERF_UCX_GET(ucp_init_version);
  PAIRPERF_UCX_GET(ucp_cleanup);
  PAIRPERF_UCX_GET(ucp_context_print_info);
  PAIRPERF_UCX_GET(ucp_worker_create);
  PAIRPERF_UCX_GET(ucp_worker_destroy);
  PAIRPERF_UCX_GET(ucp_worker_progress);
  PAIRPERF_UCX_GET(ucp_worker_get_address);
  PAIRPERF_UCX_GET(ucp_worker_release_address);
  PAIRPERF_UCX_GET(ucp_worker_flush_nbx);
  PAIRPERF_UCX_GET(ucp_worker_set_am_recv_handler);
  PAIRPERF_UCX_GET(ucp_ep_create);
  PAIRPERF_UCX_GET(ucp_ep_close_nbx);
  PAIRPERF_UCX_GET(ucp_ep_flush_nbx);
  PAIRPERF_UCX_GET(ucp_ep_print_info);
  PAIRPERF_UCX_GET(ucp_ep_query);
  PAIRPERF_UCX_GET(ucp_ep_rkey_unpack);
  PAIRPERF_UCX_GET(ucp_rkey_pack);
  PAIRPERF_UCX_GET(ucp_rkey_buffer_release);
  PAIRPERF_UCX_GET(ucp_rkey_destroy);
  PAIRPERF_UCX_GET(ucp_mem_map);
  PAIRPERF_UCX_GET(ucp_mem_unmap);
  PAIRPERF_UCX_GET(ucp_mem_query);
  PAIRPERF_UCX_GET(ucp_tag_send_nbx);
  PAIRPERF_UCX_GET(ucp_tag_recv_nbx);
  PAIRPERF_UCX_GET(ucp_tag_probe_nb);
  PAIRPERF_UCX_GET(ucp_am_send_nbx);
  PAIRPERF_UCX_GET(ucp_am_recv_data_nbx);
  PAIRPERF_UCX_GET(ucp_am_data_release);
  PAIRPERF_UCX_GET(ucp_put_nbx);
  PAIRPERF_UCX_GET(ucp_get_nbx);
  PAIRPERF_UCX_GET(ucp_request_check_status);
  PAIRPERF_UCX_GET(ucp_request_query);
  PAIRPERF_UCX_GET(ucp_request_cancel);
  PAIRPERF_UCX_GET(ucp_request_free);
  PAIRPERF_UCX_GET(ucs_status_string);
  PAIRPERF_UCX_GET(ucs_config_global_list);
  PAIRPERF_UCX_GET(ucs_config_parser_print_all_opts);
#undef PAIRPERF_UCX_GET
}

void load_into(loaded_library& l) {
  const std::string file = requested_file();
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    l.why = fmt::format("UCX cannot be loaded ({}; Debian: apt-get install libucx0{})",
                        e != nullptr ? e : file,
                        std::getenv("PAIRPERF_UCX_LIBRARY") != nullptr
                            ? ", or point PAIRPERF_UCX_LIBRARY at a libucp.so.0"
                            : "");
    return;
  }
  resolve(handle, l);
  if (!l.why.empty()) return;
  library& f = l.functions;
  f.ucp_get_version(&f.loaded.major, &f.loaded.minor, &f.loaded.release);
  f.path = file_of(reinterpret_cast<void*>(f.ucp_init_version));
  f.ucs = file_of(reinterpret_cast<void*>(f.ucs_status_string));
  // libucp finds libucs beside it (its RUNPATH), unless a process already holds another one
  // (Open MPI's UCX component, an earlier library): then the two halves are two versions.
  const auto folder = [](const std::string& p) { return std::filesystem::path(p).parent_path(); };
  if (!f.path.empty() && !f.ucs.empty() && folder(f.path) != folder(f.ucs)) {
    l.why = fmt::format(
        "the UCX loaded from {} took its libucs from {}, another installation (one process "
        "cannot use two UCX versions)",
        f.path, f.ucs);
    return;
  }
  if (f.loaded.major != 1 || f.loaded < version{1, 13}) {
    l.why = fmt::format("UCX {}.{} at {}: pairperf runs on UCX 1.13 and later 1.x", f.loaded.major,
                        f.loaded.minor, f.path);
  }
  // The handle stays open for the life of the process: contexts and workers live in it.
}

const loaded_library& the_library() {
  static std::once_flag once;
  static loaded_library l;
  std::call_once(once, [] {
    load_into(l);
    if (l.why.empty()) detail::loaded.store(&l.functions, std::memory_order_release);
  });
  return l;
}

}  // namespace

std::atomic<const library*> detail::loaded{nullptr};

void detail::throw_unloaded() { throw std::runtime_error(the_library().why); }

const library* load(std::string* why) {
  const loaded_library& l = the_library();
  if (!l.why.empty()) {
    if (why != nullptr) *why = l.why;
    return nullptr;
  }
  return &l.functions;
}

namespace api {
unsigned ucp_worker_progress(ucp_worker_h worker) { return lib().ucp_worker_progress(worker); }
ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void* buffer, size_t count, ucp_tag_t tag,
                                  const ucp_request_param_t* param) {
  return lib().ucp_tag_send_nbx(ep, buffer, count, tag, param);
}
ucs_status_ptr_t ucp_tag_recv_nbx(ucp_worker_h worker, void* buffer, size_t count, ucp_tag_t tag,
                                  ucp_tag_t tag_mask, const ucp_request_param_t* param) {
  return lib().ucp_tag_recv_nbx(worker, buffer, count, tag, tag_mask, param);
}
void ucp_request_free(void* request) { lib().ucp_request_free(request); }
ucs_status_t ucp_request_check_status(void* request) {
  return lib().ucp_request_check_status(request);
}
ucs_status_t ucp_request_query(void* request, ucp_request_attr_t* attr) {
  return lib().ucp_request_query(request, attr);
}
void ucp_request_cancel(ucp_worker_h worker, void* request) {
  lib().ucp_request_cancel(worker, request);
}
ucs_status_ptr_t ucp_put_nbx(ucp_ep_h ep, const void* buffer, size_t count, uint64_t remote_addr,
                             ucp_rkey_h rkey, const ucp_request_param_t* param) {
  return lib().ucp_put_nbx(ep, buffer, count, remote_addr, rkey, param);
}
ucs_status_ptr_t ucp_get_nbx(ucp_ep_h ep, void* buffer, size_t count, uint64_t remote_addr,
                             ucp_rkey_h rkey, const ucp_request_param_t* param) {
  return lib().ucp_get_nbx(ep, buffer, count, remote_addr, rkey, param);
}
ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void* header, size_t header_length,
                                 const void* buffer, size_t count,
                                 const ucp_request_param_t* param) {
  return lib().ucp_am_send_nbx(ep, id, header, header_length, buffer, count, param);
}
ucs_status_ptr_t ucp_am_recv_data_nbx(ucp_worker_h worker, void* data_desc, void* buffer,
                                      size_t count, const ucp_request_param_t* param) {
  return lib().ucp_am_recv_data_nbx(worker, data_desc, buffer, count, param);
}
void ucp_am_data_release(ucp_worker_h worker, void* data) {
  lib().ucp_am_data_release(worker, data);
}
ucs_status_ptr_t ucp_ep_flush_nbx(ucp_ep_h ep, const ucp_request_param_t* param) {
  return lib().ucp_ep_flush_nbx(ep, param);
}
ucs_status_ptr_t ucp_worker_flush_nbx(ucp_worker_h worker, const ucp_request_param_t* param) {
  return lib().ucp_worker_flush_nbx(worker, param);
}
}  // namespace api

}  // namespace pairperf::ucx
