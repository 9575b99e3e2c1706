#include "harness/json_reporter.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "core/errors.h"
#include "core/output.h"

namespace pairperf {

nlohmann::json json_reporter::document() const {
  nlohmann::json doc{{"schema", result_schema_name},
                     {"schema_version", result_schema_version},
                     {"context", m_context},
                     {"results", m_results}};
  if (!m_outcome.is_null()) doc["outcome"] = m_outcome;
  return doc;
}

json_reporter::json_reporter(std::filesystem::path path, bool make_folder)
    : m_path(std::move(path)), m_make_folder(make_folder) {
  check_output(m_path.string(), m_make_folder);
}

void json_reporter::finalize() {
  write_output(m_path.string(), document().dump(2) + "\n", m_make_folder);
}

jsonl_reporter::jsonl_reporter(const std::filesystem::path& path) : m_path(path.string()) {
  if (m_path == "-") {
    m_file = stdout;
    m_stdout = true;
    return;
  }
  // Opened now, before any case runs: a path that cannot be written is a usage error, not a
  // sweep lost. A missing folder is not made (a typo would otherwise go unnoticed).
  m_file = std::fopen(m_path.c_str(), "w");
  if (m_file == nullptr)
    throw usage_error(fmt::format("cannot write {}: {}", m_path, std::strerror(errno)));
}

jsonl_reporter::~jsonl_reporter() {
  if (m_file != nullptr && !m_stdout) std::fclose(m_file);
}

void jsonl_reporter::write_line(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), m_file) != line.size() || std::fflush(m_file) != 0) {
    throw std::runtime_error(fmt::format("cannot write {}: {}", m_path, std::strerror(errno)));
  }
}

void jsonl_reporter::report_context(const nlohmann::json& context) {
  write_line({{"schema", result_schema_name},
              {"schema_version", result_schema_version},
              {"context", context}});
}

void jsonl_reporter::report_result(const case_result& result) { write_line(result); }

void jsonl_reporter::finalize() {
  if (m_stdout) {
    m_file = nullptr;
    return;
  }
  if (m_file != nullptr && std::fclose(m_file) != 0) {
    m_file = nullptr;
    throw std::runtime_error(fmt::format("cannot close {}", m_path));
  }
  m_file = nullptr;
}

}  // namespace pairperf
