// history's two outputs: the console (change points, then the newest run's verdicts) and JSON.
#include <fmt/format.h>

#include "analysis/history.h"
#include "core/units.h"

namespace pairperf {
namespace {

std::string verdict_word(const history& h) { return verdict_for_exit(h.exit_code()); }

std::string latest_verdict(const metric_change& m) {
  if (m.regression) return "regression";
  if (m.improvement) return "improvement";
  if (m.inconclusive) return "inconclusive";
  if (m.base.empty()) return "not judged";
  return m.significant ? "within threshold" : "no significant change";
}

std::string run_name(const history& h, std::size_t i) {
  const history_run& r = h.runs.at(i);
  return r.time_utc.empty() ? r.file : r.time_utc;
}

constexpr const char* method_text =
    "change points: E-divisive means (Matteson & James 2014; as in MongoDB's CI, Daly et al. "
    "ICPE 2020) on log run values, permutation test within segments; the newest run: "
    "prediction test against the runs since the last change point (Student's t on log run "
    "values; Hahn, Meeker & Escobar, Statistical Intervals, ch. 4), Benjamini-Hochberg over "
    "its metrics";

nlohmann::json series_json(const history& h, const history_series& s) {
  nlohmann::json values = nlohmann::json::array();
  for (const auto& v : s.values) values.push_back(v ? nlohmann::json(*v) : nlohmann::json());
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : s.changes) {
    changes.push_back({{"run", c.run},
                       {"file", h.runs.at(c.run).file},
                       {"time_utc", h.runs.at(c.run).time_utc},
                       {"before", c.before},
                       {"after", c.after},
                       {"change", c.change},
                       {"p_value", c.p_value},
                       {"verdict", c.verdict}});
  }
  nlohmann::json latest;
  if (s.latest) {
    const metric_change& m = *s.latest;
    latest = {
        {"value", m.next.empty() ? nlohmann::json() : nlohmann::json(m.next.back())},
        {"judged", m.next},
        {"level_since_run", s.level_since ? nlohmann::json(*s.level_since) : nlohmann::json()},
        {"baseline", m.base},
        {"baseline_noisy_runs", m.base_noisy_runs},
        {"change", m.test.change},
        {"p_value", m.test.p_value ? nlohmann::json(*m.test.p_value) : nlohmann::json()},
        {"q_value", m.q_value ? nlohmann::json(*m.q_value) : nlohmann::json()},
        {"min_detectable_change", m.test.mde ? nlohmann::json(*m.test.mde) : nlohmann::json()},
        {"run_spread", m.test.spread ? nlohmann::json(*m.test.spread) : nlohmann::json()},
        {"verdict", latest_verdict(m)},
        {"note", m.note}};
  }
  return {{"key", s.key},
          {"case", s.test},
          {"metric", s.metric},
          {"unit", s.higher_is_better ? "B/s" : "s"},
          {"higher_is_better", s.higher_is_better},
          {"values", values},
          {"change_points", changes},
          {"latest", latest}};
}

}  // namespace

void to_json(nlohmann::json& j, const history& h) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : h.runs)
    runs.push_back({{"file", r.file}, {"time_utc", r.time_utc}, {"label", r.label}});
  nlohmann::json series = nlohmann::json::array();
  for (const auto& s : h.series) series.push_back(series_json(h, s));
  j = {{"schema", "pairperf.history"},
       {"schema_version", "1.0.0"},
       {"method", method_text},
       {"threshold", h.options.judge.threshold},
       {"tail_threshold", h.options.judge.tail_threshold},
       {"alpha", h.options.judge.alpha},
       {"change_alpha", h.options.change.alpha},
       {"permutations", h.options.change.permutations},
       {"min_segment", h.options.change.min_segment},
       {"window", h.options.window},
       {"new_runs", h.options.judged},
       {"ordered_by", h.ordered_by},
       {"runs", runs},
       {"series", series},
       {"change_points", h.change_points},
       {"regressions", h.regressions},
       {"improvements", h.improvements},
       {"inconclusive", h.inconclusive},
       {"status_changes", h.status_changes},
       {"provenance_changes", h.provenance_changes},
       {"inconclusive_reason", h.inconclusive_reason()},
       {"exit_code", h.exit_code()},
       {"verdict", verdict_word(h)}};
}

void print_history(std::FILE* out, const history& h, bool all_rows) {
  fmt::print(out, "pairperf history: {} run(s) in {} order{}, {} series; {}\n", h.runs.size(),
             h.ordered_by,
             h.runs.empty()
                 ? ""
                 : fmt::format(", {} to {}", run_name(h, 0), run_name(h, h.runs.size() - 1)),
             h.series.size(), method_text);
  fmt::print(out, "change points ({}):\n", h.change_points);
  for (const auto& s : h.series) {
    for (const auto& c : s.changes) {
      fmt::print(out, "  {:<64} {:<12} at {} ({} run(s) ago): {} -> {} ({:+.1f}%, p {:.3g}) {}\n",
                 s.key, s.metric, run_name(h, c.run), h.runs.size() - 1 - c.run,
                 metric_value_text(s.higher_is_better, c.before),
                 metric_value_text(s.higher_is_better, c.after), c.change * 100, c.p_value,
                 c.verdict);
    }
  }
  if (!h.runs.empty())
    fmt::print(out,
               "newest {} run(s), to {}, against their level (the runs since the last change "
               "point):\n",
               h.options.judged, h.runs.back().file);
  std::size_t quiet = 0;
  for (const auto& s : h.series) {
    if (!s.latest) continue;
    const metric_change& m = *s.latest;
    if (!all_rows && !m.regression && !m.improvement && !m.inconclusive) {
      ++quiet;
      continue;
    }
    fmt::print(out, "  {:<64} {:<12} {:>12} -> {:>12} {:>+7.1f}% ({} run(s) since {}) {}{}\n",
               s.key, s.metric,
               m.base.empty() ? "-" : metric_value_text(m.higher_is_better, m.base_median),
               metric_value_text(m.higher_is_better, m.new_median), m.test.change * 100,
               m.base.size(), s.level_since ? run_name(h, *s.level_since) : "-", latest_verdict(m),
               m.note.empty() ? "" : " (" + m.note + ")");
  }
  if (quiet > 0)
    fmt::print(out, "  ({} metric(s) held against their level; --all lists them)\n", quiet);
  for (const auto& k : h.status_changes) fmt::print(out, "  {:<64} STATUS CHANGE (ok before)\n", k);
  for (const auto& k : h.provenance_changes)
    fmt::print(out, "  {:<64} PROVENANCE CHANGE (lanes differ from the run before)\n", k);
  if (const std::string why = h.inconclusive_reason(); !why.empty() && h.exit_code() == 4)
    fmt::print(out, "inconclusive: {}\n", why);
  fmt::print(out,
             "{} change point(s); newest run: {} regression(s), {} improvement(s), {} "
             "inconclusive, {} status change(s), {} provenance change(s): exit {} ({})\n",
             h.change_points, h.regressions, h.improvements, h.inconclusive,
             h.status_changes.size(), h.provenance_changes.size(), h.exit_code(), verdict_word(h));
}

}  // namespace pairperf
