// A mesh driver's request to one server: measure towards `target` as its client (client.h).
#include <fmt/format.h>

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
  const nlohmann::json reply =
      ch.expect(msg_type::driven, fmt::format("drive towards {}", target), wait);
  ch.send(msg_type::bye, nlohmann::json::object(), "bye", t.handshake);
  if (reply.contains("error")) {
    throw step_error(error_kind::unreachable,
                     where{fmt::format("drive towards {}", target), driver.to_string(), iface},
                     reply.at("error").get<std::string>());
  }
  return reply.at("results").get<std::vector<case_result>>();
}

}  // namespace pairperf
