// libFuzzer harness: the values users type: --sizes, -d/--timeout durations, --expect checks
// and --allow-drive lists. A bad value must be a usage_error, never a crash or a wrong number.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/errors.h"
#include "core/units.h"
#include "harness/expect.h"
#include "harness/server_limits.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto s : pairperf::parse_size_list(text)) {
      if (s == 0 || s > pairperf::max_message_bytes) __builtin_trap();
    }
  } catch (const pairperf::usage_error&) {  // NOLINT(bugprone-empty-catch)
  }
  try {
    if (pairperf::parse_duration(text).count() <= 0) __builtin_trap();
  } catch (const pairperf::usage_error&) {  // NOLINT(bugprone-empty-catch)
  }
  try {
    (void)pairperf::parse_expectation(text);
  } catch (const pairperf::usage_error&) {  // NOLINT(bugprone-empty-catch)
  }
  try {
    const pairperf::drive_allowlist list(text);
    // Digits only: a name (letters, hex ones included) would be a DNS lookup per execution, and
    // traffic beyond this host.
    if (text.find_first_not_of("0123456789.:/,*") == std::string::npos)
      (void)list.allows("10.1.2.3");
  } catch (const pairperf::usage_error&) {  // NOLINT(bugprone-empty-catch)
  }
  return 0;
}
