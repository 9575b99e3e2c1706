#pragma once
// `pairperf explain LOG...`: the user's failure logs (one per node, read together) through the
// catalog's signatures (explain_catalog.h). Each recognized failure becomes a diagnosis: the
// library and stage, what it means, its causes ranked by the evidence of all the logs, the lines
// as log:line, and the pairperf commands that prove it. Facts across logs (an address one node
// advertises that another cannot reach, a variable set on some nodes only, a loopback address)
// raise the causes they support. Lines that look like failures but match no signature are listed
// so the catalog can grow.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "diagnose/explain_catalog.h"

namespace pairperf {

struct log_input {
  std::string name;  // as given ("-" is standard input)
  std::vector<std::string> lines;
};

// Reads a log; "-" reads standard input. Throws usage_error when it cannot be read (exit 2).
log_input read_log(const std::string& name);

struct log_match {
  std::size_t log = 0;   // index into the inputs
  std::size_t line = 0;  // 1-based
  std::string text;      // the line, trimmed and capped
  std::string origin;    // who printed it, as a launcher's prefix says (log_line.h)
  const signature* sig = nullptr;
  std::map<std::string, std::string> fields;
};

struct ranked_cause {
  std::string text;
  bool supported = false;  // the logs show the evidence its rule asks for
  std::string because;     // that evidence, or why it is not shown
};

struct check_run {
  int exit_code = 0;
  // confirmed (the check finds the failure: a doctor `fails` finding on the diagnosis's subject,
  // or exit 3), not reproduced, inconclusive (exit 4), failed (it could not run: exit 1 or 2)
  std::string outcome;
  std::string findings;  // a doctor check's `fails` findings, one a line: "SUBJECT: problem"
  std::string output_tail;
  double elapsed_s = 0;
};

struct suggested_check {
  std::string command;              // pairperf ..., with the evidence filled in
  std::string run_on;               // where it must run (the node that wrote the log)
  bool runnable = false;            // every field it needs was found
  std::string missing;              // the fields it lacks, when not runnable
  std::optional<check_run> result;  // --check
};

struct diagnosis {
  const signature* sig = nullptr;
  std::vector<std::size_t> matches;  // into explanation::matches, in log order
  std::map<std::string, std::vector<std::string>> fields;  // distinct values, first seen first
  std::vector<std::string> logs;                           // the logs it was found in
  std::string meaning;
  // What it comes down to: the class of its first supported cause that names one, else its
  // signature's (cause_class.h); "" for a warning that is only a note.
  std::string cause_class;
  // Its class comes from a cause the evidence supports (a code, a fact), not only from its
  // signature: a consequence decided this way (a worker killed by SIGKILL) can name the cause.
  bool decided = false;
  std::vector<ranked_cause> causes;
  std::vector<suggested_check> checks;
};

// A fact found by reading the logs together.
struct cross_log_fact {
  std::string kind;  // the evidence names of cause rules: loopback, advertised_elsewhere, ...
  std::string text;
  std::vector<std::string> evidence;  // log:line
  std::string subject;                // what it is about, where a rule compares it (a host name)
};

struct unexplained_line {
  std::size_t log = 0;
  std::size_t line = 0;
  std::string text;
};

// The answer in one line: the first cause the logs hold, its class, and whether the network is
// to blame. The first failure that is not a consequence decides; consequences alone
// (timeouts, resets, generic error codes) give `undetermined`; findings (a degradation without a
// failure) decide when nothing failed. No diagnosis: "" (healthy, or unexplained lines).
struct verdict_info {
  std::string cause_class;
  bool network = false;
  std::optional<std::size_t> diagnosis;  // into explanation::diagnoses
  std::string first;                     // log:line of its first line
  std::string because;                   // why this one (and what it was preferred over)
};

struct explanation {
  std::vector<std::string> logs;
  std::vector<std::size_t> line_counts;
  std::string catalog_path, catalog_version;
  std::string formats_path;  // the generated formats read, "" for none
  std::size_t generated_formats = 0;
  std::vector<log_match> matches;
  std::vector<diagnosis> diagnoses;  // failures, then warnings, each in order of first sight
  std::vector<cross_log_fact> facts;
  std::vector<unexplained_line> unexplained;
  std::size_t unexplained_total = 0;  // beyond the listed ones too
  // Checks of the logs together: failures on two or more named hosts get `pairperf mesh --hosts`
  // over them, with the transport the first failure's signature names (gloo's own connections
  // where gloo failed).
  std::vector<suggested_check> across;
  verdict_info verdict;
  std::size_t context_lines = 0;  // recognized lines that only give context
  bool checked = false;           // --check ran the runnable checks
};

struct explain_options {
  std::uint16_t pairperf_port = 18515;  // where pairperf servers listen on the named hosts
  std::size_t max_unexplained = 40;     // listed (all are counted)
};

explanation explain_logs(const explain_catalog& catalog, const std::vector<log_input>& logs,
                         const explain_options& options);

// The exit-code contract: 1 when a --check could not run or failed; else 3 when failures were
// recognized; else 4 when failure-looking lines were left unexplained; else 0.
int exit_code(const explanation& e);
void to_json(nlohmann::json& j, const explanation& e);
void print_explanation(std::FILE* out, const explanation& e);

}  // namespace pairperf
