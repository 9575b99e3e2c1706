// A mesh driver's request to one server: measure towards `target` as its client (client.h).
#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <cstdint>

#include "core/control.h"
#include "core/interfaces.h"
#include "core/socket.h"
#include "harness/client.h"  // declares it
#include "harness/client_hello.h"

namespace pairperf {

std::vector<case_result> drive_remote(const endpoint& driver, const std::string& target,
                                      const client_options& options,
                                      std::chrono::nanoseconds wait) {
  const timeouts& t = options.config.timeouts;
  auto opened = open_hello(driver, "drive connect", hello_of(options), t);
  control_channel& ch = opened.first;
  const std::string iface = ch.place().iface;
  ch.send(msg_type::drive,
          {{"target", target},
           {"config", options.config},
           {"cases", options.cases},
           {"token", options.token}},
          "drive", t.handshake);
  // The reply comes when the driven server has measured: waited for in slices a signal can end.
  const std::string step = fmt::format("drive towards {}", target);
  const deadline_t end = deadline_in(wait);
  while (!ch.readable() && steady::now() < end) {
    if (options.interrupted != nullptr && options.interrupted->load() != 0)
      throw step_error(error_kind::error, where{step, driver.to_string(), iface},
                       "interrupted while the server measured");
    pollfd p{ch.fd(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - steady::now());
    ::poll(&p, 1, static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 100)));
  }
  const nlohmann::json reply =
      ch.expect(msg_type::driven, step,
                std::max<std::chrono::nanoseconds>(end - steady::now(), t.handshake));
  ch.send(msg_type::bye, nlohmann::json::object(), "bye", t.handshake);
  if (reply.contains("error")) {
    throw step_error(error_kind::unreachable,
                     where{fmt::format("drive towards {}", target), driver.to_string(), iface},
                     reply.at("error").get<std::string>());
  }
  return reply.at("results").get<std::vector<case_result>>();
}

}  // namespace pairperf
