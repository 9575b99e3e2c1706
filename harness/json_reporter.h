#pragma once
// The results file (schema "pairperf.result", see results/schema.json) and its JSON Lines twin.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/reporter.h"

namespace pairperf {

inline constexpr const char* result_schema_name = "pairperf.result";
// Semantic version of the results file. MAJOR: a field removed or its meaning changed; MINOR: a
// field added; PATCH: description fixes. Readers accept files of the same MAJOR.
inline constexpr const char* result_schema_version = "1.7.0";

// Writes the whole file at finalize(), atomically (a temporary file, then rename); the path "-"
// is standard output. The constructor checks that the path can be written (output.h), so a bad
// one fails before the first case; make_folder makes a missing folder (pairperf's default path).
class json_reporter final : public reporter {
 public:
  explicit json_reporter(std::filesystem::path path, bool make_folder = false);
  void report_context(const nlohmann::json& context) override { m_context = context; }
  void report_result(const case_result& result) override { m_results.push_back(result); }
  void report_outcome(const nlohmann::json& outcome) override { m_outcome = outcome; }
  void amend_context(const std::string& key, const nlohmann::json& value) override {
    m_context[key] = value;
  }
  void finalize() override;

  // The document finalize() writes.
  [[nodiscard]] nlohmann::json document() const;

 private:
  std::filesystem::path m_path;
  bool m_make_folder = false;
  nlohmann::json m_context = nlohmann::json::object();
  nlohmann::json m_outcome;
  std::vector<case_result> m_results;
};

// One line per finished case, flushed as it goes, so a run that dies half-way leaves every
// finished case on disk ("-": standard output). The first line is {"schema", "schema_version",
// "context"}; every later line is one element of the results file's "results" array.
class jsonl_reporter final : public reporter {
 public:
  explicit jsonl_reporter(const std::filesystem::path& path);
  jsonl_reporter(const jsonl_reporter&) = delete;
  jsonl_reporter& operator=(const jsonl_reporter&) = delete;
  ~jsonl_reporter() override;
  void report_context(const nlohmann::json& context) override;
  void report_result(const case_result& result) override;
  void finalize() override;

 private:
  void write_line(const nlohmann::json& j);
  std::FILE* m_file = nullptr;
  std::string m_path;
  bool m_stdout = false;
};

}  // namespace pairperf
