#include "bench/pairperf/private_files.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace pairperf::cli {

std::vector<std::string> private_file_folders(std::string_view also) {
  namespace fs = std::filesystem;
  std::vector<std::string> folders;
  if (!also.empty()) folders.emplace_back(also);
  if (const char* env = std::getenv("PAIRPERF_LIBEXEC_DIR"); env != nullptr && *env != '\0')
    folders.emplace_back(env);
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = self.parent_path();
    folders.push_back((dir / PAIRPERF_LIBEXEC_REL).lexically_normal().string());
    folders.push_back((dir / "libexec").string());
  }
  return folders;
}

std::string find_private_file(std::string_view name, std::string_view also, bool program) {
  namespace fs = std::filesystem;
  for (const auto& folder : private_file_folders(also)) {
    const fs::path candidate = fs::path(folder) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) &&
        ::access(candidate.c_str(), program ? X_OK : R_OK) == 0)
      return candidate.string();
  }
  return {};
}

void exec_program(std::vector<std::string> argv) {
  if (argv.empty()) return;
  std::vector<char*> raw;
  raw.reserve(argv.size() + 1);
  for (auto& s : argv) raw.push_back(s.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execvp(raw[0], raw.data());
}

}  // namespace pairperf::cli
