#pragma once
// Human output: a table, one row per case, and (on a terminal) a progress line.
#include <chrono>
#include <cstdio>
#include <string>

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

// The time a sweep has left, from the cases' budgets: `left` cases of `per_case_s` each (what the
// run planned: phases, warm-up and set-up; client.h planned_case_seconds), at the pace the `done`
// cases kept to their budgets over `elapsed_s` (held to [0.2, 5] so that one slow set-up or a run
// of skipped cases does not swing it). With nothing done yet, the budgets alone.
double estimate_left_s(std::size_t done, std::size_t left, double elapsed_s, double per_case_s);

// The progress line's text (no control characters): "[3/18 11%] tcp tcp_bw 64K lo  0:02 elapsed,
// ~0:11 left"; times as m:ss, h:mm:ss from an hour.
std::string progress_text(const test_case& test, std::size_t total, double elapsed_s,
                          double left_s);

// The progress line on one rewritten line of stderr; only used on a terminal.
class progress_reporter final : public reporter {
 public:
  // `per_case_s`: each case's planned seconds (0: no estimate is shown).
  progress_reporter(std::FILE* out, double per_case_s)
      : m_out(out), m_per_case_s(per_case_s), m_start(std::chrono::steady_clock::now()) {}
  void report_context(const nlohmann::json& /*context*/) override {}
  void case_started(const test_case& test, std::size_t total) override;
  // Clears the progress line so the table row that follows starts clean.
  void report_result(const case_result& /*result*/) override {
    ++m_done;
    finalize();
  }
  void finalize() override;

 private:
  std::FILE* m_out;
  double m_per_case_s;
  std::chrono::steady_clock::time_point m_start;
  std::size_t m_done = 0;
};

}  // namespace pairperf
