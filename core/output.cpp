#include "core/output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/errors.h"

namespace pairperf {
namespace {

namespace fs = std::filesystem;

// Why `path` cannot be written, or "".
std::string unwritable(const std::string& path, bool make_folder) {
  const fs::path target(path);
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::exists(folder, ec)) {
    if (!make_folder)
      return fmt::format("its folder {} does not exist (make it first)", folder.string());
    fs::create_directories(folder, ec);
    if (ec) return fmt::format("cannot make its folder {}: {}", folder.string(), ec.message());
  }
  if (!fs::is_directory(folder, ec)) return fmt::format("{} is not a folder", folder.string());
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return "it exists and is not a regular file (pairperf replaces only regular files)";
  if (::access(folder.c_str(), W_OK) != 0)
    return fmt::format("its folder {} is not writable: {}", folder.string(), std::strerror(errno));
  return "";
}

}  // namespace

void check_output(const std::string& path, bool make_folder) {
  if (path == "-") return;
  if (const std::string why = unwritable(path, make_folder); !why.empty())
    throw usage_error(fmt::format("cannot write {}: {}", path, why));
}

void write_output(const std::string& path, const std::string& text, bool make_folder) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      throw std::runtime_error("cannot write to standard output");
    return;
  }
  if (const std::string why = unwritable(path, make_folder); !why.empty())
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, why));
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  const auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::runtime_error(
        fmt::format("cannot write {}: {}: {}", path, what, std::strerror(err)));
  };
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) fail("sync", errno);
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: close: {}", path, std::strerror(errno)));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: rename: {}", path, std::strerror(err)));
  }
}

}  // namespace pairperf
