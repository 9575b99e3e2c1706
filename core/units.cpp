#include "core/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/errors.h"

namespace pairperf {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits "12.5ms" into the number and the suffix; throws if there is no number.
std::pair<double, std::string> split_number(std::string_view text, std::string_view what) {
  text = trim(text);
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (i == 0 || ec != std::errc() || ptr != text.data() + i) {
    throw usage_error(fmt::format("invalid {} '{}': expected a number", what, text));
  }
  return {value, lower(text.substr(i))};
}

}  // namespace

std::uint64_t parse_size(std::string_view text, std::uint64_t limit) {
  auto [value, suffix] = split_number(text, "size");
  double scale = 1;
  if (suffix.empty() || suffix == "b") {
    scale = 1;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    scale = 1024.0;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    scale = 1024.0 * 1024;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    scale = 1024.0 * 1024 * 1024;
  } else if (suffix == "t" || suffix == "tb" || suffix == "tib") {
    scale = 1024.0 * 1024 * 1024 * 1024;
  } else {
    throw usage_error(fmt::format("invalid size '{}': unknown suffix '{}' (use K, M, G or T)",
                                  trim(text), suffix));
  }
  const double bytes = value * scale;
  if (bytes != std::floor(bytes)) {
    throw usage_error(fmt::format("invalid size '{}': not a whole number of bytes", trim(text)));
  }
  if (bytes < 1)
    throw usage_error(fmt::format("invalid size '{}': must be at least 1 byte", trim(text)));
  if (bytes > static_cast<double>(limit)) {
    throw usage_error(
        fmt::format("invalid size '{}': larger than the {} limit", trim(text), format_size(limit)));
  }
  return static_cast<std::uint64_t>(bytes);
}

std::vector<std::uint64_t> parse_size_list(std::string_view text) {
  std::vector<std::uint64_t> sizes;
  if (trim(text).empty()) throw usage_error("invalid size list: empty");
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = trim(text.substr(start, comma - start));
    if (item.empty()) throw usage_error(fmt::format("invalid size list '{}': empty item", text));
    if (const auto colon = item.find(':'); colon != std::string_view::npos) {
      const std::uint64_t lo = parse_size(item.substr(0, colon));
      const std::uint64_t hi = parse_size(item.substr(colon + 1));
      if (lo > hi) {
        throw usage_error(fmt::format("invalid size range '{}': start is above end", item));
      }
      for (std::uint64_t s = lo; s <= hi; s *= 2) sizes.push_back(s);
    } else {
      sizes.push_back(parse_size(item));
    }
    start = comma + 1;
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::chrono::nanoseconds parse_duration(std::string_view text) {
  auto [value, suffix] = split_number(text, "duration");
  double seconds = 0;
  if (suffix.empty() || suffix == "s") {
    seconds = value;
  } else if (suffix == "ms") {
    seconds = value * 1e-3;
  } else if (suffix == "us") {
    seconds = value * 1e-6;
  } else if (suffix == "ns") {
    seconds = value * 1e-9;
  } else if (suffix == "m" || suffix == "min") {
    seconds = value * 60;
  } else {
    throw usage_error(fmt::format(
        "invalid duration '{}': unknown unit '{}' (use s, ms, us, ns, min)", trim(text), suffix));
  }
  // Below half a nanosecond it would round to 0 (found by tests/fuzz/fuzz_cli_values).
  if (seconds < 0.5e-9)
    throw usage_error(fmt::format("invalid duration '{}': must be at least 1 ns", trim(text)));
  if (seconds > 86400)
    throw usage_error(fmt::format("invalid duration '{}': above one day", trim(text)));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(seconds * 1e9)));
}

std::string format_size(std::uint64_t bytes) {
  constexpr std::uint64_t k = 1024;
  if (bytes >= k * k * k && bytes % (k * k * k) == 0)
    return fmt::format("{}G", bytes / (k * k * k));
  if (bytes >= k * k && bytes % (k * k) == 0) return fmt::format("{}M", bytes / (k * k));
  if (bytes >= k && bytes % k == 0) return fmt::format("{}K", bytes / k);
  return fmt::format("{}", bytes);
}

rate_unit parse_rate_unit(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t == "gb" || t == "gb/s") return rate_unit::gb;
  if (t == "gib" || t == "gib/s") return rate_unit::gib;
  throw usage_error(fmt::format("invalid unit '{}': use GB or GiB", text));
}

std::string format_rate(double bytes_per_second, rate_unit unit) {
  switch (unit) {
    case rate_unit::gb:
      return fmt::format("{:.3f} GB/s", bytes_per_second / 1e9);
    case rate_unit::gib:
      return fmt::format("{:.3f} GiB/s", bytes_per_second / (1024.0 * 1024 * 1024));
  }
  return {};
}

std::string format_seconds(double seconds) {
  if (seconds < 1e-6) return fmt::format("{:.0f} ns", seconds * 1e9);
  if (seconds < 1e-3) return fmt::format("{:.2f} us", seconds * 1e6);
  if (seconds < 1) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.2f} s", seconds);
}

std::string format_message_rate(double per_second) {
  if (per_second >= 1e6) return fmt::format("{:.2f} M/s", per_second / 1e6);
  if (per_second >= 1e3) return fmt::format("{:.1f} K/s", per_second / 1e3);
  return fmt::format("{:.0f} /s", per_second);
}

std::vector<std::string> split_list(const std::string& value, char separator) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const auto comma = value.find(separator, start);
    std::string item =
        value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto not_space = [](unsigned char c) { return std::isspace(c) == 0; };
    item.erase(item.begin(), std::find_if(item.begin(), item.end(), not_space));
    item.erase(std::find_if(item.rbegin(), item.rend(), not_space).base(), item.end());
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace pairperf
