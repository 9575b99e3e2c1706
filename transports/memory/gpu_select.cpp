#include "transports/memory/gpu_select.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/errors.h"

namespace pairperf {
namespace {

gpu_selector g_selection;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "00000000:18:00.0" and "0000:18:00.0" are the same device.
std::string short_bus_id(const std::string& id) {
  const auto colon = id.find(':');
  if (colon != std::string::npos && colon > 4 &&
      id.substr(0, colon - 4).find_first_not_of('0') == std::string::npos)
    return id.substr(colon - 4);
  return id;
}

}  // namespace

gpu_selector parse_gpu_selector(const std::string& text) {
  gpu_selector s;
  if (text.empty()) return s;
  int value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc() && ptr == text.data() + text.size() && value >= 0) {
    s.index = value;
    return s;
  }
  const std::string t = lower(text);
  if (t.rfind("gpu-", 0) == 0 || t.rfind("mig-", 0) == 0) {
    s.how = gpu_selector::kind::uuid;
    s.text = t;
    return s;
  }
  // domain:bus:device.function, the domain optional
  const auto dot = t.rfind('.');
  if (dot != std::string::npos && std::count(t.begin(), t.end(), ':') >= 1 &&
      t.find_first_not_of("0123456789abcdef:.") == std::string::npos) {
    s.how = gpu_selector::kind::bus_id;
    s.text = short_bus_id(t);
    return s;
  }
  throw usage_error(fmt::format(
      "--gpu '{}': give an index (0), a UUID (GPU-4650fca3-...) or a PCI bus id (0000:18:00.0)",
      text));
}

std::string format_gpu_uuid(const std::array<unsigned char, 16>& b) {
  std::string hex;
  for (unsigned char c : b) hex += fmt::format("{:02x}", c);
  return fmt::format("GPU-{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4),
                     hex.substr(16, 4), hex.substr(20, 12));
}

bool gpu_matches(const gpu_selector& s, const std::string& uuid, const std::string& bus_id) {
  switch (s.how) {
    case gpu_selector::kind::index:
      return false;  // indices are resolved by CUDA itself
    case gpu_selector::kind::uuid:
      return lower(uuid).rfind(s.text, 0) == 0;
    case gpu_selector::kind::bus_id:
      return short_bus_id(lower(bus_id)) == s.text;
  }
  return false;
}

void set_gpu_selection(const gpu_selector& s) { g_selection = s; }
const gpu_selector& gpu_selection() { return g_selection; }

}  // namespace pairperf
