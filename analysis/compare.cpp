#include "analysis/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>

#include "core/exit_codes.h"
#include "core/stats.h"
#include "core/units.h"
#include "host/noise.h"

namespace pairperf {
namespace {

constexpr std::size_t exact_limit = 25;

// Coefficients of the q-binomial [n1+n2 choose n1]: how many orderings give each U.
std::vector<double> u_distribution(std::size_t n1, std::size_t n2) {
  // poly[k] = [n choose k]_q, built up over n by [n,k] = [n-1,k-1] + q^k [n-1,k].
  std::vector<std::vector<double>> poly(n1 + 1);
  poly[0] = {1.0};
  for (std::size_t n = 1; n <= n1 + n2; ++n) {
    for (std::size_t k = std::min(n, n1); k >= 1; --k) {
      std::vector<double> next(k * (n - k) + 1, 0.0);
      const auto& left = poly[k - 1];  // [n-1, k-1]
      for (std::size_t i = 0; i < left.size() && i < next.size(); ++i) next[i] += left[i];
      const auto& right = poly[k];  // [n-1, k], shifted by k
      for (std::size_t i = 0; i < right.size() && i + k < next.size(); ++i) next[i + k] += right[i];
      poly[k] = std::move(next);
    }
  }
  return poly[n1];
}

// The Hodges-Lehmann estimate of the relative change: the median over every pair (base, new)
// of new / base, minus one. It uses every repetition, so it moves less with noise than the
// ratio of the two medians.
double ratio_change(const std::vector<double>& base, const std::vector<double>& next) {
  std::vector<double> logs;
  logs.reserve(base.size() * next.size());
  for (const double b : base) {
    for (const double n : next) {
      if (b > 0 && n > 0) logs.push_back(std::log(n / b));
    }
  }
  if (logs.empty()) return 0;
  return std::exp(median_of(std::move(logs))) - 1;
}

std::vector<double> ranks_of(const std::vector<double>& all, bool& ties, double& tie_term) {
  std::vector<std::size_t> order(all.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](auto x, auto y) { return all[x] < all[y]; });
  std::vector<double> ranks(all.size());
  ties = false;
  tie_term = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && all[order[j + 1]] == all[order[i]]) ++j;
    const double rank = (static_cast<double>(i + j) / 2) + 1;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    const double t = static_cast<double>(j - i + 1);
    if (t > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j + 1;
  }
  return ranks;
}

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
        fmt::format("schema '{}' is not pairperf.result (compare takes the results of `pairperf "
                    "run --json`)",
                    schema.empty() ? "(none)" : schema)));
  }
  if (version.rfind("1.", 0) != 0) {
    throw compare_error(file_error(
        path.string(),
        fmt::format("schema version {} is not one this pairperf reads (1.x); compare files "
                    "written by the same major version",
                    version.empty() ? "(none)" : version)));
  }
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
  } catch (const std::exception& e) {
    throw compare_error(file_error(path.string(), fmt::format("malformed result ({})", e.what())));
  }
}

headline headline_for(const std::string& metric) {
  if (metric == "bandwidth") return headline::bandwidth;
  return metric == "latency p50" ? headline::latency_p50 : headline::latency_p99;
}

struct side_cases {
  std::vector<const case_result*> results;
};

std::map<std::string, side_cases> by_key(const result_set& s) {
  std::map<std::string, side_cases> out;
  for (const auto& r : s.results) out[case_key(r.test)].results.push_back(&r);
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

// The first noisy result of a side, as "SIDE: reason"; empty when all were quiet.
std::string noisy_of(const side_cases& s, const char* side) {
  for (const auto* r : s.results) {
    if (is_noisy(r->host_noise)) return fmt::format("{}: {}", side, noise_reason(r->host_noise));
  }
  return {};
}

bool all_ok(const side_cases& s) {
  return std::all_of(s.results.begin(), s.results.end(),
                     [](const case_result* r) { return r->status == case_status::ok; });
}

metric_change compare_metric(const std::string& metric, const side_cases& base,
                             const side_cases& next, const compare_options& o) {
  metric_change m;
  m.metric = metric;
  m.higher_is_better = metric == "bandwidth";
  for (const auto* r : base.results) {
    const auto v = repetition_values(*r, headline_for(metric));
    m.base.insert(m.base.end(), v.begin(), v.end());
  }
  for (const auto* r : next.results) {
    const auto v = repetition_values(*r, headline_for(metric));
    m.next.insert(m.next.end(), v.begin(), v.end());
  }
  if (m.base.empty() || m.next.empty()) {
    m.note = "no value on one side";
    return m;
  }
  m.base_median = median_of(m.base);
  m.new_median = median_of(m.next);
  m.change = ratio_change(m.base, m.next);
  const double worse = m.higher_is_better ? -m.change : m.change;
  if (m.base.size() < 2 || m.next.size() < 2) {
    m.note = "one value on a side: not tested (run with --repeat)";
    return m;
  }
  m.p_value = mann_whitney_p(m.base, m.next);
  // significant/regression/improvement are decided in compare_results, once every p is known.
  (void)worse;
  if (mann_whitney_min_p(m.base.size(), m.next.size()) >= o.alpha) {
    m.note = fmt::format("{} and {} values cannot reach p < {} (4 a side can)", m.base.size(),
                         m.next.size(), o.alpha);
  }
  return m;
}

// Judged once significance is known: what is not a finding is "no significant change" only when
// the data could have shown a change of the threshold's size.
void judge_detectability(metric_change& m, const compare_options& o) {
  m.threshold = m.metric == "latency p99" ? o.tail_threshold : o.threshold;
  m.detect = detectable_change(m.base, m.next, o.alpha, m.threshold);
  if (m.regression || m.improvement || m.significant) return;
  if (m.base.empty() || m.next.empty()) return;  // nothing to judge: listed, not counted
  const auto needs = [&] {
    return m.detect.needed > 0 ? fmt::format("needs about {} repetitions a side", m.detect.needed)
                               : std::string("needs --repeat 4 or more on both sides");
  };
  if (m.base.size() < 2 || m.next.size() < 2) {
    m.inconclusive = true;
    m.note = fmt::format("one value on a side: {}", needs());
  } else if (!m.detect.mde) {
    m.inconclusive = true;
    m.note = fmt::format("{} and {} values cannot reach p < {}: {}", m.base.size(), m.next.size(),
                         o.alpha, needs());
  } else if (*m.detect.mde > m.threshold) {
    m.inconclusive = true;
    m.note = fmt::format("noise ±{:.1f}%, detects only changes beyond {:.1f}%, {}",
                         m.detect.noise.value_or(0) * 100, *m.detect.mde * 100, needs());
  } else {
    m.note = fmt::format("detects changes beyond {:.1f}%", *m.detect.mde * 100);
  }
}

// A sweep compares hundreds of metrics at once: without a correction, noise alone would flag
// some every night. Benjamini-Hochberg adjusts the p-values over every tested metric of the
// comparison (false discovery rate at alpha; under no change at all, the chance of any
// significant metric stays below alpha), then each metric is judged on its adjusted value.
void decide(comparison& out, const compare_options& o) {
  std::vector<metric_change*> tested;
  for (auto& c : out.cases) {
    for (auto& m : c.metrics) {
      if (m.p_value) tested.push_back(&m);
    }
  }
  std::sort(tested.begin(), tested.end(), [](const metric_change* a, const metric_change* b) {
    return *a->p_value < *b->p_value;
  });
  const double total = static_cast<double>(tested.size());
  double running = 1.0;
  for (std::size_t i = tested.size(); i-- > 0;) {
    running = std::min(running, *tested[i]->p_value * total / static_cast<double>(i + 1));
    tested[i]->q_value = std::min(1.0, running);
  }
  for (auto& c : out.cases) {
    for (auto& m : c.metrics) {
      if (!m.q_value) continue;
      const double worse = m.higher_is_better ? -m.change : m.change;
      const double threshold = m.metric == "latency p99" ? o.tail_threshold : o.threshold;
      m.significant = *m.q_value < o.alpha;
      m.regression = m.significant && worse > threshold;
      m.improvement = m.significant && -worse > threshold;
      out.regressions += m.regression ? 1 : 0;
      out.improvements += m.improvement ? 1 : 0;
    }
  }
  for (auto& c : out.cases) {
    for (auto& m : c.metrics) {
      judge_detectability(m, o);
      if (!c.noisy.empty() && !m.regression && !m.improvement && !m.base.empty() &&
          !m.next.empty()) {
        m.inconclusive = true;
        m.note = "noisy: " + c.noisy + (m.note.empty() ? "" : "; " + m.note);
      }
      out.inconclusive += m.inconclusive ? 1 : 0;
    }
  }
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
        "{} metric(s) could not be judged (see the notes: too few repetitions or "
        "too much noise for the threshold)",
        inconclusive);
  return {};
}

double mann_whitney_p(std::span<const double> a, std::span<const double> b) {
  const std::size_t n1 = a.size();
  const std::size_t n2 = b.size();
  if (n1 == 0 || n2 == 0) return 1.0;
  std::vector<double> all(a.begin(), a.end());
  all.insert(all.end(), b.begin(), b.end());
  bool ties = false;
  double tie_term = 0;
  const std::vector<double> ranks = ranks_of(all, ties, tie_term);
  const double r1 = std::accumulate(ranks.begin(), ranks.begin() + static_cast<long>(n1), 0.0);
  const double u1 = r1 - static_cast<double>(n1 * (n1 + 1)) / 2;
  const double nn = static_cast<double>(n1 * n2);
  if (!ties && n1 <= exact_limit && n2 <= exact_limit) {
    const std::vector<double> dist = u_distribution(n1, n2);
    const double total = std::accumulate(dist.begin(), dist.end(), 0.0);
    const auto u = static_cast<std::size_t>(std::llround(u1));
    double lower = 0;  // P(U <= u)
    for (std::size_t i = 0; i <= u && i < dist.size(); ++i) lower += dist[i];
    double upper = 0;  // P(U >= u)
    for (std::size_t i = u; i < dist.size(); ++i) upper += dist[i];
    return std::min(1.0, 2 * std::min(lower, upper) / total);
  }
  const double n = static_cast<double>(n1 + n2);
  const double mu = nn / 2;
  const double var = nn / 12 * ((n + 1) - tie_term / (n * (n - 1)));
  if (var <= 0) return 1.0;  // every value equal
  const double z = std::max(0.0, std::abs(u1 - mu) - 0.5) / std::sqrt(var);
  return std::min(1.0, std::erfc(z / std::sqrt(2.0)));
}

double mann_whitney_min_p(std::size_t n1, std::size_t n2) {
  if (n1 == 0 || n2 == 0) return 1.0;
  if (n1 > exact_limit || n2 > exact_limit) return 0.0;
  // The most extreme ordering is one of C(n1+n2, n1); two-sided doubles it.
  double combos = 1;
  for (std::size_t i = 1; i <= n1; ++i)
    combos = combos * static_cast<double>(n2 + i) / static_cast<double>(i);
  return std::min(1.0, 2 / combos);
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
    const std::string noisy_base = noisy_of(bs, "base");
    const std::string noisy_new = noisy_of(ns, "new");
    c.noisy = noisy_base.empty() ? noisy_new
                                 : (noisy_new.empty() ? noisy_base : noisy_base + "; " + noisy_new);
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
  decide(out, options);
  return out;
}

}  // namespace pairperf
