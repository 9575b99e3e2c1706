// explain's output: the text a user reads and the JSON (results/explain.schema.json).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "diagnose/cause_class.h"
#include "diagnose/explain.h"

namespace pairperf {
namespace {

constexpr std::size_t evidence_shown = 6;  // lines per diagnosis in the text; the JSON has all
constexpr std::size_t context_shown = 8;   // recognized context lines named beside unexplained ones

const char* verdict_of(int code) {
  switch (code) {
    case 0:
      return "no failure in the logs";
    case 1:
      return "a check failed";
    case 3:
      return "failures recognized and explained";
    case 4:
      return "failure-looking lines no signature explains, or a warning that alone does not tell "
             "a failure from a retry";
    default:
      return "?";
  }
}

std::string count_of(std::size_t n, const char* one, const char* many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

nlohmann::json check_json(const suggested_check& c) {
  nlohmann::json check{{"command", c.command}, {"run_on", c.run_on}, {"runnable", c.runnable}};
  if (!c.runnable) check["missing"] = c.missing;
  if (c.result)
    check["result"] = {{"exit_code", c.result->exit_code},
                       {"outcome", c.result->outcome},
                       {"findings", c.result->findings},
                       {"elapsed_s", c.result->elapsed_s},
                       {"output_tail", c.result->output_tail}};
  return check;
}

void print_check(std::FILE* out, const suggested_check& c) {
  fmt::print(out, "    {}: {}\n", c.run_on, c.command);
  if (!c.runnable) fmt::print(out, "      (fill in {}: the logs do not name it)\n", c.missing);
  if (!c.result) return;
  fmt::print(out, "      --check: exit {}, {} ({:.1f} s)\n", c.result->exit_code, c.result->outcome,
             c.result->elapsed_s);
  if (!c.result->findings.empty()) {
    std::string lines = c.result->findings;
    for (std::size_t at = 0; (at = lines.find('\n', at)) != std::string::npos; at += 9)
      lines.replace(at, 1, "\n        ");
    fmt::print(out, "        {}\n", lines);
  }
  // A check that could not run says why in its last line.
  std::string last = c.result->outcome == "failed" ? c.result->output_tail : "";
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  if (const auto nl = last.rfind('\n'); nl != std::string::npos) last.erase(0, nl + 1);
  if (!last.empty()) fmt::print(out, "        {}\n", last);
}

// One diagnosis: its lines, what it means, its causes and the checks that prove it.
void print_diagnosis(std::FILE* out, const explanation& e, const diagnosis& d, std::size_t n) {
  fmt::print(out, "\n{} {}: {}, {} ({})\n",
             d.sig->kind == line_kind::failure ? "FAILURE" : "WARNING", n, d.sig->library,
             d.sig->stage, d.sig->id);
  for (std::size_t k = 0; k < d.matches.size() && k < evidence_shown; ++k) {
    const log_match& m = e.matches[d.matches[k]];
    fmt::print(out, "  {}:{}  {}\n", e.logs[m.log], m.line, m.text);
  }
  if (d.matches.size() > evidence_shown)
    fmt::print(out, "  ... and {} more line(s) like these\n", d.matches.size() - evidence_shown);
  fmt::print(out, "  What it means: {}\n", d.meaning);
  if (!d.causes.empty()) {
    fmt::print(out, "  Causes, most likely first:\n");
    std::size_t k = 0;
    for (const auto& c : d.causes) {
      fmt::print(out, "    {}. {}{}\n", ++k, c.text,
                 c.because.empty() ? ""
                 : c.supported     ? fmt::format(" [shown: {}]", c.because)
                                   : fmt::format(" [{}]", c.because));
    }
  }
  if (!d.checks.empty()) {
    fmt::print(out, "  Prove it:\n");
    for (const auto& c : d.checks) print_check(out, c);
  }
  if (!d.sig->source.empty()) fmt::print(out, "  Message format: {}\n", d.sig->source);
}

}  // namespace

void to_json(nlohmann::json& j, const explanation& e) {
  j = nlohmann::json::object();
  nlohmann::json logs = nlohmann::json::array();
  for (std::size_t i = 0; i < e.logs.size(); ++i)
    logs.push_back({{"name", e.logs[i]}, {"lines", e.line_counts[i]}});
  nlohmann::json diagnoses = nlohmann::json::array();
  for (const auto& d : e.diagnoses) {
    nlohmann::json evidence = nlohmann::json::array();
    for (const auto i : d.matches) {
      const log_match& m = e.matches[i];
      evidence.push_back(
          {{"log", e.logs[m.log]}, {"line", m.line}, {"text", m.text}, {"fields", m.fields}});
    }
    nlohmann::json causes = nlohmann::json::array();
    for (const auto& c : d.causes)
      causes.push_back({{"text", c.text}, {"supported", c.supported}, {"because", c.because}});
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : d.checks) checks.push_back(check_json(c));
    diagnoses.push_back({{"id", d.sig->id},
                         {"library", d.sig->library},
                         {"kind", to_string(d.sig->kind)},
                         {"class", d.cause_class},
                         {"consequence", d.sig->consequence},
                         {"generated", d.sig->generated},
                         {"stage", d.sig->stage},
                         {"meaning", d.meaning},
                         {"source", d.sig->source},
                         {"logs", d.logs},
                         {"fields", d.fields},
                         {"evidence", std::move(evidence)},
                         {"causes", std::move(causes)},
                         {"checks", std::move(checks)}});
  }
  nlohmann::json facts = nlohmann::json::array();
  for (const auto& f : e.facts) {
    facts.push_back({{"kind", f.kind}, {"text", f.text}, {"evidence", f.evidence}});
    if (!f.subject.empty()) facts.back()["subject"] = f.subject;
  }
  nlohmann::json context_lines = nlohmann::json::array();
  for (const auto& m : e.matches) {
    if (m.sig->kind != line_kind::context) continue;
    context_lines.push_back(
        {{"id", m.sig->id}, {"log", e.logs[m.log]}, {"line", m.line}, {"fields", m.fields}});
  }
  nlohmann::json unexplained = nlohmann::json::array();
  for (const auto& u : e.unexplained)
    unexplained.push_back({{"log", e.logs[u.log]}, {"line", u.line}, {"text", u.text}});
  const int code = exit_code(e);
  j["logs"] = std::move(logs);
  j["catalog"] = {{"path", e.catalog_path},
                  {"version", e.catalog_version},
                  {"formats", e.formats_path.empty() ? nlohmann::json(nullptr)
                                                     : nlohmann::json(e.formats_path)},
                  {"generated_formats", e.generated_formats}};
  const verdict_info& v = e.verdict;
  j["verdict"] = v.diagnosis ? nlohmann::json{{"class", v.cause_class},
                                              {"network", v.network},
                                              {"diagnosis", e.diagnoses[*v.diagnosis].sig->id},
                                              {"first", v.first},
                                              {"because", v.because}}
                             : nlohmann::json(nullptr);
  j["diagnoses"] = std::move(diagnoses);
  j["facts"] = std::move(facts);
  nlohmann::json across = nlohmann::json::array();
  for (const auto& c : e.across) across.push_back(check_json(c));
  j["checks_across"] = std::move(across);
  j["context_lines"] = std::move(context_lines);
  j["unexplained"] = std::move(unexplained);
  j["unexplained_total"] = e.unexplained_total;
  j["checked"] = e.checked;
  j["outcome"] = {{"exit_code", code}, {"verdict", verdict_of(code)}};
}

void print_explanation(std::FILE* out, const explanation& e) {
  std::size_t lines = 0;
  for (const auto n : e.line_counts) lines += n;
  fmt::print(out, "pairperf explain: {} ({} lines), catalog {} ({}){}\n",
             count_of(e.logs.size(), "log", "logs"), lines, e.catalog_version, e.catalog_path,
             e.formats_path.empty() ? ", no generated formats"
                                    : fmt::format(", {} formats of the libraries' sources ({})",
                                                  e.generated_formats, e.formats_path));
  // The libraries' versions the logs print (NCCL's "NCCL version", torch's NCCL errors).
  std::vector<std::string> versions;
  for (const auto& m : e.matches) {
    const auto v = m.fields.find("version");
    if (v == m.fields.end()) continue;
    const std::string seen =
        fmt::format("{} {} ({}:{})", m.sig->library, v->second, e.logs[m.log], m.line);
    if (std::none_of(versions.begin(), versions.end(), [&](const std::string& s) {
          return s.rfind(fmt::format("{} {} ", m.sig->library, v->second), 0) == 0;
        }))
      versions.push_back(seen);
  }
  if (!versions.empty())
    fmt::print(out, "Versions the logs print: {}\n", fmt::join(versions, ", "));
  if (const verdict_info& v = e.verdict; v.diagnosis) {
    const cause_class_info* info = find_cause_class(v.cause_class);
    fmt::print(out, "Cause: {} ({}{}): {}\n  because {}\n", v.cause_class,
               v.network                         ? "the network"
               : v.cause_class == "undetermined" ? "the network neither blamed nor cleared"
                                                 : "not the network",
               info != nullptr ? fmt::format("; {}", info->title) : "",
               e.diagnoses[*v.diagnosis].meaning, v.because);
  }
  std::size_t failures = 0, warnings = 0;
  for (const auto& d : e.diagnoses) ++(d.sig->kind == line_kind::failure ? failures : warnings);
  std::size_t n = 0;
  for (const auto& d : e.diagnoses) print_diagnosis(out, e, d, ++n);
  if (!e.facts.empty() || !e.across.empty()) {
    fmt::print(out, "\nAcross the logs:\n");
    for (const auto& f : e.facts)
      fmt::print(out, "  - {} ({})\n", f.text, fmt::join(f.evidence, ", "));
    if (!e.across.empty()) fmt::print(out, "  Prove it on every pair:\n");
    for (const auto& c : e.across) print_check(out, c);
  }
  if (e.unexplained_total > 0) {
    // What was recognized around them: the context an engineer reads them with.
    std::vector<std::string> known;
    for (const auto& m : e.matches) {
      if (m.sig->kind == line_kind::context && known.size() < context_shown)
        known.push_back(fmt::format("{} ({}:{})", m.sig->id, e.logs[m.log], m.line));
    }
    if (!known.empty())
      fmt::print(out, "\nRecognized, as context: {}{}\n", fmt::join(known, ", "),
                 e.context_lines > known.size()
                     ? fmt::format(" and {} more", e.context_lines - known.size())
                     : "");
    fmt::print(out,
               "\nLines that look like failures but match no signature ({}; add them to the "
               "catalog):\n",
               e.unexplained_total);
    for (const auto& u : e.unexplained)
      fmt::print(out, "  {}:{}  {}\n", e.logs[u.log], u.line, u.text);
    if (e.unexplained_total > e.unexplained.size())
      fmt::print(out, "  ... and {} more\n", e.unexplained_total - e.unexplained.size());
  }
  const int code = exit_code(e);
  fmt::print(out, "\n{}, {}, {} unexplained: {} (exit {})\n",
             count_of(failures, "failure", "failures"), count_of(warnings, "warning", "warnings"),
             e.unexplained_total, verdict_of(code), code);
}

}  // namespace pairperf
