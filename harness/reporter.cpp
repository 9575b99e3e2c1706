#include "harness/reporter.h"

#include <fmt/format.h>

namespace pairperf {

void multi_reporter::report_context(const nlohmann::json& context) {
  for (auto& r : m_reporters) r->report_context(context);
}

void multi_reporter::case_started(const test_case& test, std::size_t total) {
  for (auto& r : m_reporters) r->case_started(test, total);
}

void multi_reporter::report_result(const case_result& result) {
  for (auto& r : m_reporters) r->report_result(result);
}

void collecting_reporter::case_started(const test_case& t, std::size_t total) {
  if (m_progress == nullptr) return;
  fmt::print(m_progress, "  [{}/{}] {} {} on {}{}\n", t.index + 1, total, t.transport, t.test,
             t.iface.empty() ? "routed" : t.iface, t.target.empty() ? "" : " -> " + t.target);
  std::fflush(m_progress);
}

void multi_reporter::amend_context(const std::string& key, const nlohmann::json& value) {
  for (auto& r : m_reporters) r->amend_context(key, value);
}

void multi_reporter::report_outcome(const nlohmann::json& outcome) {
  for (auto& r : m_reporters) r->report_outcome(outcome);
}

void multi_reporter::finalize() {
  for (auto& r : m_reporters) r->finalize();
}

}  // namespace pairperf
