#pragma once
// Error types. Every failure that crosses a process or network boundary names the step, the peer
// address and the local interface (the brief: "an error that names the step, the address and the
// interface"), so a user never has to guess where a run stopped.
#include <stdexcept>
#include <string>

namespace pairperf {

// What kind of failure a step_error is; it decides the status a case gets.
enum class error_kind {
  error,        // anything else: setup failed, the peer misbehaved
  timeout,      // a bounded wait ran out
  unreachable,  // a connection could not be made (ENETUNREACH, EHOSTUNREACH, ECONNREFUSED, timeout)
  closed,       // the peer closed the connection
  protocol,     // a malformed, oversized or unexpected control message
  refused,      // the peer refused us (version mismatch, bad token)
};

const char* to_string(error_kind kind) noexcept;

// Where something happened. Empty fields are left out of the message.
struct where {
  std::string step;   // e.g. "control connect", "case 3 data connect"
  std::string peer;   // e.g. "10.0.0.2:18515"
  std::string iface;  // e.g. "eth0"
};

class step_error : public std::runtime_error {
 public:
  step_error(error_kind kind, where place, const std::string& detail, int sys_errno = 0);

  [[nodiscard]] error_kind kind() const noexcept { return m_kind; }
  [[nodiscard]] const where& place() const noexcept { return m_place; }
  [[nodiscard]] const std::string& detail() const noexcept { return m_detail; }
  // The errno behind the failure, 0 if none.
  [[nodiscard]] int sys_errno() const noexcept { return m_errno; }

 private:
  error_kind m_kind;
  where m_place;
  std::string m_detail;
  int m_errno;
};

// Bad input from the user: printed as is, exit code 2.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Formats "step failed (peer P, interface I): detail".
std::string format_where(const where& place, const std::string& detail);

// The symbolic name of an errno value, e.g. "ENETUNREACH".
std::string errno_name(int err);

}  // namespace pairperf
