#pragma once
// Reporters format results; they never measure (google/benchmark's BenchmarkReporter). The
// runner calls report_context once, case_started/report_result per case, finalize at the end,
// all from one thread.
#include <cstddef>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"

namespace pairperf {

class reporter {
 public:
  virtual ~reporter() = default;
  virtual void report_context(const nlohmann::json& context) = 0;
  virtual void case_started(const test_case& /*test*/, std::size_t /*total*/) {}
  virtual void report_result(const case_result& result) = 0;
  // The run's outcome (client.h to_json(run_summary)): exit code, verdict, reasons, counts.
  // Called once before finalize, also for a run that could not start.
  virtual void report_outcome(const nlohmann::json& /*outcome*/) {}
  // A context entry known only at the end of the run (the per-case overhead); reporters that
  // wrote the context already ignore it. Called before report_outcome.
  virtual void amend_context(const std::string& /*key*/, const nlohmann::json& /*value*/) {}
  // Called once, also after a run that stopped early. Throws if output cannot be written.
  virtual void finalize() = 0;
};

// Fans out to several reporters in order. One that cannot write (a stream on a disk that filled)
// is dropped with its reason and the others go on: the sweep keeps measuring and the results
// file (whose room was taken at the start) still gets every case. finalize() never throws;
// failures() says which outputs were lost, and why, for the run's outcome and exit code.
class multi_reporter final : public reporter {
 public:
  void add(std::unique_ptr<reporter> r) { m_reporters.push_back({std::move(r), {}}); }
  void report_context(const nlohmann::json& context) override;
  void case_started(const test_case& test, std::size_t total) override;
  void report_result(const case_result& result) override;
  void report_outcome(const nlohmann::json& outcome) override;
  void amend_context(const std::string& key, const nlohmann::json& value) override;
  void finalize() override;
  // Each output that failed, in words ("cannot write r.jsonl: No space left on device ...").
  [[nodiscard]] std::vector<std::string> failures() const;

 private:
  struct member {
    std::unique_ptr<reporter> out;
    std::string failed;  // why it stopped; "" while it works
  };
  template <typename F>
  void each(F&& call);
  std::vector<member> m_reporters;
};

// Keeps the context and every result in memory, for commands that run cases and then read them
// back (doctor, mesh, a server driven by a mesh). With `progress`, one line per case as it starts.
class collecting_reporter final : public reporter {
 public:
  explicit collecting_reporter(std::FILE* progress = nullptr) : m_progress(progress) {}
  void report_context(const nlohmann::json& c) override {
    if (context.is_null()) context = c;
  }
  void case_started(const test_case& test, std::size_t total) override;
  void report_result(const case_result& r) override { results.push_back(r); }
  void finalize() override {}

  nlohmann::json context;
  std::vector<case_result> results;

 private:
  std::FILE* m_progress;
};

}  // namespace pairperf
