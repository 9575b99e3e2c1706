#include "diagnose/explain.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <regex>
#include <set>

#include "core/exit_codes.h"
#include "diagnose/cause_class.h"
#include "diagnose/explain_facts.h"
#include "diagnose/explain_read.h"
#include "diagnose/explain_text.h"

namespace pairperf {
namespace {

using log_text::add_distinct;
using log_text::fill;
using log_text::fill_text;
using log_text::is_bridge;
using log_text::is_link_local;
using log_text::is_loopback;

// Lines a launcher's context lines follow a failure by: fields a failure line lacks come from the
// context lines right below it (gloo's `remote=[addr]:port` under its error, NCCL's `-> 2`).
constexpr std::size_t context_below = 3;

// A failure, or a warning that names a class (a degradation): the logs hold something wrong.
bool flagged(const diagnosis& d) {
  return d.sig->kind == line_kind::failure ||
         (d.sig->kind == line_kind::warning && !d.cause_class.empty());
}

std::string where_of(const explanation& e, std::size_t log, std::size_t line) {
  return fmt::format("{}:{}", e.logs[log], line);
}

bool has_fact(const explanation& e, const std::string& kind, const diagnosis& d) {
  for (const auto& f : e.facts) {
    if (f.kind != kind) continue;
    if (kind != "advertised_elsewhere") return true;
    // Only a fact about this diagnosis's own lines.
    for (const auto i : d.matches) {
      const auto here = where_of(e, e.matches[i].log, e.matches[i].line);
      if (std::find(f.evidence.begin(), f.evidence.end(), here) != f.evidence.end()) return true;
    }
  }
  return false;
}

// What a connection failure's address says beyond the library's words: toward a loopback or a
// link-local address, or a name whose lookup failed in these logs.
void reclassify_by_address(const explanation& e, diagnosis& d,
                           std::vector<ranked_cause>& supported) {
  // A connection failure toward a loopback address: a peer advertised an address only it can
  // reach, whatever the library's words for the failure.
  if (const auto addrs = d.fields.find("addr");
      !d.decided && addrs != d.fields.end() &&
      (d.cause_class == "interface" || d.cause_class == "port") &&
      std::any_of(addrs->second.begin(), addrs->second.end(), is_loopback)) {
    d.cause_class = "loopback";
    d.decided = true;
  }
  // Toward a host name whose lookup failed in these logs: the connection had no address to use
  // (c10d prints its connect failure next to the lookup's gai error).
  if (!d.decided && (d.cause_class == "interface" || d.cause_class == "port")) {
    for (const char* key : {"addr", "host"}) {
      const auto names = d.fields.find(key);
      if (names == d.fields.end() || d.decided) continue;
      for (const auto& f : e.facts) {
        if (f.kind != "unresolved_name" ||
            std::find(names->second.begin(), names->second.end(), f.subject) == names->second.end())
          continue;
        d.cause_class = "name_resolution";
        d.decided = true;
        supported.insert(
            supported.begin(),
            ranked_cause{fmt::format("{} does not resolve on this node, so the connection had no "
                                     "address to use: fix the name (DNS, /etc/hosts) or give an "
                                     "address",
                                     f.subject),
                         true, f.text});
        break;
      }
    }
  }
  // Toward a link-local address: the peer advertised an interface only its own link reaches.
  if (const auto addrs = d.fields.find("addr");
      !d.decided && addrs != d.fields.end() && d.cause_class == "port" &&
      std::any_of(addrs->second.begin(), addrs->second.end(), is_link_local)) {
    d.cause_class = "interface";
    d.decided = true;
  }
}

// `first_values`: each field's first value in the diagnosis; `failing_logs`: how many logs hold
// a failure (the evidence several_logs).
void rank_causes(const explanation& e, diagnosis& d,
                 const std::map<std::string, std::string>& first_values, std::size_t failing_logs) {
  std::vector<ranked_cause> supported, plain, unshown;
  for (const auto& rule : d.sig->causes) {
    ranked_cause c{fill_text(rule.text, first_values), false, {}};
    if (rule.when_field.empty() && rule.when_evidence.empty()) {
      plain.push_back(std::move(c));
      continue;
    }
    bool field_ok = true, evidence_ok = true;
    if (!rule.when_field.empty()) {
      field_ok = false;
      if (const auto vals = d.fields.find(rule.when_field); vals != d.fields.end()) {
        for (const auto& v : vals->second) {
          if (std::regex_search(v, *rule.when_matches)) {
            field_ok = true;
            c.because = fmt::format("{} is '{}'", rule.when_field, v);
            break;
          }
        }
      }
    }
    if (!rule.when_evidence.empty()) {
      if (rule.when_evidence == "several_logs") {
        // Failures in more than one log: the nodes failed together (a pair that cannot connect).
        evidence_ok = failing_logs > 1;
        if (evidence_ok) c.because = fmt::format("failures in {} of the logs", failing_logs);
      } else {
        evidence_ok = has_fact(e, rule.when_evidence, d);
        if (evidence_ok) {
          for (const auto& f : e.facts) {
            if (f.kind == rule.when_evidence) {
              c.because = f.text;
              break;
            }
          }
        }
      }
    }
    c.supported = field_ok && evidence_ok;
    if (c.supported && d.cause_class.empty() && !rule.cause_class.empty()) {
      d.cause_class = rule.cause_class;
      d.decided = true;
    }
    if (!c.supported) {
      c.because = !field_ok ? fmt::format("not shown: no {} matching '{}'", rule.when_field,
                                          rule.when_matches_text)
                            : fmt::format("not shown by these logs ({})", rule.when_evidence);
      unshown.push_back(std::move(c));
    } else {
      supported.push_back(std::move(c));
    }
  }
  if (d.cause_class.empty()) d.cause_class = d.sig->cause_class;
  reclassify_by_address(e, d, supported);
  d.causes = std::move(supported);
  d.causes.insert(d.causes.end(), plain.begin(), plain.end());
  d.causes.insert(d.causes.end(), unshown.begin(), unshown.end());
}

// Addresses that prove nothing as "the peer" of a check: loopback, and those the logs show on a
// bridge interface (a container's docker0 address answers on every host).
std::set<std::string> useless_targets(const explanation& e) {
  std::set<std::string> out;
  for (const auto& m : e.matches) {
    const auto iface = m.fields.find("iface");
    if (iface == m.fields.end() || !is_bridge(iface->second)) continue;
    for (const char* k : {"local_addr", "addr"}) {
      if (const auto a = m.fields.find(k); a != m.fields.end()) out.insert(a->second);
    }
  }
  return out;
}

void suggest_checks(const explanation& e, diagnosis& d, const explain_options& o) {
  std::set<std::string> seen;
  const std::set<std::string> useless = useless_targets(e);
  // One set of values per match (the fields of one line belong together).
  for (const auto i : d.matches) {
    const log_match& m = e.matches[i];
    std::map<std::string, std::string> values = m.fields;
    values["pairperf_port"] = std::to_string(o.pairperf_port);
    if (const auto a = values.find("addr");
        a != values.end() &&
        (is_loopback(a->second) || is_link_local(a->second) || useless.count(a->second) > 0))
      values.erase(a);  // a check that needs it is not runnable; doctor of this node still is
    for (const auto& tmpl : d.sig->checks) {
      auto [command, missing] = fill(tmpl, values);
      if (!seen.insert(command).second) continue;
      suggested_check c;
      c.command = std::move(command);
      const auto host = m.fields.find("host");
      c.run_on = host != m.fields.end()
                     ? fmt::format("on {} (the node that wrote {})", host->second, e.logs[m.log])
                     : fmt::format("on the node that wrote {}", e.logs[m.log]);
      c.runnable = missing.empty();
      c.missing = fmt::format("{}", fmt::join(missing, ", "));
      d.checks.push_back(std::move(c));
    }
  }
}

// Failures on two or more named hosts: the mesh over them shows every pair at once.
void suggest_mesh(explanation& e, const explain_options& o) {
  std::vector<std::string> hosts;
  bool failed = false;
  std::string transport;  // the first failure's library's, as the catalog names it
  for (const auto& m : e.matches) {
    if (const auto h = m.fields.find("host"); h != m.fields.end()) add_distinct(hosts, h->second);
    if (m.sig->kind == line_kind::failure) {
      failed = true;
      if (transport.empty()) transport = m.sig->transport;
    }
  }
  if (!failed || hosts.size() < 2) return;
  std::vector<std::string> targets;
  targets.reserve(hosts.size());
  for (const auto& h : hosts) targets.push_back(fmt::format("{}:{}", h, o.pairperf_port));
  suggested_check c;
  c.command = fmt::format("pairperf mesh --hosts {}{}", fmt::join(targets, ","),
                          transport.empty() ? "" : " --transport " + transport);
  c.run_on = "on any node, with a pairperf server on each (server --allow-drive)";
  c.runnable = true;
  e.across.push_back(std::move(c));
}

// Context lines right below a failure give it the fields its own line lacks.
void attach_context(explanation& e) {
  for (std::size_t i = 0; i < e.matches.size(); ++i) {
    log_match& failure = e.matches[i];
    if (failure.sig->kind == line_kind::context) continue;
    for (std::size_t j = i + 1; j < e.matches.size(); ++j) {
      const log_match& below = e.matches[j];
      if (below.log != failure.log || below.line > failure.line + context_below) break;
      if (below.sig->kind != line_kind::context) continue;
      for (const auto& [k, v] : below.fields) failure.fields.emplace(k, v);
    }
  }
}

std::pair<std::size_t, std::size_t> first_line(const explanation& e, const diagnosis& d) {
  const log_match& m = e.matches[d.matches.front()];
  return {m.log, m.line};
}

// The first failure that is not a consequence; then a finding; then the first consequence,
// which leaves the cause undetermined.
void choose_verdict(explanation& e) {
  std::optional<std::size_t> best;
  auto rank = [&](std::size_t i) {
    const diagnosis& d = e.diagnoses[i];
    // Failures that are causes, consequences whose evidence names the cause, findings, then
    // the consequences that name none.
    const bool plain = !d.sig->consequence || d.decided;
    const int tier = d.sig->kind != line_kind::failure ? 2
                     : plain                           ? (d.sig->consequence ? 1 : 0)
                                                       : 3;
    return std::make_tuple(tier, first_line(e, d));
  };
  std::size_t consequences = 0;
  for (std::size_t i = 0; i < e.diagnoses.size(); ++i) {
    if (!flagged(e.diagnoses[i])) continue;
    consequences += e.diagnoses[i].sig->consequence ? 1 : 0;
    if (!best || rank(i) < rank(*best)) best = i;
  }
  if (!best) return;
  const diagnosis& d = e.diagnoses[*best];
  verdict_info& v = e.verdict;
  v.diagnosis = best;
  const auto [log, line] = first_line(e, d);
  v.first = where_of(e, log, line);
  if (d.sig->consequence && !d.decided) {
    v.cause_class = "undetermined";
    v.because = fmt::format(
        "only consequences of a first cause these logs do not hold ({} of them, first {}): "
        "look for the first failure in the other ranks' logs",
        consequences, v.first);
  } else {
    v.cause_class = d.cause_class;
    v.because = d.sig->kind == line_kind::failure
                    ? fmt::format("the first failure at {}{}", v.first,
                                  consequences > 0
                                      ? fmt::format("; {} later failure(s) are its consequences",
                                                    consequences)
                                      : "")
                    : fmt::format("nothing failed, but {} shows a degradation", v.first);
  }
  const cause_class_info* info = find_cause_class(v.cause_class);
  v.network = info != nullptr && info->network;
}

}  // namespace

explanation explain_logs(const explain_catalog& catalog, const std::vector<log_input>& logs,
                         const explain_options& options) {
  explanation e;
  e.catalog_path = catalog.path;
  e.catalog_version = catalog.version;
  e.formats_path = catalog.formats_path;
  e.generated_formats = catalog.generated;
  for (std::size_t log = 0; log < logs.size(); ++log) {
    e.logs.push_back(logs[log].name);
    e.line_counts.push_back(logs[log].lines.size());
    read_lines(catalog, logs[log], log, options, e);
  }
  attach_context(e);
  find_facts(e);
  // One diagnosis per signature that is not context, failures first.
  for (const line_kind kind : {line_kind::failure, line_kind::warning}) {
    std::map<const signature*, std::size_t> index;
    for (std::size_t i = 0; i < e.matches.size(); ++i) {
      const log_match& m = e.matches[i];
      if (m.sig->kind != kind) continue;
      auto [it, fresh] = index.emplace(m.sig, e.diagnoses.size());
      if (fresh) {
        e.diagnoses.emplace_back();
        e.diagnoses.back().sig = m.sig;
      }
      diagnosis& d = e.diagnoses[it->second];
      d.matches.push_back(i);
      for (const auto& [k, v] : m.fields) add_distinct(d.fields[k], v);
      add_distinct(d.logs, e.logs[m.log]);
    }
  }
  suggest_mesh(e, options);
  std::set<std::size_t> failing;
  for (const auto& m : e.matches) {
    if (m.sig->kind == line_kind::failure) failing.insert(m.log);
  }
  for (auto& d : e.diagnoses) {
    std::map<std::string, std::string> first;
    for (const auto& [k, vals] : d.fields) first[k] = vals.front();
    d.meaning = fill_text(d.sig->meaning, first);
    rank_causes(e, d, first, failing.size());
    suggest_checks(e, d, options);
  }
  for (const auto& m : e.matches) e.context_lines += m.sig->kind == line_kind::context ? 1 : 0;
  choose_verdict(e);
  return e;
}

int exit_code(const explanation& e) {
  for (const auto& d : e.diagnoses) {
    for (const auto& c : d.checks) {
      if (c.result && c.result->outcome == "failed") return code(exit_status::failed);
    }
  }
  for (const auto& c : e.across) {
    if (c.result && c.result->outcome == "failed") return code(exit_status::failed);
  }
  if (std::any_of(e.diagnoses.begin(), e.diagnoses.end(), flagged))
    return code(exit_status::missed);
  if (e.unexplained_total > 0 ||
      std::any_of(e.diagnoses.begin(), e.diagnoses.end(),
                  [](const diagnosis& d) { return d.sig->inconclusive; }))
    return code(exit_status::inconclusive);
  return code(exit_status::held);
}

}  // namespace pairperf
