#include "harness/reporter.h"

#include <fmt/format.h>

#include <exception>

namespace pairperf {

template <typename F>
void multi_reporter::each(F&& call) {
  for (auto& m : m_reporters) {
    if (!m.failed.empty()) continue;
    try {
      call(*m.out);
    } catch (const std::exception& e) {
      m.failed = e.what();
      fmt::print(stderr, "pairperf: {}; that output stops here, the others go on\n", m.failed);
    }
  }
}

void multi_reporter::report_context(const nlohmann::json& context) {
  each([&](reporter& r) { r.report_context(context); });
}

void multi_reporter::case_started(const test_case& test, std::size_t total) {
  each([&](reporter& r) { r.case_started(test, total); });
}

void multi_reporter::report_result(const case_result& result) {
  each([&](reporter& r) { r.report_result(result); });
}

void collecting_reporter::case_started(const test_case& t, std::size_t total) {
  if (m_progress == nullptr) return;
  fmt::print(m_progress, "  [{}/{}] {} {} on {}{}\n", t.index + 1, total, t.transport, t.test,
             t.iface.empty() ? "routed" : t.iface, t.target.empty() ? "" : " -> " + t.target);
  std::fflush(m_progress);
}

void multi_reporter::amend_context(const std::string& key, const nlohmann::json& value) {
  each([&](reporter& r) { r.amend_context(key, value); });
}

void multi_reporter::report_outcome(const nlohmann::json& outcome) {
  each([&](reporter& r) { r.report_outcome(outcome); });
}

void multi_reporter::finalize() {
  each([](reporter& r) { r.finalize(); });
}

std::vector<std::string> multi_reporter::failures() const {
  std::vector<std::string> out;
  for (const auto& m : m_reporters) {
    if (!m.failed.empty()) out.push_back(m.failed);
  }
  return out;
}

}  // namespace pairperf
