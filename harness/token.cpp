#include "harness/token.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace pairperf {

bool token_matches(const std::string& expected, const nlohmann::json& presented) {
  if (expected.empty()) return true;
  if (!presented.is_string()) return false;
  const auto& got = presented.get_ref<const std::string&>();
  // Every byte of the expected token is compared, whatever the guess's length.
  unsigned char diff = got.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char g = i < got.size() ? got[i] : '\0';
    diff |= static_cast<unsigned char>(g ^ expected[i]);
  }
  return diff == 0;
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error(fmt::format("--token-file {}: cannot be read", path));
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty())
    throw usage_error(fmt::format("--token-file {}: the first line is empty", path));
  return line;
}

std::vector<std::string> redact_argv(std::vector<std::string> argv) {
  constexpr const char* hidden = "(redacted)";
  for (std::size_t i = 0; i < argv.size(); ++i) {
    for (const std::string flag : {"--token", "--token-file"}) {
      if (argv[i] == flag && i + 1 < argv.size()) {
        argv[++i] = hidden;
      } else if (argv[i].rfind(flag + "=", 0) == 0) {
        argv[i] = flag + "=" + hidden;
      }
    }
  }
  return argv;
}

}  // namespace pairperf
