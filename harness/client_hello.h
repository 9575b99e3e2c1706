#pragma once
// The client's side of hello (core/control.h): the server's hello, or its reasons not to serve.
#include <nlohmann/json.hpp>
#include <string>

#include "core/config.h"
#include "core/control.h"

namespace pairperf {

// Says hello and waits for the server's: through `queued` replies while others are served (up to
// timeouts.idle in all), or until `refused` / `busy` (thrown, kind refused).
nlohmann::json say_hello(control_channel& channel, const std::string& token, const timeouts& t);

}  // namespace pairperf
