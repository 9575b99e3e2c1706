#include "transports/ofi/ofi_handles.h"

#include <fmt/format.h>

namespace pairperf::ofi {

info_ptr get_info(const fi_info* hints, const char* node, std::uint64_t flags, int& rc) {
  fi_info* list = nullptr;
  rc = fi_getinfo(api_version, node, nullptr, flags, hints, &list);
  if (rc != 0) {
    if (list != nullptr) fi_freeinfo(list);
    return nullptr;
  }
  return info_ptr(list);
}

std::string failure(const char* call, int rc) {
  return fmt::format("{}: {} ({})", call, fi_strerror(rc < 0 ? -rc : rc), rc);
}

std::string text_of(const void* value, enum fi_type type) {
  const char* s = fi_tostr(value, type);
  std::string out = s != nullptr ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace pairperf::ofi
