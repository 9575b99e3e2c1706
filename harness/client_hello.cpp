#include "harness/client_hello.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>

#include "core/units.h"
#include "harness/context.h"

namespace pairperf {

nlohmann::json say_hello(control_channel& channel, const std::string& token, const timeouts& t) {
  channel.send(msg_type::hello,
               {{"protocol", control_protocol_version}, {"token", token}, {"tool", tool_context()}},
               "hello", t.handshake);
  const deadline_t give_up = deadline_in(std::max(t.idle, t.handshake));
  std::chrono::nanoseconds wait = t.handshake;
  for (;;) {
    message m = channel.receive("hello", wait);
    if (m.type != msg_type::queued) {
      if (m.type == msg_type::hello) return std::move(m.body);
      // expect() turns refused / busy / error into their errors; give it the message back.
      channel.unexpected(std::move(m), msg_type::hello, "hello");
    }
    const auto left = give_up - steady::now();
    if (left <= std::chrono::nanoseconds::zero()) {
      throw step_error(
          error_kind::timeout, channel.place(),
          fmt::format(
              "still queued at position {} after {}; the server is serving "
              "other clients",
              m.body.value("position", nlohmann::json()).dump(),
              format_seconds(std::chrono::duration<double>(std::max(t.idle, t.handshake)).count())),
          ETIMEDOUT);
    }
    wait = std::chrono::duration_cast<std::chrono::nanoseconds>(left);
  }
}

}  // namespace pairperf
