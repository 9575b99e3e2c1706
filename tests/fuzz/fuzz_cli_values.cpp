// libFuzzer harness: the values users type: --sizes, -d/--timeout durations, --expect checks
// and --allow-drive lists. A bad value must be a usage_error, never a crash or a wrong number.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/errors.h"
#include "core/units.h"
#include "harness/expect.h"
#include "harness/server_limits.h"

namespace {

bool every_entry_numeric(const std::string& list) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "*" || item.find('/') != std::string::npos) continue;
    std::array<unsigned char, sizeof(in6_addr)> address{};
    if (inet_pton(AF_INET, item.c_str(), address.data()) != 1 &&
        inet_pton(AF_INET6, item.c_str(), address.data()) != 1)
      return false;
  }
  return true;
}

}  // namespace

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
    // Only lists whose every entry is '*', a CIDR or an address literal: any other entry is a
    // name (also "4.0:10" or "1.2.3.4."), which allows() resolves: a DNS query per execution, and
    // traffic beyond this host.
    if (every_entry_numeric(text)) (void)list.allows("10.1.2.3");
  } catch (const pairperf::usage_error&) {  // NOLINT(bugprone-empty-catch)
  }
  return 0;
}
