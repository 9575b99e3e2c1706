#include "analysis/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>

#include "analysis/compare_noise.h"
#include "core/exit_codes.h"
#include "core/stats.h"
#include "core/units.h"
#include "host/noise.h"

namespace pairperf {
namespace {

std::string file_error(const std::string& path, const std::string& what) {
  return fmt::format("{}: {}", path, what);
}

void load_file(const std::filesystem::path& path, result_set& out) {
  std::ifstream in(path);
  if (!in) throw compare_error(file_error(path.string(), "cannot be read"));
  const bool lines = path.extension() == ".jsonl";
  std::vector<nlohmann::json> docs;
  try {
    if (lines) {
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty()) docs.push_back(nlohmann::json::parse(line));
      }
    } else {
      docs.push_back(nlohmann::json::parse(in));
    }
  } catch (const nlohmann::json::exception& e) {
    throw compare_error(file_error(path.string(), fmt::format("not JSON ({})", e.what())));
  }
  if (docs.empty() || !docs.front().is_object())
    throw compare_error(file_error(path.string(), "not a pairperf results file (no JSON object)"));
  const nlohmann::json& head = docs.front();
  const auto text = [&](const char* key) {
    const auto it = head.find(key);
    return it != head.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string schema = text("schema");
  const std::string version = text("schema_version");
  if (schema != "pairperf.result") {
    throw compare_error(file_error(
        path.string(),
        fmt::format("schema '{}' is not pairperf.result (compare, history and export read the "
                    "results of `pairperf run --json`)",
                    schema.empty() ? "(none)" : schema)));
  }
  if (version.rfind("1.", 0) != 0) {
    throw compare_error(file_error(
        path.string(),
        fmt::format("schema version {} is not one this pairperf reads (1.x); compare files "
                    "written by the same major version",
                    version.empty() ? "(none)" : version)));
  }
  const std::size_t run = out.files.size();
  out.files.push_back(path.string());
  const auto context = head.find("context");
  out.contexts.push_back(context != head.end() && context->is_object() ? *context
                                                                       : nlohmann::json::object());
  try {
    if (lines) {
      for (std::size_t i = 1; i < docs.size(); ++i)
        out.results.push_back(docs[i].get<case_result>());
    } else {
      for (const auto& r : head.at("results")) out.results.push_back(r.get<case_result>());
    }
    out.run_of.resize(out.results.size(), run);
  } catch (const std::exception& e) {
    throw compare_error(file_error(path.string(), fmt::format("malformed result ({})", e.what())));
  }
}

// One case's results on one side, grouped by run (in the order of the side's files).
struct side_cases {
  std::vector<const case_result*> results;
  std::vector<std::vector<const case_result*>> runs;
  std::vector<std::size_t> run_index;  // the file each entry of `runs` came from
};

std::map<std::string, side_cases> by_key(const result_set& s) {
  std::map<std::string, side_cases> out;
  for (std::size_t i = 0; i < s.results.size(); ++i) {
    side_cases& c = out[case_key(s.results[i].test)];
    c.results.push_back(&s.results[i]);
    const std::size_t run = i < s.run_of.size() ? s.run_of[i] : 0;
    if (c.run_index.empty() || c.run_index.back() != run) {
      c.run_index.push_back(run);
      c.runs.emplace_back();
    }
    c.runs.back().push_back(&s.results[i]);
  }
  return out;
}

std::vector<std::string> lanes_of(const side_cases& s) {
  std::set<std::string> lanes;
  for (const auto* r : s.results) {
    if (!r->provenance) continue;
    for (const auto& l : r->provenance->lanes) lanes.insert(l.transport + "/" + l.device);
  }
  return {lanes.begin(), lanes.end()};
}

std::string status_of(const side_cases& s) {
  std::set<std::string> seen;
  for (const auto* r : s.results) seen.insert(to_string(r->status));
  return fmt::format("{}", fmt::join(seen, ","));
}

bool run_is_noisy(const std::vector<const case_result*>& run) {
  return std::any_of(run.begin(), run.end(),
                     [](const case_result* r) { return is_noisy(r->host_noise); });
}

// The first noisy result of a side's runs, as "SIDE: reason"; empty when all were quiet.
std::string noisy_of(const std::vector<std::vector<const case_result*>>& runs, const char* side) {
  for (const auto& run : runs) {
    for (const auto* r : run) {
      if (is_noisy(r->host_noise)) return fmt::format("{}: {}", side, noise_reason(r->host_noise));
    }
  }
  return {};
}

bool all_ok(const side_cases& s) {
  return std::all_of(s.results.begin(), s.results.end(),
                     [](const case_result* r) { return r->status == case_status::ok; });
}

// A baseline run whose host took the CPU away measured the host, not the build: it is left out
// of the baseline (and counted, and kept in `loaded`), so one busy night does not widen every
// later verdict.
std::vector<std::vector<const case_result*>> quiet_runs(
    const side_cases& s, std::vector<std::vector<const case_result*>>& loaded) {
  std::vector<std::vector<const case_result*>> out;
  for (const auto& run : s.runs) (run_is_noisy(run) ? loaded : out).push_back(run);
  return out;
}

metric_change compare_metric(const std::string& metric, const side_cases& base,
                             const side_cases& next, const compare_options& o) {
  metric_change m;
  m.metric = metric;
  m.higher_is_better = metric == "bandwidth";
  m.threshold = metric == "latency p99" ? o.tail_threshold : o.threshold;
  std::vector<std::vector<const case_result*>> loaded;
  auto base_runs = quiet_runs(base, loaded);
  m.next = run_values(next.runs, metric);
  m.next_noise = run_exposures(next.runs, metric);
  m.base_loaded = run_values(loaded, metric);
  if (run_values(base_runs, metric).empty() && !m.base_loaded.empty()) {
    m.base_loaded.clear();  // every baseline run was noisy: judge them, the case is marked noisy
    base_runs = base.runs;
  } else {
    m.base_noisy_runs = m.base_loaded.size();
    m.base_loaded_noise = run_exposures(loaded, metric);
    m.base_loaded_range = run_ranges(loaded, metric);
  }
  m.base = run_values(base_runs, metric);
  m.base_noise = run_exposures(base_runs, metric);
  if (m.base.empty() || m.next.empty()) {
    m.note = "no value on one side";
    return m;
  }
  m.base_median = median_of(m.base);
  m.new_median = median_of(m.next);
  m.test = test_runs(m.base, m.next, o.alpha, m.threshold);
  return m;
}

}  // namespace

int comparison::exit_code() const {
  if (has_finding()) return code(exit_status::missed);
  if (!inconclusive_reason().empty()) return code(exit_status::inconclusive);
  return code(exit_status::held);
}

std::string comparison::inconclusive_reason() const {
  if (cases.empty())
    return fmt::format("no case in common ({} in BASE only, {} in NEW only): nothing was compared",
                       missing.size(), added.size());
  std::size_t judged = 0;
  for (const auto& c : cases) {
    for (const auto& m : c.metrics) judged += !m.base.empty() && !m.next.empty() ? 1 : 0;
  }
  if (judged == 0) return "no matched case has a figure on both sides";
  if (inconclusive > 0)
    return fmt::format(
        "{} metric(s) could not be judged (see the notes: too few runs, runs that vary more "
        "than the threshold allows, or a noisy run)",
        inconclusive);
  return {};
}

void result_set::add(const result_set& more) {
  const std::size_t offset = files.size();
  files.insert(files.end(), more.files.begin(), more.files.end());
  contexts.insert(contexts.end(), more.contexts.begin(), more.contexts.end());
  results.insert(results.end(), more.results.begin(), more.results.end());
  for (const std::size_t r : more.run_of) run_of.push_back(offset + r);
}

std::vector<std::vector<double>> repetitions_by_run(
    const std::vector<std::vector<const case_result*>>& runs, const std::string& metric) {
  std::vector<std::vector<double>> out;
  for (const auto& run : runs) {
    std::vector<double> reps;
    for (const auto* r : run) {
      const auto v = repetition_values(*r, headline_for(metric));
      reps.insert(reps.end(), v.begin(), v.end());
    }
    if (!reps.empty()) out.push_back(std::move(reps));
  }
  return out;
}

std::vector<double> run_values(const std::vector<std::vector<const case_result*>>& runs,
                               const std::string& metric) {
  std::vector<double> out;
  for (auto& reps : repetitions_by_run(runs, metric)) out.push_back(median_of(std::move(reps)));
  return out;
}

// Under no change at all, Benjamini-Hochberg keeps the chance of any significant metric below
// alpha, so a sweep of hundreds of metrics does not raise false alarms from noise alone. What is
// not a finding is "no significant change" only where the runs could have shown one.
judged_counts judge_metrics(const std::vector<metric_change*>& metrics, const compare_options& o) {
  std::vector<metric_change*> tested;
  std::vector<double> p;
  for (auto* m : metrics) {
    if (m->test.p_value) {
      tested.push_back(m);
      p.push_back(*m->test.p_value);
    }
  }
  const std::vector<double> q = benjamini_hochberg(p);
  for (std::size_t i = 0; i < tested.size(); ++i) tested[i]->q_value = q[i];
  judged_counts counts;
  for (auto* m : metrics) {
    if (m->base.empty() || m->next.empty()) continue;  // nothing to judge: listed, not counted
    const double worse = m->higher_is_better ? -m->test.change : m->test.change;
    m->significant = m->q_value && *m->q_value < o.alpha;
    // Several new runs: the change must show in each of them (run_test.h).
    const bool every_run = m->test.p_each && *m->test.p_each < o.alpha;
    m->regression = m->significant && every_run && worse > m->threshold;
    m->improvement = m->significant && every_run && -worse > m->threshold;
    // Never a regression for want of a CPU: what the new runs' waits explain cannot be told.
    std::string explained = m->regression ? noise_explanation(*m) : std::string();
    if (!explained.empty()) {
      m->regression = false;
      m->inconclusive = true;
    }
    counts.regressions += m->regression ? 1 : 0;
    counts.improvements += m->improvement ? 1 : 0;
    std::vector<std::string> notes;
    if (m->base_noisy_runs > 0)
      notes.push_back(fmt::format("{} noisy baseline run(s) left out", m->base_noisy_runs));
    if (!explained.empty()) {
      notes.push_back("a regression-sized change its host noise explains: " + explained);
    } else if (m->significant && !every_run && std::abs(worse) > m->threshold) {
      m->inconclusive = true;
      notes.push_back(
          fmt::format("the mean moved {:+.1f}%, but not every new run did: one run's "
                      "fluke, or a change too small for a single run to show",
                      m->test.change * 100));
    } else if (!m->regression && !m->improvement && !m->significant) {
      if (std::string need = runs_needed_note(m->test, m->threshold); !need.empty()) {
        m->inconclusive = true;
        notes.push_back(std::move(need));
      } else if (m->test.mde) {
        notes.push_back(fmt::format("detects changes beyond {:.1f}%", *m->test.mde * 100));
      }
    }
    if (!m->note.empty()) notes.insert(notes.begin(), m->note);
    m->note = fmt::format("{}", fmt::join(notes, "; "));
    counts.inconclusive += m->inconclusive ? 1 : 0;
  }
  return counts;
}

result_set load_results(const std::string& path) {
  namespace fs = std::filesystem;
  result_set out;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.is_regular_file() &&
          (e.path().extension() == ".json" || e.path().extension() == ".jsonl"))
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) throw compare_error(file_error(path, "folder holds no .json results file"));
    for (const auto& f : files) load_file(f, out);
  } else if (fs::exists(path, ec)) {
    load_file(path, out);
  } else {
    throw compare_error(file_error(path, "no such file or folder"));
  }
  return out;
}

std::string case_key(const test_case& c) {
  std::string key = fmt::format("{} {} {}", c.transport, c.test, to_string(c.pattern));
  if (!c.tls.empty()) key += " tls=" + c.tls;
  key += " iface=" + (c.iface.empty() ? std::string("(route)") : c.iface);
  if (!c.target.empty()) key += " target=" + c.target;
  key += fmt::format(" mem={},{} size={}", to_string(c.client_memory), to_string(c.server_memory),
                     format_size(c.size_bytes));
  return key;
}

comparison compare_results(const result_set& base, const result_set& next,
                           const compare_options& options) {
  comparison out;
  out.options = options;
  out.base_files = base.files;
  out.new_files = next.files;
  const auto b = by_key(base);
  const auto n = by_key(next);
  for (const auto& [key, bs] : b) {
    const auto it = n.find(key);
    if (it == n.end()) {
      out.missing.push_back(key);
      continue;
    }
    const side_cases& ns = it->second;
    case_comparison c;
    c.key = key;
    c.test = bs.results.front()->test;
    c.base_status = status_of(bs);
    c.new_status = status_of(ns);
    c.base_lanes = lanes_of(bs);
    c.new_lanes = lanes_of(ns);
    c.provenance_changed =
        !c.base_lanes.empty() && !c.new_lanes.empty() && c.base_lanes != c.new_lanes;
    c.status_regressed = all_ok(bs) && !all_ok(ns);
    c.noisy = noisy_of(ns.runs, "new");
    std::vector<std::string> metrics;
    if (c.test.pattern == pattern_kind::pingpong) {
      metrics = {"latency p50", "latency p99"};
    } else {
      metrics = {"bandwidth"};
    }
    for (const auto& m : metrics) {
      metric_change mc = compare_metric(m, bs, ns, options);
      if (mc.base.empty() && mc.next.empty()) continue;
      c.metrics.push_back(std::move(mc));
    }
    out.provenance_changes += c.provenance_changed ? 1 : 0;
    out.status_changes += c.status_regressed ? 1 : 0;
    out.cases.push_back(std::move(c));
  }
  for (const auto& [key, ns] : n) {
    if (b.count(key) == 0) out.added.push_back(key);
  }
  std::vector<metric_change*> all;
  for (auto& c : out.cases) {
    for (auto& m : c.metrics) all.push_back(&m);
  }
  const judged_counts counts = judge_metrics(all, options);
  out.regressions = counts.regressions;
  out.improvements = counts.improvements;
  // A new run measured while its host took the CPU away: its "no change" says nothing.
  for (auto& c : out.cases) {
    for (auto& m : c.metrics) {
      if (c.noisy.empty() || m.regression || m.improvement || m.base.empty() || m.next.empty() ||
          m.inconclusive)
        continue;
      m.inconclusive = true;
      m.note = "noisy: " + c.noisy + (m.note.empty() ? "" : "; " + m.note);
    }
  }
  for (const auto& c : out.cases) {
    for (const auto& m : c.metrics) out.inconclusive += m.inconclusive ? 1 : 0;
  }
  return out;
}

}  // namespace pairperf
