#pragma once
// UCX, loaded when first needed from the library the job itself uses, and the ABI differences
// between the UCX these headers come from and the one loaded. Internal to the UCX transport.
//
// pairperf does not link libucp: one build runs on Debian 12's UCX 1.13 and on the UCX 1.18-1.22
// that jobs run (RAPIDS' libucx wheels, the UCX inside NIXL, the images of vLLM and SGLang). The
// file is PAIRPERF_UCX_LIBRARY when set (a libucp.so path, or the folder holding it), otherwise
// libucp.so.0 as the dynamic loader finds it (LD_LIBRARY_PATH first, as the job's own processes
// find it). Structures passed to UCX only grew at their end between these versions, and their
// field masks tell the library what a caller filled; what changed under the same name is handled
// here:
// - ucs_memory_type_t: values were inserted before UCS_MEMORY_TYPE_UNKNOWN (5 in 1.13-1.15, 6 in
//   1.16, 9 in 1.17-1.20, 10 in 1.21 and 1.22; src/ucs/memory/memory_type.h at each tag), so a
//   1.13 build's UNKNOWN reaches 1.22 as UCS_MEMORY_TYPE_RDMA unless translated;
// - ucs_config_parser_print_all_opts gained a `filter` argument in 1.19 (src/ucs/config/parser.h).
#include <ucp/api/ucp.h>
#include <ucs/config/types.h>
#include <ucs/datastruct/list.h>

#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace pairperf::ucx {

struct version {
  unsigned major = 0, minor = 0, release = 0;
  friend bool operator<(const version& a, const version& b) {
    return a.major != b.major ? a.major < b.major : a.minor < b.minor;
  }
};

// The UCX these headers come from (major and minor).
inline constexpr version built_version{UCP_API_MAJOR, UCP_API_MINOR, 0};

// Two sides' UCX (describe_library() facts: "version", "library") on different minor versions:
// {what that is and what it did where measured, the fix}; {"", ""} for one minor version or
// facts that do not say. UCX 1.13.1 against 1.22.0 (this project, 2026-11): every case failed in
// ucp_ep_rkey_unpack ("Unsupported operation"), and a 1.13 put aborted the 1.22 side's session
// ("endpoint reconfiguration not supported yet").
std::pair<std::string, std::string> version_mismatch(const nlohmann::json& client,
                                                     const nlohmann::json& server);

// UCS_MEMORY_TYPE_UNKNOWN's value in a UCX version.
unsigned memory_type_unknown(version v);
// A memory type of these headers as the library of version `v` numbers it, and back. The types
// both know keep their value; UNKNOWN, and a type the other side does not have, become its UNKNOWN.
// The library's numbers are plain unsigned: one past these headers' enumeration is not a value a
// ucs_memory_type_t may hold here.
unsigned to_library(ucs_memory_type_t built, version v);
ucs_memory_type_t from_library(unsigned loaded, version v);
// A memory type field of a UCX structure written or read as the library's number.
void store_memory_type(ucs_memory_type_t& field, unsigned value) noexcept;
unsigned load_memory_type(const ucs_memory_type_t& field) noexcept;

using print_all_opts_113 = void (*)(FILE*, const char*, ucs_config_print_flags_t, ucs_list_link_t*);
using print_all_opts_119 = void (*)(FILE*, const char*, ucs_config_print_flags_t, ucs_list_link_t*,
                                    const char*);

// The functions of UCX that pairperf calls, as the loaded library exports them.
struct library {
  decltype(&::ucp_get_version) ucp_get_version = nullptr;
  decltype(&::ucp_get_version_string) ucp_get_version_string = nullptr;
  decltype(&::ucp_config_read) ucp_config_read = nullptr;
  decltype(&::ucp_config_release) ucp_config_release = nullptr;
  decltype(&::ucp_config_modify) ucp_config_modify = nullptr;
  decltype(&::ucp_init_version) ucp_init_version = nullptr;
  decltype(&::ucp_cleanup) ucp_cleanup = nullptr;
  decltype(&::ucp_context_print_info) ucp_context_print_info = nullptr;
  decltype(&::ucp_worker_create) ucp_worker_create = nullptr;
  decltype(&::ucp_worker_destroy) ucp_worker_destroy = nullptr;
  decltype(&::ucp_worker_progress) ucp_worker_progress = nullptr;
  decltype(&::ucp_worker_get_address) ucp_worker_get_address = nullptr;
  decltype(&::ucp_worker_release_address) ucp_worker_release_address = nullptr;
  decltype(&::ucp_worker_flush_nbx) ucp_worker_flush_nbx = nullptr;
  decltype(&::ucp_worker_set_am_recv_handler) ucp_worker_set_am_recv_handler = nullptr;
  decltype(&::ucp_ep_create) ucp_ep_create = nullptr;
  decltype(&::ucp_ep_close_nbx) ucp_ep_close_nbx = nullptr;
  decltype(&::ucp_ep_flush_nbx) ucp_ep_flush_nbx = nullptr;
  decltype(&::ucp_ep_print_info) ucp_ep_print_info = nullptr;
  decltype(&::ucp_ep_query) ucp_ep_query = nullptr;
  decltype(&::ucp_ep_rkey_unpack) ucp_ep_rkey_unpack = nullptr;
  decltype(&::ucp_rkey_pack) ucp_rkey_pack = nullptr;
  decltype(&::ucp_rkey_buffer_release) ucp_rkey_buffer_release = nullptr;
  decltype(&::ucp_rkey_destroy) ucp_rkey_destroy = nullptr;
  decltype(&::ucp_mem_map) ucp_mem_map = nullptr;
  decltype(&::ucp_mem_unmap) ucp_mem_unmap = nullptr;
  decltype(&::ucp_mem_query) ucp_mem_query = nullptr;
  decltype(&::ucp_tag_send_nbx) ucp_tag_send_nbx = nullptr;
  decltype(&::ucp_tag_recv_nbx) ucp_tag_recv_nbx = nullptr;
  decltype(&::ucp_tag_probe_nb) ucp_tag_probe_nb = nullptr;
  decltype(&::ucp_am_send_nbx) ucp_am_send_nbx = nullptr;
  decltype(&::ucp_am_recv_data_nbx) ucp_am_recv_data_nbx = nullptr;
  decltype(&::ucp_am_data_release) ucp_am_data_release = nullptr;
  decltype(&::ucp_put_nbx) ucp_put_nbx = nullptr;
  decltype(&::ucp_get_nbx) ucp_get_nbx = nullptr;
  decltype(&::ucp_request_check_status) ucp_request_check_status = nullptr;
  decltype(&::ucp_request_query) ucp_request_query = nullptr;
  decltype(&::ucp_request_cancel) ucp_request_cancel = nullptr;
  decltype(&::ucp_request_free) ucp_request_free = nullptr;
  decltype(&::ucs_status_string) ucs_status_string = nullptr;
  ucs_list_link_t* ucs_config_global_list = nullptr;
  void* ucs_config_parser_print_all_opts = nullptr;  // print_all_opts_113 or _119, by `loaded`

  version loaded;    // ucp_get_version() of the library
  std::string path;  // the libucp file really loaded (canonical)
  std::string ucs;   // the libucs file its symbols came from

  // ucp_init for these headers' API version.
  ucs_status_t init(const ucp_params_t* params, const ucp_config_t* config,
                    ucp_context_h* context) const {
    return ucp_init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, context);
  }
  // ucs_config_parser_print_all_opts with no filter, in the loaded version's form.
  void print_all_opts(FILE* stream, const char* prefix, ucs_config_print_flags_t flags) const;
};

// The library, loaded once per process; null when it cannot be (`why` then says why).
const library* load(std::string* why = nullptr);

namespace detail {
// Set once the library has loaded (load()); read on every call, the data path's included.
extern std::atomic<const library*> loaded;
[[noreturn]] void throw_unloaded();
}  // namespace detail

// The loaded library: a load and a predictable branch once load() has run; loads it first
// otherwise, and throws std::runtime_error with the reason where it cannot.
inline const library& lib() {
  if (const library* p = detail::loaded.load(std::memory_order_acquire); p != nullptr) return *p;
  if (const library* p = load(); p != nullptr) return *p;
  detail::throw_unloaded();
}

// The data path's calls, out of line: a direct call, then a jump through the loaded library's
// table, as a call through the PLT into a linked library is; the measured loops make no indirect
// call of their own (tests/unit/check_loops_inline.py).
namespace api {
unsigned ucp_worker_progress(ucp_worker_h worker);
ucs_status_ptr_t ucp_tag_send_nbx(ucp_ep_h ep, const void* buffer, size_t count, ucp_tag_t tag,
                                  const ucp_request_param_t* param);
ucs_status_ptr_t ucp_tag_recv_nbx(ucp_worker_h worker, void* buffer, size_t count, ucp_tag_t tag,
                                  ucp_tag_t tag_mask, const ucp_request_param_t* param);
void ucp_request_free(void* request);
ucs_status_t ucp_request_check_status(void* request);
ucs_status_t ucp_request_query(void* request, ucp_request_attr_t* attr);
void ucp_request_cancel(ucp_worker_h worker, void* request);
ucs_status_ptr_t ucp_put_nbx(ucp_ep_h ep, const void* buffer, size_t count, uint64_t remote_addr,
                             ucp_rkey_h rkey, const ucp_request_param_t* param);
ucs_status_ptr_t ucp_get_nbx(ucp_ep_h ep, void* buffer, size_t count, uint64_t remote_addr,
                             ucp_rkey_h rkey, const ucp_request_param_t* param);
ucs_status_ptr_t ucp_am_send_nbx(ucp_ep_h ep, unsigned id, const void* header, size_t header_length,
                                 const void* buffer, size_t count,
                                 const ucp_request_param_t* param);
ucs_status_ptr_t ucp_am_recv_data_nbx(ucp_worker_h worker, void* data_desc, void* buffer,
                                      size_t count, const ucp_request_param_t* param);
void ucp_am_data_release(ucp_worker_h worker, void* data);
ucs_status_ptr_t ucp_ep_flush_nbx(ucp_ep_h ep, const ucp_request_param_t* param);
ucs_status_ptr_t ucp_worker_flush_nbx(ucp_worker_h worker, const ucp_request_param_t* param);
}  // namespace api

}  // namespace pairperf::ucx
