#pragma once
// The results file (schema "pairperf.result", see results/schema.json) and its JSON Lines twin.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/output.h"
#include "harness/reporter.h"

namespace pairperf {

inline constexpr const char* result_schema_name = "pairperf.result";
// Semantic version of the results file. MAJOR: a field removed or its meaning changed; MINOR: a
// field added; PATCH: description fixes. Readers accept files of the same MAJOR.
inline constexpr const char* result_schema_version = "1.8.0";

// The room a results file of `cases` cases, each of `repeat` measured phases, may take: the
// context (measured 25 KiB on a host with every transport) and each case (3-8 KiB written with
// dump(2); 0.2 KiB more per phase) with twice that margin: what json_reporter reserves.
[[nodiscard]] std::uint64_t results_file_room(std::size_t cases, unsigned repeat);

// Writes the whole file at finalize(), atomically (a temporary file, then rename); the path "-"
// is standard output. The constructor checks that the path can be written and takes `room` bytes
// for it on its filesystem (output.h's reserved_output), so a bad path or a full disk fails before
// the first case and a disk that fills during the sweep cannot lose it; make_folder makes a
// missing folder (pairperf's default path).
class json_reporter final : public reporter {
 public:
  explicit json_reporter(const std::filesystem::path& path, bool make_folder = false,
                         std::uint64_t room = 0);
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
  reserved_output m_file;
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
  int m_fd = -1;
  std::string m_path;
  bool m_stdout = false;
  std::uint64_t m_written = 0;  // bytes of whole lines in the file
  std::size_t m_lines = 0;
};

}  // namespace pairperf
