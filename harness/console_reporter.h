#pragma once
// Human output: a table, one row per case, and (on a terminal) a progress line.
#include <cstdio>

#include "core/units.h"
#include "harness/reporter.h"

namespace pairperf {

class console_reporter final : public reporter {
 public:
  console_reporter(std::FILE* out, rate_unit unit) : m_out(out), m_unit(unit) {}
  void report_context(const nlohmann::json& context) override;
  void report_result(const case_result& result) override;
  void report_outcome(const nlohmann::json& outcome) override { m_outcome = outcome; }
  void finalize() override;

  // The row text for one result (no newline); exposed for tests.
  [[nodiscard]] std::string format_row(const case_result& r) const;
  [[nodiscard]] static std::string header();

 private:
  std::FILE* m_out;
  rate_unit m_unit;
  std::size_t m_ok = 0, m_skipped = 0, m_failed = 0, m_noisy = 0;
  bool m_sender_only = false;
  nlohmann::json m_outcome;
};

// "[3/18] tcp tcp_bw 64K lo" on one rewritten line of stderr; only used on a terminal.
class progress_reporter final : public reporter {
 public:
  explicit progress_reporter(std::FILE* out) : m_out(out) {}
  void report_context(const nlohmann::json& /*context*/) override {}
  void case_started(const test_case& test, std::size_t total) override;
  // Clears the progress line so the table row that follows starts clean.
  void report_result(const case_result& /*result*/) override { finalize(); }
  void finalize() override;

 private:
  std::FILE* m_out;
};

}  // namespace pairperf
