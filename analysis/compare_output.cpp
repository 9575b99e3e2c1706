// compare's three outputs: the console table, Markdown for a CI comment, and JSON.
#include <fmt/format.h>

#include "analysis/compare.h"
#include "core/units.h"

namespace pairperf {
namespace {

std::string value_text(const metric_change& m, double v) {
  return m.higher_is_better ? format_rate(v, rate_unit::gb) : format_seconds(v);
}

std::string verdict_text(const metric_change& m) {
  if (m.regression) return "REGRESSION";
  if (m.improvement) return "improvement";
  if (m.inconclusive) return "inconclusive";
  if (!m.p_value) return "not tested";
  return m.significant ? "within threshold" : "no significant change";
}

std::string summary_text(const comparison& c) {
  return fmt::format(
      "{} regression(s), {} improvement(s), {} provenance change(s), {} status change(s), "
      "{} inconclusive, {} missing, {} new",
      c.regressions, c.improvements, c.provenance_changes, c.status_changes, c.inconclusive,
      c.missing.size(), c.added.size());
}

// Repetitions within one run share its process, placement and buffers: they show that run's
// noise, not how much two runs of the same build differ (on the development VM two consecutive
// runs moved 1 MiB TCP bandwidth by 28%). Said wherever a side is a single run.
std::string single_run_caveat(const comparison& c) {
  if (c.base_files.size() > 1 && c.new_files.size() > 1) return {};
  return "each side with one results file: its repetitions show that run's own noise, not how "
         "much runs of one build differ; a baseline folder of several runs (compare pools them) "
         "shows that too";
}

std::string verdict_word(const comparison& c) {
  switch (c.exit_code()) {
    case 3:
      return "findings";
    case 4:
      return "inconclusive";
    default:
      return "no regression";
  }
}

}  // namespace

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
          {"change", m.change},
          {"p_value", m.p_value ? nlohmann::json(*m.p_value) : nlohmann::json()},
          {"q_value", m.q_value ? nlohmann::json(*m.q_value) : nlohmann::json()},
          {"significant", m.significant},
          {"regression", m.regression},
          {"improvement", m.improvement},
          {"inconclusive", m.inconclusive},
          {"threshold", m.threshold},
          {"min_detectable_change",
           m.detect.mde ? nlohmann::json(*m.detect.mde) : nlohmann::json()},
          {"noise", m.detect.noise ? nlohmann::json(*m.detect.noise) : nlohmann::json()},
          {"repetitions_needed", m.detect.needed}};
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
       {"schema_version", "1.0.0"},
       {"method",
        "two-sided Mann-Whitney U over per-repetition values (exact up to 25 a side without "
        "ties, else normal approximation with tie correction), p-values adjusted over the "
        "comparison (Benjamini-Hochberg); change = Hodges-Lehmann estimate (median of every "
        "new/base ratio) - 1; a regression is significant (adjusted p < alpha) and worse than "
        "the threshold"},
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
       {"caveat", single_run_caveat(c)}};
}

void print_comparison(std::FILE* out, const comparison& c, bool all_rows) {
  fmt::print(out,
             "pairperf compare: {} case(s) matched; threshold {:.1f}% ({:.1f}% for p99), alpha {} "
             "(two-sided Mann-Whitney U over repetitions, Benjamini-Hochberg adjusted)\n",
             c.cases.size(), c.options.threshold * 100, c.options.tail_threshold * 100,
             c.options.alpha);
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
                 value_text(m, m.base_median), value_text(m, m.new_median), m.change * 100,
                 m.q_value ? fmt::format("{:.3g}", *m.q_value) : "-", verdict_text(m),
                 m.note.empty() ? "" : " (" + m.note + ")");
    }
  }
  for (const auto& k : c.missing) fmt::print(out, "  missing in NEW: {}\n", k);
  for (const auto& k : c.added) fmt::print(out, "  new in NEW:     {}\n", k);
  if (const std::string why = c.inconclusive_reason(); !why.empty() && !c.has_finding())
    fmt::print(out, "inconclusive: {}\n", why);
  if (const std::string note = single_run_caveat(c); !note.empty() && c.regressions > 0)
    fmt::print(out, "note: {}\n", note);
  fmt::print(out, "{}: exit {} ({})\n", summary_text(c), c.exit_code(), verdict_word(c));
}

std::string markdown(const comparison& c) {
  std::string md = fmt::format(
      "### pairperf compare: {}\n\n{}; {} case(s) matched. A regression is a change "
      "worse than {:.1f}% ({:.1f}% for p99) that is significant at {} (two-sided Mann-Whitney U "
      "over repetitions, p adjusted by Benjamini-Hochberg). A metric is inconclusive when its "
      "data could not show a change of that size (one value a side, or noise too wide).\n\n",
      verdict_word(c), summary_text(c), c.cases.size(), c.options.threshold * 100,
      c.options.tail_threshold * 100, c.options.alpha);
  if (const std::string why = c.inconclusive_reason(); !why.empty() && !c.has_finding())
    md += fmt::format("**Inconclusive**: {}.\n\n", why);
  if (const std::string note = single_run_caveat(c); !note.empty() && c.regressions > 0)
    md += fmt::format("Note: {}.\n\n", note);
  const auto row = [](const case_comparison& k, const metric_change& m) {
    return fmt::format("| `{}` | {} | {} | {} | {:+.1f}% | {} | {} |\n", k.key, m.metric,
                       value_text(m, m.base_median), value_text(m, m.new_median), m.change * 100,
                       m.q_value ? fmt::format("{:.3g}", *m.q_value) : "-",
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
