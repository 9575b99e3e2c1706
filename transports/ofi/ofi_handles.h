#pragma once
// libfabric, loaded when first needed, and RAII for its objects: every fid (fabric, domain,
// endpoint, address vector, completion queue, memory region) is closed by fi_close, fi_info lists
// by fi_freeinfo. Internal to the OFI transport.
//
// pairperf does not link libfabric: loading it runs constructors of the provider libraries it
// depends on (libpsm_infinipath installs SIGABRT, SIGSEGV... handlers that print a backtrace and
// exit 1, which turned an aborting case process into "exit 1": load() puts the process's own
// handlers back), and its first call initializes every provider (after which raw verbs failed on
// Soft-RoCE). So it is dlopen()ed only by the processes that run OFI cases, or ask what it offers
// (a child process: ofi_options.cpp). Everything else of its API is inline calls through the
// objects' operation tables.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <memory>
#include <string>

namespace pairperf::ofi {

template <class T>
struct fid_closer {
  void operator()(T* p) const noexcept {
    if (p != nullptr) fi_close(&p->fid);
  }
};
template <class T>
using fid_ptr = std::unique_ptr<T, fid_closer<T>>;
using fabric_ptr = fid_ptr<fid_fabric>;
using domain_ptr = fid_ptr<fid_domain>;
using endpoint_ptr = fid_ptr<fid_ep>;
using av_ptr = fid_ptr<fid_av>;
using cq_ptr = fid_ptr<fid_cq>;
using mr_ptr = fid_ptr<fid_mr>;

// The functions libfabric exports that pairperf calls, at the symbol versions of the headers it
// was built with.
struct library {
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
  decltype(&::fi_tostr) tostr = nullptr;
  decltype(&::fi_version) version = nullptr;
};
// libfabric.so.1, loaded once; null when it cannot be (`why` then says why).
const library* load(std::string* why = nullptr);
// The loaded library; only after load() returned it.
const library& lib() noexcept;

struct info_deleter {
  void operator()(fi_info* p) const noexcept {
    if (p != nullptr) lib().freeinfo(p);
  }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// The libfabric API version pairperf asks for (the one it was built against).
inline constexpr std::uint32_t api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// fi_allocinfo: empty hints.
info_ptr alloc_info();
// fi_getinfo: the list, or null with `rc` set to its negative error.
info_ptr get_info(const fi_info* hints, const char* node, std::uint64_t flags, int& rc);

// "fi_domain: Operation not permitted (-1)": what a failed call returned.
std::string failure(const char* call, int rc);

// fi_tostr without its trailing newline.
std::string text_of(const void* value, enum fi_type type);

}  // namespace pairperf::ofi
