#pragma once
// The shared secret between pairperf clients and servers (--token, $PAIRPERF_TOKEN,
// --token-file): compared in constant time, never written to results or logs.
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace pairperf {

// Whether `presented` (a hello's "token" member, any JSON) is the string `expected`. An empty
// `expected` accepts anything. Takes the same time whatever the bytes of a same-length guess.
bool token_matches(const std::string& expected, const nlohmann::json& presented);

// The first line of `path`, without its line ending; usage_error when it cannot be read or is
// empty.
std::string read_token_file(const std::string& path);

// argv with the value of every --token / --token-file replaced by "(redacted)".
std::vector<std::string> redact_argv(std::vector<std::string> argv);

}  // namespace pairperf
