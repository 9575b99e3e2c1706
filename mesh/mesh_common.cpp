#include "mesh/mesh_common.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "core/errors.h"
#include "core/exit_codes.h"
#include "core/output.h"
#include "core/self_probe.h"
#include "core/units.h"
#include "harness/context.h"
#include "harness/token.h"
#include "transports/registry.h"

namespace pairperf::mesh {

namespace {

// --transport, else the registry's transport with doctor's reachability role.
const transport_entry* mesh_transport(const std::string& name) {
  const auto& registry = transport_registry::instance();
  if (!name.empty()) {
    const transport_entry* entry = registry.find(name);
    if (entry == nullptr) throw usage_error(fmt::format("unknown transport '{}'", name));
    return entry;
  }
  for (const auto& e : registry.all()) {
    if (e.doctor && e.doctor->what == doctor_probe::role::reach) return &e;
  }
  throw std::logic_error("no transport offers the reachability role");
}

}  // namespace

nlohmann::json application_libraries() {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& e : transport_registry::instance().all()) {
    if (e.doctor && e.doctor->what == doctor_probe::role::application && e.describe_library)
      out[e.name] = e.describe_library();
  }
  return out;
}

// Each node's gloo devices, from the application library's description (empty: unknown).
static std::vector<gloo_side> gloo_sides(const std::vector<mesh_node>& nodes) {
  std::vector<gloo_side> out;
  for (const auto& n : nodes) {
    gloo_side g;
    for (const auto& [name, description] : n.libraries.items()) {
      if (!g.known) g = gloo_side_from(description);
    }
    out.push_back(std::move(g));
  }
  return out;
}

// The node comparison, asymmetric links, and gloo between every pair (measured where the mesh ran
// gloo's own connection).
static std::vector<finding> mesh_findings(const mesh_plan& plan,
                                          const std::vector<mesh_node>& nodes,
                                          const std::vector<std::string>& names,
                                          const std::vector<pair_result>& pairs,
                                          const outlier_rule& rule) {
  std::vector<nlohmann::json> hosts, envs;
  std::vector<std::string> reached_at;
  for (const auto& n : nodes) {
    hosts.push_back(n.host);
    envs.push_back(n.env);
    reached_at.push_back(n.address);
  }
  std::vector<finding> findings = compare_nodes(names, hosts, envs);
  for (auto& f : find_asymmetric(names, pairs, rule)) findings.push_back(std::move(f));
  const transport_entry* carried = transport_registry::instance().find(plan.transport);
  const bool gloo_measured = carried != nullptr && carried->doctor &&
                             carried->doctor->what == doctor_probe::role::application;
  for (auto& f : judge_gloo(names, hosts, reached_at, gloo_sides(nodes), pairs, gloo_measured))
    findings.push_back(std::move(f));
  return findings;
}

mesh_plan make_plan(const mesh_args& a, int nodes) {
  mesh_plan p;
  p.config.duration = parse_duration(a.duration);
  p.config.timeouts.connect = parse_duration(a.t_connect);
  p.config.timeouts.per_case = parse_duration(a.t_case);
  const transport_entry* entry = mesh_transport(a.transport);
  p.transport = entry->name;
  p.tests = a.tests;
  if (p.tests.empty()) {  // the transport's first two-sided latency and bandwidth tests
    bool lat = false, bw = false;
    for (const auto& t : entry->tests) {
      if (t.data_op != op_kind::send) continue;
      bool& have = t.pattern == pattern_kind::pingpong ? lat : bw;
      if (t.pattern == pattern_kind::stream_bi || have) continue;
      have = true;
      p.tests.emplace_back(t.name);
    }
  }
  for (const auto& name : p.tests) {
    const test_spec* spec = transport_registry::instance().find_test(entry->name, name);
    if (spec == nullptr)
      throw usage_error(fmt::format("transport {} has no test {}", entry->name, name));
    const bool lat = spec->pattern == pattern_kind::pingpong;
    for (auto size : parse_size_list(a.sizes.empty() ? (lat ? "8" : "1M") : a.sizes)) {
      test_case c;
      c.index = p.cases.size();
      c.transport = entry->name;
      c.test = name;
      c.pattern = spec->pattern;
      c.iface = a.iface;
      c.size_bytes = size;
      p.cases.push_back(c);
    }
  }
  for (const auto& e : a.expect) p.expectations.push_back(parse_expectation(e));
  p.schedule = mesh_schedule(nodes, parse_mesh_pattern(a.pattern), !a.one_way);
  if (a.retest_bw <= 0 || a.retest_bw >= 1)
    throw usage_error("--retest-bw must be between 0 and 1");
  if (a.retest_lat <= 1) throw usage_error("--retest-lat must be above 1");
  const auto& t = p.config.timeouts;
  p.pair_bound_s = std::chrono::duration<double>(t.connect + 2 * t.handshake +
                                                 static_cast<long>(p.cases.size()) * 2 *
                                                     (t.per_case + t.handshake))
                       .count();
  return p;
}

void name_nodes(std::vector<mesh_node>& nodes) {
  // A hostname several nodes share becomes host:port (each has its own server port), or
  // host#rank where the ports repeat too.
  std::map<std::string, int> count;
  std::map<std::string, int> with_port;
  for (const auto& n : nodes) {
    ++count[n.name];
    ++with_port[fmt::format("{}:{}", n.name, n.port)];
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto& n = nodes[i];
    if (count[n.name] < 2) continue;
    const std::string host_port = fmt::format("{}:{}", n.name, n.port);
    n.name = n.port != 0 && with_port[host_port] == 1 ? host_port : fmt::format("{}#{}", n.name, i);
  }
}

pair_result unreachable_pair(const node_pair& pair, const std::vector<test_case>& cases,
                             const std::string& why, const std::string& code) {
  pair_result out{pair, {}, {}, "unreachable"};
  for (const auto& c : cases) {
    case_result r;
    r.test = c;
    r.status = case_status::unreachable;
    r.message = why;
    r.error_code = code;
    out.results.push_back(r);
  }
  return out;
}

void judge(pair_result& p) {
  p.verdict = "ok";
  for (const auto& r : p.results) {
    if (r.status == case_status::unreachable) p.verdict = "unreachable";
    if (r.status == case_status::error && p.verdict == "ok") p.verdict = "error";
  }
}

namespace {

// The pairs not measured, in the matrices' verdicts and as their own list with why.
void add_not_measured(nlohmann::json& mesh, const mesh_gaps& gaps,
                      const std::vector<std::string>& names) {
  mesh["not_measured"] = nlohmann::json::array();
  for (const auto& g : gaps.pairs) {
    const auto c = static_cast<std::size_t>(g.pair.client);
    const auto v = static_cast<std::size_t>(g.pair.server);
    mesh["verdict"][c][v] = "not measured";
    mesh["not_measured"].push_back({{"client", g.pair.client},
                                    {"server", g.pair.server},
                                    {"client_name", names.at(c)},
                                    {"server_name", names.at(v)},
                                    {"why", g.why}});
  }
}

// Each retest's verdict on its pair: a retest that failed fails it; an outlier fine alone was
// contention, and one still an outlier alone a slow link, unless its processes waited for a CPU
// enough to explain it (noisy). Pairs retested only to see both directions alone keep theirs.
void apply_retests(std::vector<pair_result>& pairs, const std::vector<pair_result>& retests,
                   const outlier_rule& rule) {
  // Retested as outliers (slow link or contention), or only to see both directions of a link
  // alone (their verdict stays as it was).
  const std::vector<std::size_t> outliers = find_outliers(pairs, rule);
  for (const auto& r : retests) {
    for (std::size_t idx = 0; idx < pairs.size(); ++idx) {
      auto& p = pairs[idx];
      if (!(p.pair == r.pair)) continue;
      p.retest = r.results;
      if (r.verdict != "ok") {
        p.verdict = r.verdict;
        continue;
      }
      if (std::find(outliers.begin(), outliers.end(), idx) == outliers.end()) continue;
      // Alone it is fine: contention. Still an outlier alone: a slow link, unless its processes
      // waited for a CPU enough to explain it (noisy).
      p.verdict = retest_verdict(pairs, idx, r.results, rule);
    }
  }
}

// A node whose process may use less than one CPU (its cgroup's limit) measures its limit, not
// its links (a throttled process waits more than its meter shows): its pairs are never slow
// links, and its links never asymmetric.
bool cpu_limited(const mesh_node& node) {
  const nlohmann::json& host = node.host;
  const auto process = host.find("process");
  if (process == host.end() || !process->is_object()) return false;
  const auto quota = process->find("cpu_quota");
  return quota != process->end() && quota->is_number() && quota->get<double>() < 1.0;
}

// The slow links of CPU-limited nodes are noisy: their figures say nothing of the link.
void excuse_cpu_limited(const std::vector<mesh_node>& nodes, std::vector<pair_result>& pairs) {
  for (auto& p : pairs) {
    if (p.verdict == "slow link" &&
        (cpu_limited(nodes.at(static_cast<std::size_t>(p.pair.client))) ||
         cpu_limited(nodes.at(static_cast<std::size_t>(p.pair.server)))))
      p.verdict = "noisy";
  }
}

// No asymmetric link of a CPU-limited node is a finding (`side` names the link's nodes).
void drop_cpu_limited_asymmetry(const std::vector<mesh_node>& nodes,
                                const std::vector<std::string>& names,
                                std::vector<finding>& findings) {
  std::erase_if(findings, [&](const finding& f) {
    if (f.subject != "asymmetric link") return false;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!cpu_limited(nodes[i])) continue;
      const std::string& n = names[i];
      if (f.side == n || f.side.rfind(n + ",", 0) == 0 ||
          (f.side.size() > n.size() &&
           f.side.compare(f.side.size() - n.size() - 1, std::string::npos, "," + n) == 0))
        return true;
    }
    return false;
  });
}

// --expect on each pair's deciding results (the retest's where there is one); the cases missed.
std::size_t check_expectations(const mesh_plan& plan, std::vector<pair_result>& pairs) {
  std::size_t failed_checks = 0;
  for (auto& p : pairs) {
    for (auto& r : p.retest.empty() ? p.results : p.retest) {
      apply_expectations(plan.expectations, r);
      failed_checks += r.status == case_status::fail ? 1 : 0;
    }
  }
  return failed_checks;
}

// The pairs by verdict, as the report and the exit code count them.
struct pair_counts {
  std::size_t bad = 0, slow = 0, noisy = 0;
  std::string busy_hosts;  // the hosts that oversubscribed their CPUs, where pairs stayed noisy
};

// The report's tables: the plan, the nodes, both matrices, then each pair that is not ok and
// each not measured. Returns the counts by verdict.
pair_counts print_mesh(std::FILE* out, const mesh_args& a, const mesh_plan& plan,
                       const std::vector<mesh_node>& nodes, const std::vector<std::string>& names,
                       const std::vector<pair_result>& pairs, const mesh_gaps& gaps) {
  fmt::print(out, "pairperf mesh: {} nodes, {} ({} rounds of up to {} pairs), {} {}\n",
             static_cast<int>(nodes.size()), a.pattern, plan.schedule.size(),
             plan.schedule.empty() ? 0 : plan.schedule.front().size(), plan.transport,
             fmt::join(plan.tests, ","));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    fmt::print(out, "  {:>3} {:<14} {}\n", i, nodes[i].name,
               nodes[i].address.empty() ? "serves nothing: " + nodes[i].note
                                        : fmt::format("{}:{}", nodes[i].address, nodes[i].port));
  }
  print_matrix(out, names, pairs, false);
  print_matrix(out, names, pairs, true);
  pair_counts counts;
  for (const auto& p : pairs) {
    if (p.verdict == "ok" || p.verdict == "contention") continue;
    ++(p.verdict == "slow link" ? counts.slow : p.verdict == "noisy" ? counts.noisy : counts.bad);
    const auto& rs = p.retest.empty() ? p.results : p.retest;
    const std::string why = p.verdict == "noisy" ? noise_of(rs).why
                            : rs.empty()         ? std::string()
                                                 : rs.front().message;
    fmt::print(out, "  {} -> {}: {}{}\n", names[static_cast<std::size_t>(p.pair.client)],
               names[static_cast<std::size_t>(p.pair.server)], p.verdict,
               why.empty() ? "" : ": " + why);
  }
  for (const auto& g : gaps.pairs) {
    fmt::print(out, "  {} -> {}: not measured: {}\n",
               names[static_cast<std::size_t>(g.pair.client)],
               names[static_cast<std::size_t>(g.pair.server)], g.why);
  }
  std::vector<nlohmann::json> hosts;
  for (const auto& n : nodes) hosts.push_back(n.host);
  counts.busy_hosts = counts.noisy > 0 ? oversubscription(names, hosts) : std::string();
  if (counts.noisy > 0)
    fmt::print(out,
               "  {} pair(s) stayed noisy measured alone: their processes waited for a CPU, so "
               "their figures cannot say whether the link is slow: {}\n",
               counts.noisy, counts.busy_hosts);
  return counts;
}

// The exit-code contract: a failed pair is a failed measurement (1); a slow link, a finding
// or a missed expectation is a check that missed (3); pairs not measured, none measured, or
// pairs noisy alone leave it inconclusive (4).
verdict_outcome mesh_outcome(const pair_counts& counts, const std::vector<finding>& findings,
                             std::size_t failed_checks, std::size_t measured,
                             const mesh_gaps& gaps) {
  verdict_outcome outcome;
  if (counts.bad > 0)
    outcome.add(exit_status::failed, fmt::format("{} pair(s) failed", counts.bad));
  if (counts.slow > 0)
    outcome.add(exit_status::missed, fmt::format("{} slow link(s)", counts.slow));
  // `fails` findings miss; `fragile` and `advice` are reported (mesh has no --strict).
  if (const auto failing =
          std::count_if(findings.begin(), findings.end(),
                        [](const finding& f) { return f.severity == severity::fails; });
      failing > 0)
    outcome.add(exit_status::missed, fmt::format("{} finding(s)", failing));
  if (failed_checks > 0)
    outcome.add(exit_status::missed, fmt::format("{} case(s) missed --expect", failed_checks));
  if (gaps.interrupted != 0) {
    outcome.add(exit_status::failed,
                fmt::format("stopped by {}: {} of {} pair(s) measured",
                            signal_name(gaps.interrupted), measured, measured + gaps.pairs.size()));
  } else if (!gaps.pairs.empty()) {
    // A node that stopped answering mid-mesh failed (its pairs, not its links); a server that
    // stayed busy is inconclusive. Neither gives its pairs a verdict.
    const auto gone = std::find_if(gaps.pairs.begin(), gaps.pairs.end(),
                                   [](const unmeasured_pair& g) { return g.node_gone; });
    const auto& first = gone != gaps.pairs.end() ? *gone : gaps.pairs.front();
    outcome.add(gone != gaps.pairs.end() ? exit_status::failed : exit_status::inconclusive,
                fmt::format("{} pair(s) not measured: {}", gaps.pairs.size(), first.why));
  }
  if (measured == 0 && gaps.interrupted == 0)
    outcome.add(exit_status::inconclusive, "no pair was measured");
  if (counts.noisy > 0)
    outcome.add(exit_status::inconclusive,
                fmt::format("{} pair(s) stayed noisy alone: {}", counts.noisy, counts.busy_hosts));
  return outcome;
}

// The mesh document (schema pairperf.mesh): context, outcome, nodes, matrices, findings, timing.
nlohmann::json mesh_document(const mesh_args& a, const std::vector<std::string>& argv,
                             const mesh_plan& plan, const std::vector<mesh_node>& nodes,
                             const std::vector<std::string>& names,
                             const std::vector<pair_result>& pairs,
                             const std::vector<finding>& findings, const verdict_outcome& outcome,
                             int exit_code, const mesh_gaps& gaps, nlohmann::json timing_s) {
  nlohmann::json doc{{"schema", "pairperf.mesh"},
                     {"schema_version", "1.3.0"},
                     {"context",
                      {{"tool", tool_context()},
                       {"argv", redact_argv(argv)},
                       {"time_utc", utc_timestamp()},
                       {"pattern", a.pattern},
                       {"transport", plan.transport},
                       {"tests", plan.tests},
                       {"directions", a.one_way ? "one-way" : "both"},
                       {"config", plan.config}}},
                     {"outcome",
                      {{"exit_code", exit_code},
                       {"verdict", to_string(outcome.status)},
                       {"reasons", outcome.reasons}}},
                     {"nodes", nlohmann::json::array()},
                     {"mesh", mesh_matrices(static_cast<int>(nodes.size()), names, pairs)},
                     {"findings", findings},
                     {"timing_s", std::move(timing_s)}};
  add_not_measured(doc["mesh"], gaps, names);
  for (const auto& n : nodes) {
    doc["nodes"].push_back({{"name", n.name},
                            {"address", n.address},
                            {"port", n.port},
                            {"note", n.note},
                            {"host", n.host},
                            {"env", n.env}});
  }
  return doc;
}

}  // namespace

int finish_mesh(const mesh_args& a, const std::vector<std::string>& argv, const mesh_plan& plan,
                const std::vector<mesh_node>& nodes, std::vector<pair_result> pairs,
                const std::vector<pair_result>& retests, const std::vector<double>& round_seconds,
                double retest_seconds, std::chrono::steady_clock::time_point start,
                const mesh_gaps& gaps) {
  const outlier_rule rule{a.retest_bw, a.retest_lat};
  apply_retests(pairs, retests, rule);
  // "--json -": the document on stdout, the tables on stderr.
  std::FILE* out = a.json == "-" ? stderr : stdout;
  excuse_cpu_limited(nodes, pairs);
  const std::size_t failed_checks = check_expectations(plan, pairs);
  std::vector<std::string> names;
  for (const auto& n : nodes) names.push_back(n.name);
  std::vector<finding> findings = mesh_findings(plan, nodes, names, pairs, rule);
  drop_cpu_limited_asymmetry(nodes, names, findings);
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const pair_counts counts = print_mesh(out, a, plan, nodes, names, pairs, gaps);
  print_findings(out, findings);
  fmt::print(out,
             "\n{} pair(s) ({}), {} failed, {} slow, {} noisy, {} not measured; rounds {:.1f} s, "
             "retests {:.1f} s ({} pairs), total {:.1f} s\n",
             pairs.size(), a.one_way ? "one direction each" : "both directions", counts.bad,
             counts.slow, counts.noisy, gaps.pairs.size(),
             std::accumulate(round_seconds.begin(), round_seconds.end(), 0.0), retest_seconds,
             retests.size(), total);
  const verdict_outcome outcome = mesh_outcome(counts, findings, failed_checks, pairs.size(), gaps);
  const int exit_code = gaps.interrupted != 0 ? 128 + gaps.interrupted : code(outcome.status);
  if (!a.json.empty()) {
    const nlohmann::json timing{
        {"rounds", round_seconds}, {"retests", retest_seconds}, {"total", total}};
    const nlohmann::json doc = mesh_document(a, argv, plan, nodes, names, pairs, findings, outcome,
                                             exit_code, gaps, timing);
    write_output(a.json, doc.dump(2) + "\n");
    if (a.json != "-") fmt::print(out, "results: {}\n", a.json);
  }
  return exit_code;
}

}  // namespace pairperf::mesh
