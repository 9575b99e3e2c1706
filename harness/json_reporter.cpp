#include "harness/json_reporter.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "core/errors.h"
#include "core/output.h"
#include "harness/context.h"

namespace pairperf {

nlohmann::json json_reporter::document() const {
  nlohmann::json doc{{"schema", result_schema_name},
                     {"schema_version", result_schema_version},
                     {"context", m_context},
                     {"results", m_results}};
  if (!m_outcome.is_null()) doc["outcome"] = m_outcome;
  return doc;
}

std::uint64_t results_file_room(std::size_t cases, unsigned repeat) {
  constexpr std::uint64_t context = 256 * 1024;
  const std::uint64_t per_case = 16 * 1024 + std::uint64_t{512} * std::max(repeat, 1U);
  return context + per_case * cases;
}

json_reporter::json_reporter(const std::filesystem::path& path, bool make_folder,
                             std::uint64_t room)
    : m_file(path.string(), room, make_folder) {}

void json_reporter::finalize() {
  const std::string text = document().dump(2) + "\n";
  try {
    m_file.commit(text);
  } catch (const std::runtime_error& e) {
    // Its folder vanished or was made read-only during the run: the results go where they can.
    const char* tmp = std::getenv("TMPDIR");
    std::string stamp = utc_timestamp();
    std::erase(stamp, ':');
    const std::string rescue = fmt::format("{}/pairperf-results-{}-{}.json",
                                           tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", stamp,
                                           ::getpid());
    try {
      write_output(rescue, text);
    } catch (const std::runtime_error&) {
      throw e;
    }
    throw std::runtime_error(fmt::format("{}; the results are in {} instead", e.what(), rescue));
  }
}

jsonl_reporter::jsonl_reporter(const std::filesystem::path& path) : m_path(path.string()) {
  if (m_path == "-") {
    m_stdout = true;
    return;
  }
  // Opened now, before any case runs: a path that cannot be written is a usage error, not a
  // sweep lost. A missing folder is not made (a typo would otherwise go unnoticed).
  m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (m_fd < 0) throw usage_error(fmt::format("cannot write {}: {}", m_path, std::strerror(errno)));
}

jsonl_reporter::~jsonl_reporter() {
  if (m_fd >= 0) ::close(m_fd);
}

void jsonl_reporter::write_line(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  if (m_stdout) {
    if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size() || std::fflush(stdout) != 0)
      throw std::runtime_error("cannot write the results stream to standard output");
    return;
  }
  for (std::size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(m_fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // No half line: the stream ends at the last whole one.
      const int err = n < 0 ? errno : ENOSPC;
      const bool trimmed = ::ftruncate(m_fd, static_cast<off_t>(m_written)) == 0;
      throw std::runtime_error(fmt::format("cannot write {}: {} ({} line(s) kept{})", m_path,
                                           std::strerror(err), m_lines,
                                           trimmed ? ", each whole" : "; the last may be cut"));
    }
    done += static_cast<std::size_t>(n);
  }
  m_written += line.size();
  ++m_lines;
}

void jsonl_reporter::report_context(const nlohmann::json& context) {
  write_line({{"schema", result_schema_name},
              {"schema_version", result_schema_version},
              {"context", context}});
}

void jsonl_reporter::report_result(const case_result& result) { write_line(result); }

void jsonl_reporter::finalize() {
  if (m_fd < 0) return;
  const int fd = std::exchange(m_fd, -1);
  if (::close(fd) != 0)
    throw std::runtime_error(fmt::format("cannot write {}: {}", m_path, std::strerror(errno)));
}

}  // namespace pairperf
