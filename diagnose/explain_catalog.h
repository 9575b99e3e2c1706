#pragma once
// The catalog `pairperf explain` reads logs with: data, not code (diagnose/explain-catalog.json,
// installed beside the binary's private files). Each signature names a library, a literal that
// every line it matches contains (a cheap filter before the regular expression), the pattern, the
// fields its groups capture, what a match means, the causes it may have (each with the evidence
// that raises it) and the pairperf commands that prove it. The catalog is validated when loaded;
// an invalid one is an error that names the entry and the problem (catalog_error).
#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace pairperf {

class catalog_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a matched line is: a failure the application met, a warning that predicts one, or context
// (settings, the addresses a library advertises, healthy progress) that other lines are read with.
enum class line_kind { failure, warning, context };
const char* to_string(line_kind k) noexcept;

// When a cause is supported by the logs: a field of the match matches a pattern, or a fact found
// across the logs holds (evidence.h's names: loopback, advertised_elsewhere, setting_differs,
// several_logs).
struct cause_rule {
  std::string text;
  std::string when_field;  // "" = no field condition
  std::optional<std::regex> when_matches;
  std::string when_matches_text;
  std::string when_evidence;  // "" = no cross-log condition
  // The cause class this cause belongs to when the evidence supports it ("" = the signature's).
  std::string cause_class;
};

struct signature {
  std::string id;       // library.what, unique
  std::string library;  // gloo, torch, nccl, ucx, libfabric, pairperf, vllm, python
  line_kind kind = line_kind::failure;
  std::string stage;     // init, rendezvous, connect, transport selection, collective, ...
  std::string contains;  // a literal every matching line contains
  std::string pattern;
  std::regex re;
  std::vector<std::string> fields;  // names of the pattern's groups, in order
  std::string meaning;              // may name fields as {field}
  std::vector<cause_rule> causes;   // in the order of their likelihood without evidence
  std::vector<std::string> checks;  // pairperf commands; {field}, optional parts in [ ]
  // The doctor finding subjects this failure is about (GLOO_SOCKET_IFNAME, UCX_NET_DEVICES,
  // path): a doctor check confirms it only with a `fails` finding on one of them; empty = its
  // exit code decides.
  std::vector<std::string> subjects;
  // The pairperf transport that connects as this library does (gloo, ucx, ofi, tcp): the mesh
  // over the hosts of the logs uses it; "" = the default.
  std::string transport;
  std::string source;  // where the message format comes from (file, version)
  // A cross-log fact the line proves by itself (a cause rule's evidence name, such as loopback
  // for torch's "Using the loopback address" warning); "" for none.
  std::string implies;
  // What the failure comes down to (cause_class.h); "" for context and for warnings that are
  // notes. A warning with a class is a finding: the job degraded without failing.
  std::string cause_class;
  // A consequence of a first cause elsewhere (a watchdog timeout, a reset, a generic error
  // code): the verdict prefers any other failure, and one of these alone is `undetermined`.
  bool consequence = false;
  // Generated from a library's source (explain-formats.json): the file, line and versions.
  bool generated = false;
  // A generic text (an errno's strerror) that any library may print: tried after every
  // library's own formats, the generated ones too.
  bool last = false;
  // A warning that, alone, leaves the run's outcome open: the library retries past it in a run
  // that goes on, and prints the same words where the run fails (c10d's store recvValue
  // warning). Without a failure beside it the logs are inconclusive (exit 4), neither healthy
  // nor a failure.
  bool inconclusive = false;
};

struct explain_catalog {
  std::string path;
  std::string version;  // the catalog's own schema_version
  std::vector<signature> signatures;
  // Lines that look like failures (for the lines no signature explains, exit 4).
  std::vector<std::regex> failure_looking;
  // The generated formats' file and how many it added (after the hand-written signatures).
  std::string formats_path;
  std::size_t generated = 0;
  // The signatures by the first 4 bytes of their literal (and those with a shorter literal):
  // a line is tried only against the signatures whose literal could start somewhere in it.
  std::unordered_map<std::uint32_t, std::vector<std::size_t>> by_gram;
  std::vector<std::size_t> short_literals;
};

// The indices of the signatures whose literal `text` contains, in catalog order.
std::vector<std::size_t> candidates(const explain_catalog& catalog, const std::string& text);

// The field names signatures may capture; checks and causes may name only these (and
// pairperf_port, filled from the command line).
const std::vector<std::string>& known_fields();

// Parses and validates a catalog document; `path` only names it in errors.
explain_catalog parse_catalog(const std::string& text, const std::string& path);
// Reads `path` and parses it. Throws catalog_error.
explain_catalog load_catalog(const std::string& path);

// Adds the formats a library's source can print (scripts/gen-explain-formats writes them) as
// signatures after the hand-written ones, which keep the lines they match. Throws catalog_error.
void add_formats(explain_catalog& catalog, const std::string& text, const std::string& path);
void load_formats(explain_catalog& catalog, const std::string& path);

}  // namespace pairperf
