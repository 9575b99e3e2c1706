// compare's three outputs: the console table, Markdown for a CI comment, and JSON.
#include <fmt/format.h>

#include "analysis/compare.h"
#include "core/units.h"

namespace pairperf {
namespace {

std::string value_text(const metric_change& m, double v) {
  return metric_value_text(m.higher_is_better, v);
}

std::string verdict_text(const metric_change& m) {
  if (m.regression) return "REGRESSION";
  if (m.improvement) return "improvement";
  if (m.inconclusive) return "inconclusive";
  if (!m.test.p_value) return "not tested";
  return m.significant ? "within threshold" : "no significant change";
}

std::string summary_text(const comparison& c) {
  return fmt::format(
      "{} regression(s), {} improvement(s), {} provenance change(s), {} status change(s), "
      "{} inconclusive, {} missing, {} new",
      c.regressions, c.improvements, c.provenance_changes, c.status_changes, c.inconclusive,
      c.missing.size(), c.added.size());
}

// What the verdicts rest on, said with every comparison: how many runs each side holds.
std::string runs_text(const comparison& c) {
  return fmt::format("{} baseline run(s), {} new run(s)", c.base_files.size(), c.new_files.size());
}

constexpr const char* method_text =
    "runs are the unit: each run's value is the median of its repetitions; the new runs' mean is "
    "tested against the baseline runs' spread (prediction interval, Student's t on log values; "
    "Hahn, Meeker & Escobar, Statistical Intervals, ch. 4), p-values adjusted over the "
    "comparison (Benjamini-Hochberg); change = ratio of the geometric means - 1; a regression is "
    "significant (adjusted p < alpha), shows in every new run alone (intersection-union test), "
    "is worse than the threshold and is not explained by the new runs' host noise; noisy "
    "baseline runs are left out";

// Said under a regression when the baseline is short: a host switches between modes now and then
// (on the development VM, 8-byte TCP latency by 50% for a stretch of runs), and a baseline that has
// not seen a mode cannot tell it from a regression (scripts/regression-study: 7.4% false alarms
// with 5 baseline runs and 2 new runs, 4.2% with 10).
std::string short_baseline_note(const comparison& c) {
  if (c.regressions == 0 || c.base_files.size() >= 10) return {};
  return fmt::format(
      "{} baseline run(s): a baseline of fewer than 10 runs may not have seen every mode this "
      "host switches between, and calls a mode a regression more often (docs/commands/"
      "compare.md: A nightly CI job)",
      c.base_files.size());
}

std::string verdict_word(const comparison& c) { return verdict_for_exit(c.exit_code()); }

}  // namespace

std::string verdict_for_exit(int exit_code) {
  switch (exit_code) {
    case 3:
      return "findings";
    case 4:
      return "inconclusive";
    default:
      return "no regression";
  }
}

std::string metric_value_text(bool higher_is_better, double v) {
  return higher_is_better ? format_rate(v, rate_unit::gb) : format_seconds(v);
}

void to_json(nlohmann::json& j, const comparison& c) {
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& k : c.cases) {
    nlohmann::json metrics = nlohmann::json::array();
    for (const auto& m : k.metrics) {
      nlohmann::json mj{
          {"metric", m.metric},
          {"unit", m.higher_is_better ? "B/s" : "s"},
          {"higher_is_better", m.higher_is_better},
          {"base", m.base},
          {"new", m.next},
          {"base_median", m.base_median},
          {"new_median", m.new_median},
          {"base_noisy_runs", m.base_noisy_runs},
          {"change", m.test.change},
          {"p_value", m.test.p_value ? nlohmann::json(*m.test.p_value) : nlohmann::json()},
          {"q_value", m.q_value ? nlohmann::json(*m.q_value) : nlohmann::json()},
          {"significant", m.significant},
          {"regression", m.regression},
          {"improvement", m.improvement},
          {"inconclusive", m.inconclusive},
          {"threshold", m.threshold},
          {"min_detectable_change", m.test.mde ? nlohmann::json(*m.test.mde) : nlohmann::json()},
          {"run_spread", m.test.spread ? nlohmann::json(*m.test.spread) : nlohmann::json()},
          {"p_each", m.test.p_each ? nlohmann::json(*m.test.p_each) : nlohmann::json()},
          {"base_runs_needed", m.test.base_runs_needed}};
      if (!m.note.empty()) mj["note"] = m.note;
      metrics.push_back(std::move(mj));
    }
    cases.push_back({{"key", k.key},
                     {"case", k.test},
                     {"status", {{"base", k.base_status}, {"new", k.new_status}}},
                     {"status_regressed", k.status_regressed},
                     {"lanes", {{"base", k.base_lanes}, {"new", k.new_lanes}}},
                     {"provenance_changed", k.provenance_changed},
                     {"noisy", k.noisy.empty() ? nlohmann::json() : nlohmann::json(k.noisy)},
                     {"metrics", metrics}});
  }
  j = {{"schema", "pairperf.compare"},
       {"schema_version", "2.0.0"},
       {"method", method_text},
       {"threshold", c.options.threshold},
       {"tail_threshold", c.options.tail_threshold},
       {"alpha", c.options.alpha},
       {"base_files", c.base_files},
       {"new_files", c.new_files},
       {"cases", cases},
       {"missing", c.missing},
       {"added", c.added},
       {"regressions", c.regressions},
       {"improvements", c.improvements},
       {"provenance_changes", c.provenance_changes},
       {"status_changes", c.status_changes},
       {"inconclusive", c.inconclusive},
       {"inconclusive_reason", c.inconclusive_reason()},
       {"exit_code", c.exit_code()},
       {"verdict", verdict_word(c)},
       {"runs", runs_text(c)}};
}

void print_comparison(std::FILE* out, const comparison& c, bool all_rows) {
  fmt::print(out,
             "pairperf compare: {} case(s) matched, {}; threshold {:.1f}% ({:.1f}% for p99), "
             "alpha {} (runs as the unit: Student's t prediction test over run values, "
             "Benjamini-Hochberg adjusted)\n",
             c.cases.size(), runs_text(c), c.options.threshold * 100,
             c.options.tail_threshold * 100, c.options.alpha);
  fmt::print(out, "  {:<64} {:<12} {:>12} {:>12} {:>8} {:>8}  {}\n", "CASE", "METRIC", "BASE",
             "NEW", "CHANGE", "ADJ P", "VERDICT");
  for (const auto& k : c.cases) {
    if (k.status_regressed)
      fmt::print(out, "  {:<64} status: {} -> {}  STATUS CHANGE\n", k.key, k.base_status,
                 k.new_status);
    if (k.provenance_changed)
      fmt::print(out, "  {:<64} lanes: {} -> {}  PROVENANCE CHANGE\n", k.key,
                 fmt::join(k.base_lanes, ","), fmt::join(k.new_lanes, ","));
    for (const auto& m : k.metrics) {
      const bool interesting = m.regression || m.improvement || m.inconclusive;
      if (!all_rows && !interesting) continue;
      fmt::print(out, "  {:<64} {:<12} {:>12} {:>12} {:>+7.1f}% {:>8}  {}{}\n", k.key, m.metric,
                 value_text(m, m.base_median), value_text(m, m.new_median), m.test.change * 100,
                 m.q_value ? fmt::format("{:.3g}", *m.q_value) : "-", verdict_text(m),
                 m.note.empty() ? "" : " (" + m.note + ")");
    }
  }
  for (const auto& k : c.missing) fmt::print(out, "  missing in NEW: {}\n", k);
  for (const auto& k : c.added) fmt::print(out, "  new in NEW:     {}\n", k);
  if (const std::string why = c.inconclusive_reason(); !why.empty() && !c.has_finding())
    fmt::print(out, "inconclusive: {}\n", why);
  if (const std::string note = short_baseline_note(c); !note.empty())
    fmt::print(out, "note: {}\n", note);
  fmt::print(out, "{}: exit {} ({})\n", summary_text(c), c.exit_code(), verdict_word(c));
}

std::string markdown(const comparison& c) {
  std::string md = fmt::format(
      "### pairperf compare: {}\n\n{}; {} case(s) matched, {}. A regression is a change "
      "worse than {:.1f}% ({:.1f}% for p99) that is significant at {} with runs as the unit "
      "(each run's median; Student's t prediction test against the baseline runs' spread, p "
      "adjusted by Benjamini-Hochberg). A metric is inconclusive when its runs could not show a "
      "change of that size (fewer than 2 baseline runs, or runs that vary too much).\n\n",
      verdict_word(c), summary_text(c), c.cases.size(), runs_text(c), c.options.threshold * 100,
      c.options.tail_threshold * 100, c.options.alpha);
  if (const std::string why = c.inconclusive_reason(); !why.empty() && !c.has_finding())
    md += fmt::format("**Inconclusive**: {}.\n\n", why);
  if (const std::string note = short_baseline_note(c); !note.empty())
    md += fmt::format("Note: {}.\n\n", note);
  const auto row = [](const case_comparison& k, const metric_change& m) {
    return fmt::format("| `{}` | {} | {} | {} | {:+.1f}% | {} | {} |\n", k.key, m.metric,
                       value_text(m, m.base_median), value_text(m, m.new_median),
                       m.test.change * 100, m.q_value ? fmt::format("{:.3g}", *m.q_value) : "-",
                       verdict_text(m) + (m.note.empty() ? "" : " (" + m.note + ")"));
  };
  const std::string header =
      "| case | metric | base | new | change | adjusted p | verdict "
      "|\n|---|---|---|---|---|---|---|\n";
  std::string findings;
  for (const auto& k : c.cases) {
    if (k.status_regressed)
      findings += fmt::format("| `{}` | status | {} | {} | | | **status change** |\n", k.key,
                              k.base_status, k.new_status);
    if (k.provenance_changed)
      findings += fmt::format("| `{}` | lanes | {} | {} | | | **provenance change** |\n", k.key,
                              fmt::join(k.base_lanes, ", "), fmt::join(k.new_lanes, ", "));
    for (const auto& m : k.metrics) {
      if (m.regression || m.improvement || m.inconclusive) findings += row(k, m);
    }
  }
  if (!findings.empty()) md += header + findings + "\n";
  std::string all;
  for (const auto& k : c.cases) {
    for (const auto& m : k.metrics) all += row(k, m);
  }
  md += "<details><summary>All comparisons</summary>\n\n" + header + all + "\n</details>\n";
  if (!c.missing.empty() || !c.added.empty()) {
    md += "\n";
    for (const auto& k : c.missing) md += fmt::format("- missing in new: `{}`\n", k);
    for (const auto& k : c.added) md += fmt::format("- new: `{}`\n", k);
  }
  return md;
}

}  // namespace pairperf
