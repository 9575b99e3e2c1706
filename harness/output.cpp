#include "harness/output.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace pairperf {

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      throw std::runtime_error("cannot write to standard output");
    return;
  }
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out)
      throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
    out << text;
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp));
  }
  std::filesystem::rename(tmp, target);
}

}  // namespace pairperf
