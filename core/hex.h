#pragma once
// Opaque transport blobs (addresses, packed keys) travel in control messages as hex text.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pairperf {

std::string to_hex(std::span<const std::byte> bytes);
// Throws std::invalid_argument on odd length or a non-hex character.
std::vector<std::byte> from_hex(std::string_view text);

}  // namespace pairperf
