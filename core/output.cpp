#include "core/output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

// 7.5 KiB, 2.1 MiB: a free space or a need, to a tenth.
std::string bytes_text(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  std::size_t u = 0;
  for (; value >= 1024 && u + 1 < std::size(units); ++u) value /= 1024;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[u]);
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

reserved_output::reserved_output(std::string path, std::uint64_t bytes, bool make_folder)
    : m_path(std::move(path)) {
  if (m_path == "-") return;
  if (const std::string why = unwritable(m_path, make_folder); !why.empty())
    throw usage_error(fmt::format("cannot write {}: {}", m_path, why));
  const fs::path target(m_path);
  const std::string folder =
      target.has_parent_path() ? target.parent_path().string() : std::string(".");
  m_fd = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
  if (m_fd < 0) {
    // A filesystem without unnamed files (EOPNOTSUPP, EISDIR on old kernels): a named one.
    m_named = m_path + ".XXXXXX";
    m_fd = ::mkostemp(m_named.data(), O_CLOEXEC);
    if (m_fd < 0) {
      const int err = errno;
      m_named.clear();
      throw usage_error(fmt::format("cannot write {}: {}", m_path, std::strerror(err)));
    }
  }
  if (bytes == 0) return;
  if (const int err = ::posix_fallocate(m_fd, 0, static_cast<off_t>(bytes)); err != 0) {
    struct statvfs vfs {};
    const std::string free_text =
        ::fstatvfs(m_fd, &vfs) == 0
            ? fmt::format("its filesystem has {} free",
                          bytes_text(static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize))
            : std::string("its filesystem is full");
    ::close(m_fd);
    m_fd = -1;
    if (!m_named.empty()) ::unlink(m_named.c_str());
    if (err == ENOSPC || err == EDQUOT)
      throw usage_error(fmt::format(
          "cannot write {}: no room for the results: {}, and they need about {} (taken before "
          "the first case, so that a disk filling during the run cannot lose them)",
          m_path, free_text, bytes_text(bytes)));
    throw usage_error(fmt::format("cannot write {}: {}", m_path, std::strerror(err)));
  }
}

reserved_output::~reserved_output() {
  if (m_fd >= 0) ::close(m_fd);
  if (!m_done && !m_named.empty()) ::unlink(m_named.c_str());
}

void reserved_output::commit(const std::string& text) {
  if (m_path == "-") {
    write_output("-", text);
    return;
  }
  if (m_fd < 0 || m_done)
    throw std::logic_error(fmt::format("{}: committed twice or never reserved", m_path));
  const auto fail = [&](const char* what, int err) {
    throw std::runtime_error(
        fmt::format("cannot write {}: {}: {}", m_path, what, std::strerror(err)));
  };
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n =
        ::pwrite(m_fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : ENOSPC);
    done += static_cast<std::size_t>(n);
  }
  if (::ftruncate(m_fd, static_cast<off_t>(text.size())) != 0) fail("truncate", errno);
  if (::fchmod(m_fd, 0644) != 0 || ::fsync(m_fd) != 0) fail("sync", errno);
  std::string named = m_named;
  if (named.empty()) {
    // The unnamed file gets a temporary name beside the target, then the target's name.
    for (unsigned attempt = 0; attempt < 16 && named.empty(); ++attempt) {
      std::string candidate = fmt::format("{}.{}-{}", m_path, ::getpid(), attempt);
      const std::string self = fmt::format("/proc/self/fd/{}", m_fd);
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, candidate.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        named = std::move(candidate);
      } else if (errno != EEXIST) {
        fail("link", errno);
      }
    }
    if (named.empty()) fail("link", EEXIST);
  }
  if (::rename(named.c_str(), m_path.c_str()) != 0) {
    const int err = errno;
    ::unlink(named.c_str());
    m_named.clear();
    fail("rename", err);
  }
  m_done = true;
}

}  // namespace pairperf
