#include "core/frame.h"

#include <fmt/format.h>

namespace pairperf {
namespace {
std::uint32_t read_length(const char* p) {
  const auto* h = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{h[0]} << 24) | (std::uint32_t{h[1]} << 16) | (std::uint32_t{h[2]} << 8) |
         h[3];
}
}  // namespace

std::string encode_frame(const nlohmann::json& message) {
  const std::string body = message.dump();
  if (body.size() > max_frame_bytes) {
    throw std::length_error(fmt::format("control message of {} bytes exceeds the {} byte limit",
                                        body.size(), max_frame_bytes));
  }
  const auto n = static_cast<std::uint32_t>(body.size());
  std::string out;
  out.reserve(frame_header_bytes + body.size());
  out.push_back(static_cast<char>((n >> 24) & 0xFF));
  out.push_back(static_cast<char>((n >> 16) & 0xFF));
  out.push_back(static_cast<char>((n >> 8) & 0xFF));
  out.push_back(static_cast<char>(n & 0xFF));
  out += body;
  return out;
}

void frame_decoder::feed(std::string_view bytes) {
  if (m_failed) return;
  // Drop consumed bytes before growing, so a long session does not accumulate them.
  if (m_offset > 0 && m_offset == m_buffer.size()) {
    m_buffer.clear();
    m_offset = 0;
  }
  m_buffer.append(bytes);
}

frame_decoder::item frame_decoder::next() {
  if (m_failed) return frame_error{m_failure};
  const auto fail = [this](std::string why) -> item {
    m_failed = true;
    m_failure = std::move(why);
    return frame_error{m_failure};
  };
  if (pending() < frame_header_bytes) return need_more{};
  const std::uint32_t len = read_length(m_buffer.data() + m_offset);
  if (len == 0) return fail("empty frame");
  if (len > max_frame_bytes)
    return fail(fmt::format("frame of {} bytes exceeds the {} byte limit", len, max_frame_bytes));
  if (pending() < frame_header_bytes + len) return need_more{};
  const std::string_view body(m_buffer.data() + m_offset + frame_header_bytes, len);
  m_offset += frame_header_bytes + len;
  nlohmann::json message = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded()) return fail("malformed frame: not valid JSON");
  if (!message.is_object()) return fail("malformed frame: not a JSON object");
  if (!message.contains("type") || !message["type"].is_string())
    return fail("malformed frame: no string member 'type'");
  if (m_offset == m_buffer.size()) {
    m_buffer.clear();
    m_offset = 0;
  }
  return message;
}

std::string frame_decoder::truncation_message() const {
  const std::size_t have = pending();
  if (have < frame_header_bytes)
    return fmt::format("truncated frame: {} of {} header bytes", have, frame_header_bytes);
  const std::uint32_t len = read_length(m_buffer.data() + m_offset);
  return fmt::format("truncated frame: {} of {} body bytes", have - frame_header_bytes, len);
}

}  // namespace pairperf
