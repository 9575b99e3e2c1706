#include "analysis/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "core/exit_codes.h"
#include "core/stats.h"
#include "host/noise.h"

namespace pairperf {
namespace {

using run_results = std::vector<const case_result*>;

std::string text_at(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// FNV-1a: the permutations of a series depend only on its name, on every platform.
std::uint64_t seed_of(const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// The runs in time order (file name order when a file has no time), the newest `last` of them.
std::vector<std::size_t> order_runs(const result_set& s, std::size_t last, std::string& by) {
  std::vector<std::size_t> order(s.files.size());
  std::iota(order.begin(), order.end(), 0);
  const bool timed = std::all_of(s.contexts.begin(), s.contexts.end(),
                                 [](const auto& c) { return !text_at(c, "time_utc").empty(); });
  by = timed ? "time" : "file name";
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (timed) {
      const std::string ta = text_at(s.contexts[a], "time_utc");
      const std::string tb = text_at(s.contexts[b], "time_utc");
      if (ta != tb) return ta < tb;
    }
    return s.files[a] < s.files[b];
  });
  if (order.size() > last) order.erase(order.begin(), order.end() - static_cast<long>(last));
  return order;
}

std::set<std::string> lanes_in(const run_results& run) {
  std::set<std::string> lanes;
  for (const auto* r : run) {
    if (!r->provenance) continue;
    for (const auto& l : r->provenance->lanes) lanes.insert(l.transport + "/" + l.device);
  }
  return lanes;
}

bool all_ok(const run_results& run) {
  return std::all_of(run.begin(), run.end(),
                     [](const case_result* r) { return r->status == case_status::ok; });
}

bool noisy(const run_results& run) {
  return std::any_of(run.begin(), run.end(),
                     [](const case_result* r) { return is_noisy(r->host_noise); });
}

std::string change_verdict(double change, bool higher_is_better, double threshold) {
  const double worse = higher_is_better ? -change : change;
  if (worse > threshold) return "regression";
  if (-worse > threshold) return "improvement";
  return "shift";
}

// Change points of one series (values in log space, so a step is a ratio), with the medians of
// the levels on either side.
void find_changes(history_series& s, const history_options& o, double threshold) {
  std::vector<std::size_t> at;  // run index of each present value
  std::vector<double> logs;
  for (std::size_t i = 0; i < s.values.size(); ++i) {
    if (s.values[i] && *s.values[i] > 0) {
      at.push_back(i);
      logs.push_back(std::log(*s.values[i]));
    }
  }
  e_divisive_options eo = o.change;
  eo.seed = seed_of(s.key + " " + s.metric);
  if (logs.empty()) {
    s.level_since = 0;
    return;
  }
  const std::vector<change_point> cps = e_divisive(logs, eo);
  std::vector<std::size_t> cuts{0};
  for (const auto& cp : cps) cuts.push_back(cp.index);
  cuts.push_back(logs.size());
  const auto level = [&](std::size_t from, std::size_t to) {
    std::vector<double> v;
    for (std::size_t i = from; i < to; ++i) v.push_back(*s.values[at[i]]);
    return median_of(std::move(v));
  };
  for (std::size_t c = 0; c < cps.size(); ++c) {
    history_change h;
    h.run = at[cps[c].index];
    h.before = level(cuts[c], cuts[c + 1]);
    h.after = level(cuts[c + 1], cuts[c + 2]);
    h.change = h.before > 0 ? h.after / h.before - 1 : 0;
    h.p_value = cps[c].p_value;
    h.verdict = change_verdict(h.change, s.higher_is_better, threshold);
    s.changes.push_back(h);
  }
  s.level_since = cps.empty() ? at.front() : at[cps.back().index];
}

// The newest run(s) against the quiet runs of their level, at most `window` of them.
void judge_newest(history_series& s, const std::vector<run_results>& runs, const history_options& o,
                  double threshold) {
  const std::size_t newest = s.values.size() - 1;
  if (!s.values[newest]) return;
  metric_change m;
  m.metric = s.metric;
  m.higher_is_better = s.higher_is_better;
  m.threshold = threshold;
  // The judged runs: the newest `judged` that have this series, never before the level's start.
  std::size_t first_judged = newest;
  std::vector<run_results> judged;
  for (std::size_t i = newest + 1; i-- > *s.level_since && judged.size() < o.judged;) {
    if (!s.values[i]) continue;
    m.next.insert(m.next.begin(), *s.values[i]);
    judged.insert(judged.begin(), runs[i]);
    first_judged = i;
  }
  // The level's runs before them, noisy ones left out (as compare does), unless every one of
  // them was noisy: then they are judged, and the newest run's note says the host was noisy.
  std::vector<run_results> base_runs;
  std::vector<double> noisy_values;
  std::vector<run_results> noisy_runs;
  for (std::size_t i = first_judged; i-- > *s.level_since && m.base.size() < o.window;) {
    if (!s.values[i]) continue;
    if (noisy(runs[i])) {
      ++m.base_noisy_runs;
      if (noisy_values.size() < o.window) {
        noisy_values.push_back(*s.values[i]);
        noisy_runs.push_back(runs[i]);
      }
      continue;
    }
    m.base.push_back(*s.values[i]);
    base_runs.push_back(runs[i]);
  }
  if (m.base.empty() && !noisy_values.empty()) {
    m.base = std::move(noisy_values);
    base_runs = std::move(noisy_runs);
    m.base_noisy_runs = 0;
  } else {
    m.base_loaded_noise = run_exposures(noisy_runs, s.metric);
    m.base_loaded_range = run_ranges(noisy_runs, s.metric);
    m.base_loaded = std::move(noisy_values);
  }
  m.next_noise = run_exposures(judged, s.metric);
  m.base_noise = run_exposures(base_runs, s.metric);
  s.newest_noisy = std::any_of(judged.begin(), judged.end(), noisy);
  if (!m.base.empty()) {
    m.base_median = median_of(m.base);
    m.new_median = median_of(m.next);
    m.test = test_runs(m.base, m.next, o.judge.alpha, threshold);
  }
  s.latest = std::move(m);
}

std::vector<std::string> metrics_of(const test_case& t) {
  if (t.pattern == pattern_kind::pingpong) return {"latency p50", "latency p99"};
  return {"bandwidth"};
}

}  // namespace

history read_history(const result_set& all, const history_options& options) {
  history h;
  h.options = options;
  const std::vector<std::size_t> order = order_runs(all, options.last, h.ordered_by);
  std::map<std::size_t, std::size_t> position;  // file index -> position in time order
  for (std::size_t i = 0; i < order.size(); ++i) {
    position[order[i]] = i;
    const nlohmann::json& c = all.contexts[order[i]];
    h.runs.push_back({all.files[order[i]], text_at(c, "time_utc"), text_at(c, "label")});
  }
  // key -> one run_results per run (empty: the run lacks the case)
  std::map<std::string, std::vector<run_results>> cases;
  for (std::size_t i = 0; i < all.results.size(); ++i) {
    const auto p = position.find(i < all.run_of.size() ? all.run_of[i] : 0);
    if (p == position.end()) continue;
    auto& per_run = cases[case_key(all.results[i].test)];
    per_run.resize(order.size());
    per_run[p->second].push_back(&all.results[i]);
  }
  const std::size_t newest = order.empty() ? 0 : order.size() - 1;
  for (const auto& [key, per_run] : cases) {
    const test_case& test =
        std::find_if(per_run.begin(), per_run.end(), [](const auto& r) { return !r.empty(); })
            ->front()
            ->test;
    if (newest > 0 && !per_run[newest].empty() && !per_run[newest - 1].empty()) {
      if (all_ok(per_run[newest - 1]) && !all_ok(per_run[newest])) h.status_changes.push_back(key);
      const auto before = lanes_in(per_run[newest - 1]);
      const auto now = lanes_in(per_run[newest]);
      if (!before.empty() && !now.empty() && before != now) h.provenance_changes.push_back(key);
    }
    for (const std::string& metric : metrics_of(test)) {
      history_series s;
      s.key = key;
      s.test = test;
      s.metric = metric;
      s.higher_is_better = metric == "bandwidth";
      bool any = false;
      for (const auto& run : per_run) {
        const std::vector<double> v = run_values({run}, metric);
        s.values.push_back(v.empty() ? std::nullopt : std::optional<double>(v.front()));
        any = any || !v.empty();
      }
      if (!any) continue;
      const double threshold =
          metric == "latency p99" ? options.judge.tail_threshold : options.judge.threshold;
      find_changes(s, options, threshold);
      h.change_points += s.changes.size();
      judge_newest(s, per_run, options, threshold);
      h.series.push_back(std::move(s));
    }
  }
  std::vector<metric_change*> latest;
  for (auto& s : h.series) {
    if (s.latest) latest.push_back(&*s.latest);
  }
  const judged_counts counts = judge_metrics(latest, options.judge);
  h.regressions = counts.regressions;
  h.improvements = counts.improvements;
  h.inconclusive = counts.inconclusive;
  // A newest run measured while its host took the CPU away: its "no change" says nothing.
  for (auto& s : h.series) {
    if (!s.latest || !s.newest_noisy || s.latest->regression || s.latest->improvement ||
        s.latest->inconclusive || s.latest->base.empty())
      continue;
    s.latest->inconclusive = true;
    s.latest->note = "noisy: a judged run's host took the CPU" +
                     (s.latest->note.empty() ? "" : "; " + s.latest->note);
    ++h.inconclusive;
  }
  return h;
}

int history::exit_code() const {
  if (regressions + status_changes.size() + provenance_changes.size() > 0)
    return code(exit_status::missed);
  if (!inconclusive_reason().empty()) return code(exit_status::inconclusive);
  return code(exit_status::held);
}

std::string history::inconclusive_reason() const {
  if (runs.size() < 2) return fmt::format("{} run: a history needs 2 or more", runs.size());
  const bool judged = std::any_of(series.begin(), series.end(), [](const history_series& s) {
    return s.latest && !s.latest->base.empty();
  });
  if (!judged) return "the newest run shares no measured case with the runs before it";
  if (inconclusive > 0)
    return fmt::format(
        "{} metric(s) of the newest run could not be judged against their level (too few runs "
        "since the last change point, or runs that vary more than the threshold allows)",
        inconclusive);
  return {};
}

}  // namespace pairperf
