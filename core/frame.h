#pragma once
// The control channel's wire format: a 4-byte big-endian length, then that many bytes of UTF-8
// JSON text holding one object with a string member "type". Nothing else crosses the channel.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <variant>

namespace pairperf {

// Frames above this many body bytes are refused (the largest real message, a hello with a big
// host inventory, is a few tens of KiB).
inline constexpr std::uint32_t max_frame_bytes = 1U << 20;
inline constexpr std::size_t frame_header_bytes = 4;

std::string encode_frame(const nlohmann::json& message);

// A frame the decoder refused; the text says why and goes back to the peer.
struct frame_error {
  std::string reason;
};

// Incremental decoder: feed() what a socket gave, then take messages with next() until it says
// it needs more. After an error the decoder stays in error.
class frame_decoder {
 public:
  struct need_more {};
  using item = std::variant<need_more, nlohmann::json, frame_error>;

  void feed(std::string_view bytes);
  item next();
  // Bytes of an unfinished frame; nonzero at end of stream means a truncated frame.
  [[nodiscard]] std::size_t pending() const noexcept { return m_buffer.size() - m_offset; }
  // "truncated frame: header of 2 of 4 bytes" style text for a stream that ended now.
  [[nodiscard]] std::string truncation_message() const;

 private:
  std::string m_buffer;
  std::size_t m_offset = 0;
  bool m_failed = false;
  std::string m_failure;
};

}  // namespace pairperf
