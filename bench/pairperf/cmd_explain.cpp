// `pairperf explain LOG...`: failure logs in, diagnoses and the checks that prove them out
// (diagnose/explain.h). --check runs the runnable checks here, as child pairperf processes with
// the same binary, each bounded, and folds their verdicts into the answer.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/private_files.h"
#include "core/errors.h"
#include "core/output.h"
#include "core/self_probe.h"
#include "core/units.h"
#include "diagnose/explain.h"
#include "harness/context.h"
#include "harness/token.h"

extern char** environ;

namespace pairperf::cli {
namespace {

constexpr const char* catalog_name = "explain-catalog.json";
constexpr const char* formats_name = "explain-formats.json";
constexpr std::size_t tail_chars = 2000;

struct explain_args {
  std::vector<std::string> logs;
  std::string catalog;
  std::string formats;
  std::string json;
  bool check = false;
  int port = 18515;
  std::string check_timeout = "5m";
  token_options token;
};

std::string catalog_path(const explain_args& a) {
  if (!a.catalog.empty()) return a.catalog;
  if (const char* env = std::getenv("PAIRPERF_EXPLAIN_CATALOG"); env != nullptr && *env != '\0')
    return env;
  std::string found = find_private_file(catalog_name, {}, false);
  if (found.empty())
    throw std::runtime_error(
        fmt::format("explain's catalog {} is not installed (looked in {}); name one with --catalog",
                    catalog_name, fmt::join(private_file_folders(), ", ")));
  return found;
}

// The generated formats: --formats, $PAIRPERF_EXPLAIN_FORMATS, else the file beside the catalog
// (both are installed together; "none" reads only the hand-written signatures; a catalog named
// with --catalog may come without them).
std::string formats_path(const explain_args& a, const std::string& catalog, bool installed) {
  std::string named = a.formats;
  if (named.empty()) {
    if (const char* env = std::getenv("PAIRPERF_EXPLAIN_FORMATS"); env != nullptr) named = env;
  }
  if (named == "none") return {};
  if (!named.empty()) return named;
  const auto slash = catalog.rfind('/');
  const std::string beside =
      (slash == std::string::npos ? std::string() : catalog.substr(0, slash + 1)) + formats_name;
  if (access(beside.c_str(), R_OK) != 0) {
    // A catalog of one's own may come alone; the installed one never does.
    if (!installed) return {};
    throw std::runtime_error(
        fmt::format("explain's generated formats {} are not installed beside the catalog ({}); "
                    "name them with --formats, or --formats none",
                    formats_name, beside));
  }
  return beside;
}

// This process's environment for a check: the token (if any) in PAIRPERF_TOKEN, as every
// command that talks to a server reads it.
std::vector<std::string> check_environment(const std::string& token) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PAIRPERF_TOKEN=", 15) != 0) env.emplace_back(*e);
  }
  if (!token.empty()) env.push_back("PAIRPERF_TOKEN=" + token);
  return env;
}

std::string tail_of(std::string s) {
  if (s.size() > tail_chars) s.erase(0, s.size() - tail_chars);
  return s;
}

// Runs one check and reads its verdict. A doctor check reports as JSON: it confirms the
// diagnosis only with a `fails` finding on one of `subjects` (doctor judges every variable and
// the path; another failing finding is not this failure). Any other check: its exit code.
check_run run_check(const std::string& command, const std::vector<std::string>& subjects,
                    std::chrono::nanoseconds bound, const std::string& token) {
  std::vector<std::string> args;
  std::istringstream words(command);
  for (std::string w; words >> w;) args.push_back(w);
  const bool doctor = args.size() > 1 && args[1] == "doctor";
  if (doctor) {
    args.emplace_back("--json");
    args.emplace_back("-");
  }
  const auto start = std::chrono::steady_clock::now();
  const self_run c = run_self(args, check_environment(token),
                              std::chrono::duration_cast<std::chrono::milliseconds>(bound));
  check_run r;
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.exit_code = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 128 + WTERMSIG(c.status);
  r.output_tail = tail_of(doctor ? c.err : c.out + c.err);
  if (!c.spawn_error.empty()) {
    r.exit_code = 1;
    r.outcome = "failed";
    r.output_tail = fmt::format("cannot start: {}", c.spawn_error);
    return r;
  }
  if (c.timed_out) {
    r.outcome = "failed";
    r.output_tail += fmt::format("\n(killed: it ran past --check-timeout, {:.0f} s)",
                                 std::chrono::duration<double>(bound).count());
    return r;
  }
  if (r.exit_code != 0 && r.exit_code != 3 && r.exit_code != 4) {
    r.outcome = "failed";
    return r;
  }
  bool on_subject = false;
  if (doctor) {
    nlohmann::json report;
    try {
      report = nlohmann::json::parse(c.out);
    } catch (const nlohmann::json::exception&) {
      r.outcome = "failed";
      r.output_tail = tail_of(c.out + c.err);
      return r;
    }
    std::vector<std::string> lines;
    for (const auto& f : report.value("findings", nlohmann::json::array())) {
      if (f.value("severity", "") != "fails") continue;
      const std::string subject = f.value("subject", "");
      on_subject =
          on_subject || std::find(subjects.begin(), subjects.end(), subject) != subjects.end();
      lines.push_back(
          fmt::format("{}: {} (fix: {})", subject, f.value("problem", ""), f.value("fix", "")));
    }
    r.findings = fmt::format("{}", fmt::join(lines, "\n"));
  }
  if (doctor && !subjects.empty()) {
    r.outcome = on_subject ? "confirmed" : r.exit_code == 4 ? "inconclusive" : "not reproduced";
  } else {
    r.outcome = r.exit_code == 3   ? "confirmed"
                : r.exit_code == 4 ? "inconclusive"
                                   : "not reproduced";
  }
  return r;
}

int explain_command(const explain_args& a, const std::vector<std::string>& argv) {
  if (a.port < 1 || a.port > 65535) throw usage_error("--port must be 1-65535");
  const auto bound = parse_duration(a.check_timeout);
  if (bound <= std::chrono::nanoseconds::zero()) throw usage_error("--check-timeout must be > 0");
  if (!a.json.empty() && a.json != "-") check_output(a.json);
  explain_catalog catalog;
  try {
    catalog = load_catalog(catalog_path(a));
    const bool installed = a.catalog.empty() && std::getenv("PAIRPERF_EXPLAIN_CATALOG") == nullptr;
    if (const std::string f = formats_path(a, catalog.path, installed); !f.empty())
      load_formats(catalog, f);
  } catch (const catalog_error& e) {
    throw usage_error(e.what());
  }
  std::vector<log_input> logs;
  for (const auto& name : a.logs) logs.push_back(read_log(name));
  explain_options o;
  o.pairperf_port = static_cast<std::uint16_t>(a.port);
  explanation e = explain_logs(catalog, logs, o);
  if (a.check) {
    e.checked = true;
    const std::string token = a.token.resolve();
    std::map<std::string, check_run> done;  // a command shared by diagnoses runs once
    for (auto& d : e.diagnoses) {
      for (auto& c : d.checks) {
        if (!c.runnable) continue;
        const std::string key = fmt::format("{} {}", c.command, fmt::join(d.sig->subjects, ","));
        auto it = done.find(key);
        if (it == done.end()) {
          if (a.json != "-") fmt::print(stderr, "pairperf explain: checking: {}\n", c.command);
          it = done.emplace(key, run_check(c.command, d.sig->subjects, bound, token)).first;
        }
        c.result = it->second;
      }
    }
    for (auto& c : e.across) {
      if (a.json != "-") fmt::print(stderr, "pairperf explain: checking: {}\n", c.command);
      c.result = run_check(c.command, {}, bound, token);
    }
  }
  const nlohmann::json j = e;
  nlohmann::json doc{
      {"schema", "pairperf.explain"},
      {"schema_version", "1.2.0"},
      {"context",
       {{"tool", tool_context()}, {"argv", redact_argv(argv)}, {"time_utc", utc_timestamp()}}}};
  doc.update(j);
  if (a.json == "-") {
    // Logs are bytes: a line that is not UTF-8 is quoted with U+FFFD where it is not.
    fmt::print("{}\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    print_explanation(stdout, e);
    if (!a.json.empty()) {
      write_output(a.json,
                   doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
      fmt::print("explanation: {}\n", a.json);
    }
  }
  return exit_code(e);
}

}  // namespace

command add_explain(CLI::App& root, const std::vector<std::string>& argv) {
  auto a = std::make_shared<explain_args>();
  CLI::App* app = root.add_subcommand(
      "explain",
      "Read an application's failure logs (gloo, torch.distributed, NCCL, UCX, libfabric, vLLM, "
      "pairperf; one per node, read together): what failed, the causes ranked by the evidence, "
      "the lines as log:line, and the pairperf commands that prove it (--check runs them)");
  app->add_option("logs", a->logs, "Log files ('-': standard input)")->required();
  app->add_option("--catalog", a->catalog,
                  "Signature catalog (default: the installed explain-catalog.json; also "
                  "$PAIRPERF_EXPLAIN_CATALOG)");
  app->add_option("--formats", a->formats,
                  "The libraries' own message formats, generated from their sources (default: "
                  "explain-formats.json beside the catalog; also $PAIRPERF_EXPLAIN_FORMATS; "
                  "'none': the catalog's signatures only)");
  app->add_option("--json", a->json, "Also write the explanation as JSON ('-': stdout only)");
  app->add_flag("--check", a->check,
                "Run the suggested checks that the logs fill in (doctor, mesh, run against "
                "pairperf servers on the named hosts) and fold their verdicts in");
  app->add_option("--port", a->port, "Control port of the pairperf servers the checks target")
      ->capture_default_str();
  app->add_option("--check-timeout", a->check_timeout, "Bound on each check")
      ->capture_default_str();
  a->token.add(app, "Token the pairperf servers of the checks require");
  return command{app, [a, argv] { return explain_command(*a, argv); }};
}

}  // namespace pairperf::cli
