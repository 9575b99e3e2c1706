#include "core/control.h"

#include <fmt/format.h>
#include <poll.h>

#include <array>
#include <utility>

namespace pairperf {

namespace {
constexpr std::array<std::pair<msg_type, std::string_view>, 15> msg_names{{
    {msg_type::hello, "hello"},
    {msg_type::case_, "case"},
    {msg_type::ready, "ready"},
    {msg_type::run, "run"},
    {msg_type::running, "running"},
    {msg_type::results, "results"},
    {msg_type::bye, "bye"},
    {msg_type::refused, "refused"},
    {msg_type::error, "error"},
    {msg_type::drive, "drive"},
    {msg_type::driven, "driven"},
    {msg_type::queued, "queued"},
    {msg_type::busy, "busy"},
    {msg_type::stop, "stop"},
    {msg_type::stopped, "stopped"},
}};
}  // namespace

const char* to_string(msg_type type) noexcept {
  for (const auto& [t, name] : msg_names) {
    if (t == type) return name.data();
  }
  return "?";
}

std::optional<msg_type> parse_msg_type(std::string_view text) noexcept {
  for (const auto& [t, name] : msg_names) {
    if (name == text) return t;
  }
  return std::nullopt;
}

control_channel::control_channel(unique_fd fd, where place)
    : m_fd(std::move(fd)), m_place(std::move(place)) {}

where control_channel::at(std::string_view step) const {
  where w = m_place;
  w.step = std::string(step);
  return w;
}

void control_channel::send(msg_type type, nlohmann::json body, std::string_view step,
                           std::chrono::nanoseconds timeout) {
  body["type"] = to_string(type);
  const std::string frame = encode_frame(body);
  write_all(m_fd.get(), frame.data(), frame.size(), deadline_in(timeout), at(step));
}

message control_channel::receive(std::string_view step, std::chrono::nanoseconds timeout) {
  const deadline_t deadline = deadline_in(timeout);
  std::array<char, 16384> chunk{};
  for (;;) {
    auto item = m_decoder.next();
    if (auto* msg = std::get_if<nlohmann::json>(&item)) {
      const std::string name = (*msg)["type"].get<std::string>();
      const auto type = parse_msg_type(name);
      if (!type) {
        send_error(fmt::format("unknown message type '{}'", name));
        throw step_error(error_kind::protocol, at(step),
                         fmt::format("peer sent unknown message type '{}'", name));
      }
      return {*type, std::move(*msg)};
    }
    if (auto* err = std::get_if<frame_error>(&item)) {
      send_error(err->reason);
      throw step_error(error_kind::protocol, at(step), err->reason);
    }
    const std::size_t n = read_some(m_fd.get(), chunk.data(), chunk.size(), deadline, at(step));
    if (n == 0) {
      const std::string why = m_decoder.pending() > 0 ? "peer closed the connection mid-message (" +
                                                            m_decoder.truncation_message() + ")"
                                                      : "peer closed the connection";
      throw step_error(error_kind::closed, at(step), why);
    }
    m_received += n;
    m_decoder.feed(std::string_view(chunk.data(), n));
  }
}

bool control_channel::readable() const noexcept {
  pollfd p{m_fd.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

nlohmann::json control_channel::expect(msg_type want, std::string_view step,
                                       std::chrono::nanoseconds timeout) {
  message msg = receive(step, timeout);
  if (msg.type == want) return std::move(msg.body);
  unexpected(std::move(msg), want, step);
}

void control_channel::unexpected(message msg, msg_type want, std::string_view step) {
  const auto field = [&](const char* key) {
    const auto it = msg.body.find(key);
    return it != msg.body.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string text = field("message");
  if (text.empty()) text = field("reason");
  if (text.empty()) text = "no reason given";
  switch (msg.type) {
    case msg_type::refused:
      throw step_error(error_kind::refused, at(step), "peer refused: " + text);
    case msg_type::error:
      throw step_error(error_kind::error, at(step), "peer reported: " + text);
    case msg_type::busy:
      throw step_error(error_kind::refused, at(step),
                       fmt::format("peer is busy: {} (retry after {} s)", text,
                                   msg.body.value("retry_after_s", nlohmann::json(5)).dump()));
    case msg_type::hello:
    case msg_type::case_:
    case msg_type::ready:
    case msg_type::run:
    case msg_type::running:
    case msg_type::results:
    case msg_type::bye:
    case msg_type::drive:
    case msg_type::driven:
    case msg_type::queued:
    case msg_type::stop:
    case msg_type::stopped:
      break;
  }
  const std::string reason =
      fmt::format("expected '{}', got '{}'", to_string(want), to_string(msg.type));
  send_error(reason);
  throw step_error(error_kind::protocol, at(step), reason);
}

void control_channel::send_error(const std::string& text) noexcept {
  try {
    nlohmann::json body{{"message", text}};
    send(msg_type::error, std::move(body), "send error", std::chrono::milliseconds(500));
  } catch (...) {  // NOLINT(bugprone-empty-catch): best effort, the channel is going away anyway
  }
}

}  // namespace pairperf
