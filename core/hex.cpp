#include "core/hex.h"

#include <stdexcept>

namespace pairperf {
namespace {
int nibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  throw std::invalid_argument("not a hex digit in transport blob");
}
}  // namespace

std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const std::byte b : bytes) {
    out.push_back(digits[std::to_integer<unsigned>(b) >> 4]);
    out.push_back(digits[std::to_integer<unsigned>(b) & 0xF]);
  }
  return out;
}

std::vector<std::byte> from_hex(std::string_view text) {
  if (text.size() % 2 != 0) throw std::invalid_argument("odd length of hex transport blob");
  std::vector<std::byte> out(text.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::byte>((nibble(text[2 * i]) << 4) | nibble(text[2 * i + 1]));
  return out;
}

}  // namespace pairperf
