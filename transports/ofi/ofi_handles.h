#pragma once
// RAII for libfabric's objects: every fid (fabric, domain, endpoint, address vector, completion
// queue, memory region) is closed by fi_close, fi_info lists by fi_freeinfo. Internal to the OFI
// transport.
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

struct info_deleter {
  void operator()(fi_info* p) const noexcept {
    if (p != nullptr) fi_freeinfo(p);
  }
};
using info_ptr = std::unique_ptr<fi_info, info_deleter>;

// The libfabric API version pairperf asks for (the one it was built against).
inline constexpr std::uint32_t api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// fi_getinfo: the list, or null with `rc` set to its negative error.
info_ptr get_info(const fi_info* hints, const char* node, std::uint64_t flags, int& rc);

// "fi_domain: Operation not permitted (-1)": what a failed call returned.
std::string failure(const char* call, int rc);

// fi_tostr without its trailing newline.
std::string text_of(const void* value, enum fi_type type);

}  // namespace pairperf::ofi
