#include "core/errors.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace pairperf {

const char* to_string(error_kind kind) noexcept {
  switch (kind) {
    case error_kind::error:
      return "error";
    case error_kind::timeout:
      return "timeout";
    case error_kind::unreachable:
      return "unreachable";
    case error_kind::closed:
      return "closed";
    case error_kind::protocol:
      return "protocol";
    case error_kind::refused:
      return "refused";
  }
  return "error";
}

std::string format_where(const where& place, const std::string& detail) {
  std::string out = place.step.empty() ? std::string("operation") : place.step;
  out += " failed";
  if (!place.peer.empty() || !place.iface.empty()) {
    out += " (";
    if (!place.peer.empty()) out += "peer " + place.peer;
    if (!place.peer.empty() && !place.iface.empty()) out += ", ";
    if (!place.iface.empty()) out += "interface " + place.iface;
    out += ")";
  }
  return out + ": " + detail;
}

step_error::step_error(error_kind kind, where place, const std::string& detail, int sys_errno)
    : std::runtime_error(format_where(place, detail)),
      m_kind(kind),
      m_place(std::move(place)),
      m_detail(detail),
      m_errno(sys_errno) {}

std::string errno_name(int err) {
  switch (err) {
    case ENETUNREACH:
      return "ENETUNREACH";
    case EHOSTUNREACH:
      return "EHOSTUNREACH";
    case ECONNREFUSED:
      return "ECONNREFUSED";
    case ECONNRESET:
      return "ECONNRESET";
    case ETIMEDOUT:
      return "ETIMEDOUT";
    case EPIPE:
      return "EPIPE";
    case EADDRNOTAVAIL:
      return "EADDRNOTAVAIL";
    case EADDRINUSE:
      return "EADDRINUSE";
    case ENODEV:
      return "ENODEV";
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    case EINVAL:
      return "EINVAL";
    default:
      return fmt::format("errno {}", err);
  }
}

}  // namespace pairperf
