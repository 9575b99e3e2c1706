#include "diagnose/explain_catalog.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "diagnose/cause_class.h"

namespace pairperf {
namespace {

constexpr const char* catalog_schema = "pairperf.explain-catalog";
constexpr int catalog_major = 1;

// loopback, advertised_elsewhere, setting_differs, several_logs: read across the logs;
// rdma_in_use: a line shows an RDMA device the library uses (NET/IB : Using [0]mlx5_0:1/RoCE);
// bridge_interface: a library chose a container or VM bridge (docker0, virbr0, cni0, br-...);
// link_local: a library chose or dials a link-local address (169.254.x, fe80::), which no
// other node routes to; container_hostname: NCCL's line prefix names a host called like a
// Docker container (12 hex digits, Docker's default hostname: the container ID's start);
// rdma_requested: the job set NCCL's InfiniBand/RoCE variables (NCCL_IB_HCA, NCCL_IB_GID_INDEX,
// ..., NCCL_IB_DISABLE=0), so it expects RDMA between nodes.
const std::vector<std::string> evidence_names{
    "loopback",     "advertised_elsewhere", "setting_differs",
    "several_logs", "rdma_in_use",          "bridge_interface",
    "link_local",   "container_hostname",   "rdma_requested"};

[[noreturn]] void fail(const std::string& path, const std::string& where, const std::string& what) {
  throw catalog_error(fmt::format("explain catalog {}: {}: {}", path, where, what));
}

std::string text_of(const nlohmann::json& j, const char* key, const std::string& path,
                    const std::string& where, bool required = true) {
  const auto it = j.find(key);
  if (it == j.end()) {
    if (required) fail(path, where, fmt::format("'{}' is missing", key));
    return {};
  }
  if (!it->is_string()) fail(path, where, fmt::format("'{}' must be a string", key));
  return it->get<std::string>();
}

std::string class_of(const nlohmann::json& j, const std::string& path, const std::string& where) {
  std::string id = text_of(j, "class", path, where, false);
  if (!id.empty() && find_cause_class(id) == nullptr)
    fail(path, where, fmt::format("class '{}' is not one of {}", id, cause_class_ids()));
  return id;
}

std::vector<std::string> texts_of(const nlohmann::json& j, const char* key, const std::string& path,
                                  const std::string& where) {
  std::vector<std::string> out;
  const auto it = j.find(key);
  if (it == j.end()) return out;
  if (!it->is_array()) fail(path, where, fmt::format("'{}' must be a list of strings", key));
  for (const auto& v : *it) {
    if (!v.is_string()) fail(path, where, fmt::format("'{}' must be a list of strings", key));
    out.push_back(v.get<std::string>());
  }
  return out;
}

void only_keys(const nlohmann::json& j, std::initializer_list<const char*> keys,
               const std::string& path, const std::string& where) {
  for (const auto& item : j.items()) {
    const std::string& k = item.key();
    if (std::none_of(keys.begin(), keys.end(), [&](const char* known) { return k == known; }))
      fail(path, where, fmt::format("unknown key '{}' (known: {})", k, fmt::join(keys, ", ")));
  }
}

std::regex compile(const std::string& pattern, const std::string& path, const std::string& where) {
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    fail(path, where,
         fmt::format("pattern '{}' is not a valid regular expression: {}", pattern, e.what()));
  }
}

bool is_field(const std::string& name) {
  const auto& f = known_fields();
  return std::find(f.begin(), f.end(), name) != f.end();
}

// Every {name} in `text` must be a known field (or pairperf_port in checks).
void check_placeholders(const std::string& text, const std::string& path, const std::string& where,
                        bool allow_port) {
  for (std::size_t at = text.find('{'); at != std::string::npos; at = text.find('{', at + 1)) {
    const auto end = text.find('}', at);
    if (end == std::string::npos) fail(path, where, fmt::format("unclosed '{{' in '{}'", text));
    const std::string name = text.substr(at + 1, end - at - 1);
    if (!is_field(name) && !(allow_port && name == "pairperf_port"))
      fail(path, where, fmt::format("'{{{}}}' in '{}' is not a field", name, text));
  }
}

line_kind parse_kind(const std::string& s, const std::string& path, const std::string& where) {
  if (s == "failure") return line_kind::failure;
  if (s == "warning") return line_kind::warning;
  if (s == "context") return line_kind::context;
  fail(path, where, fmt::format("kind '{}' is not one of failure, warning, context", s));
}

cause_rule parse_cause(const nlohmann::json& c, const std::string& path, const std::string& where) {
  if (!c.is_object()) fail(path, where, "a cause must be an object");
  only_keys(c, {"text", "when", "class"}, path, where);
  cause_rule r;
  r.text = text_of(c, "text", path, where);
  r.cause_class = class_of(c, path, where);
  check_placeholders(r.text, path, where, false);
  if (const auto w = c.find("when"); w != c.end()) {
    if (!w->is_object()) fail(path, where, "'when' must be an object");
    only_keys(*w, {"field", "matches", "evidence"}, path, where + " when");
    r.when_field = text_of(*w, "field", path, where, false);
    r.when_matches_text = text_of(*w, "matches", path, where, false);
    r.when_evidence = text_of(*w, "evidence", path, where, false);
    if (r.when_field.empty() != r.when_matches_text.empty())
      fail(path, where, "'when' needs both 'field' and 'matches', or 'evidence'");
    if (!r.when_field.empty()) {
      if (!is_field(r.when_field))
        fail(path, where, fmt::format("'when' names '{}', not a field", r.when_field));
      r.when_matches = compile(r.when_matches_text, path, where);
    }
    if (!r.when_evidence.empty() && std::find(evidence_names.begin(), evidence_names.end(),
                                              r.when_evidence) == evidence_names.end())
      fail(path, where,
           fmt::format("evidence '{}' is not one of {}", r.when_evidence,
                       fmt::join(evidence_names, ", ")));
    if (r.when_field.empty() && r.when_evidence.empty()) fail(path, where, "'when' is empty");
  }
  return r;
}

signature parse_signature(const nlohmann::json& e, std::size_t index, const std::string& path) {
  std::string where = fmt::format("signature {}", index + 1);
  if (!e.is_object()) fail(path, where, "must be an object");
  only_keys(e,
            {"id", "library", "kind", "stage", "contains", "pattern", "fields", "meaning", "causes",
             "checks", "subjects", "transport", "source", "implies", "class", "consequence", "last",
             "inconclusive"},
            path, where);
  signature s;
  s.id = text_of(e, "id", path, where);
  where = fmt::format("signature '{}'", s.id);
  if (s.id.empty() || s.id.find('.') == std::string::npos)
    fail(path, where, "an id is library.what");
  s.library = text_of(e, "library", path, where);
  if (s.library.empty()) fail(path, where, "'library' is empty");
  s.kind = parse_kind(text_of(e, "kind", path, where), path, where);
  s.stage = text_of(e, "stage", path, where);
  s.contains = text_of(e, "contains", path, where);
  if (s.contains.empty()) fail(path, where, "'contains' is empty (it filters lines cheaply)");
  s.pattern = text_of(e, "pattern", path, where);
  s.re = compile(s.pattern, path, where);
  s.fields = texts_of(e, "fields", path, where);
  for (const auto& f : s.fields) {
    if (!is_field(f))
      fail(path, where,
           fmt::format("field '{}' is not one of {}", f, fmt::join(known_fields(), ", ")));
  }
  if (s.re.mark_count() != s.fields.size())
    fail(path, where,
         fmt::format("the pattern has {} group(s) and {} field name(s): name every group, and "
                     "use (?: ) for the others",
                     s.re.mark_count(), s.fields.size()));
  s.meaning = text_of(e, "meaning", path, where);
  check_placeholders(s.meaning, path, where, false);
  if (const auto c = e.find("causes"); c != e.end()) {
    if (!c->is_array()) fail(path, where, "'causes' must be a list");
    for (const auto& cause : *c) s.causes.push_back(parse_cause(cause, path, where));
  }
  s.checks = texts_of(e, "checks", path, where);
  for (const auto& check : s.checks) {
    if (check.rfind("pairperf ", 0) != 0)
      fail(path, where, fmt::format("check '{}' is not a pairperf command", check));
    check_placeholders(check, path, where, true);
  }
  s.subjects = texts_of(e, "subjects", path, where);
  for (const auto& subject : s.subjects) {
    if (subject.empty()) fail(path, where, "a subject is empty");
  }
  s.transport = text_of(e, "transport", path, where, false);
  s.source = text_of(e, "source", path, where, false);
  s.implies = text_of(e, "implies", path, where, false);
  if (!s.implies.empty() &&
      std::find(evidence_names.begin(), evidence_names.end(), s.implies) == evidence_names.end())
    fail(path, where,
         fmt::format("'implies' {} is not one of {}", s.implies, fmt::join(evidence_names, ", ")));
  if (s.kind != line_kind::context && s.meaning.empty())
    fail(path, where, "a failure or warning needs its meaning");
  s.cause_class = class_of(e, path, where);
  if (s.kind == line_kind::failure && s.cause_class.empty())
    fail(path, where, fmt::format("a failure needs its class (one of {})", cause_class_ids()));
  if (s.kind == line_kind::context && !s.cause_class.empty())
    fail(path, where, "context has no class");
  for (const auto& [key, flag] : {std::pair{"consequence", &s.consequence},
                                  {"last", &s.last},
                                  {"inconclusive", &s.inconclusive}}) {
    if (const auto c = e.find(key); c != e.end()) {
      if (!c->is_boolean()) fail(path, where, fmt::format("'{}' must be true or false", key));
      *flag = c->get<bool>();
    }
  }
  if (s.inconclusive && (s.kind != line_kind::warning || !s.cause_class.empty()))
    fail(path, where, "only a warning without a class is inconclusive");
  return s;
}

std::uint32_t gram_at(const std::string& s, std::size_t at) {
  std::uint32_t g = 0;
  std::memcpy(&g, s.data() + at, sizeof g);
  return g;
}

void index_signatures(explain_catalog& c) {
  // The order lines are tried in (stable: the catalog's order within each): the hand-written
  // signatures, the generated formats that name a class, the generic texts (an errno's words),
  // and last the generated formats that name none (their errno text, if any, decides).
  auto rank = [](const signature& s) {
    if (s.last) return 2;
    if (!s.generated) return 0;
    return s.consequence && s.cause_class == "undetermined" ? 3 : 1;
  };
  std::stable_sort(c.signatures.begin(), c.signatures.end(),
                   [&](const signature& a, const signature& b) { return rank(a) < rank(b); });
  c.by_gram.clear();
  c.short_literals.clear();
  for (std::size_t i = 0; i < c.signatures.size(); ++i) {
    const std::string& lit = c.signatures[i].contains;
    if (lit.size() < sizeof(std::uint32_t))
      c.short_literals.push_back(i);
    else
      c.by_gram[gram_at(lit, 0)].push_back(i);
  }
}

}  // namespace

std::vector<std::size_t> candidates(const explain_catalog& catalog, const std::string& text) {
  std::vector<std::size_t> out = catalog.short_literals;
  if (text.size() >= sizeof(std::uint32_t)) {
    for (std::size_t at = 0; at + sizeof(std::uint32_t) <= text.size(); ++at) {
      const auto it = catalog.by_gram.find(gram_at(text, at));
      if (it == catalog.by_gram.end()) continue;
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const char* to_string(line_kind k) noexcept {
  switch (k) {
    case line_kind::failure:
      return "failure";
    case line_kind::warning:
      return "warning";
    case line_kind::context:
      return "context";
  }
  return "?";
}

const std::vector<std::string>& known_fields() {
  // addr/port: the peer a line names; local_addr: an address this node advertises or binds;
  // error: the system's or library's error text; var/value: a setting the log prints; ifaces:
  // a list of interfaces a library uses, as NCCL prints them ("[0]eth0:10.0.0.1<0> [1]...").
  static const std::vector<std::string> fields{
      "addr",   "port",     "local_addr", "iface",     "host",       "rank",    "pid",
      "error",  "var",      "value",      "version",   "timeout_ms", "timeout", "transport",
      "device", "provider", "op",         "peer_rank", "ifaces"};
  return fields;
}

explain_catalog parse_catalog(const std::string& text, const std::string& path) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, "JSON", e.what());
  }
  if (!doc.is_object()) fail(path, "document", "must be an object");
  only_keys(doc, {"$comment", "schema", "schema_version", "failure_looking", "signatures"}, path,
            "document");
  if (text_of(doc, "schema", path, "document") != catalog_schema)
    fail(path, "document", fmt::format("'schema' must be '{}'", catalog_schema));
  explain_catalog c;
  c.path = path;
  c.version = text_of(doc, "schema_version", path, "document");
  int major = -1;
  if (std::sscanf(c.version.c_str(), "%d.", &major) != 1 || major != catalog_major)
    fail(path, "document",
         fmt::format("schema_version {} is not {}.x, the catalog this pairperf reads", c.version,
                     catalog_major));
  for (const auto& p : texts_of(doc, "failure_looking", path, "document"))
    c.failure_looking.push_back(compile(p, path, "failure_looking"));
  const auto sigs = doc.find("signatures");
  if (sigs == doc.end() || !sigs->is_array() || sigs->empty())
    fail(path, "document", "'signatures' must be a non-empty list");
  std::set<std::string> ids;
  for (std::size_t i = 0; i < sigs->size(); ++i) {
    signature s = parse_signature((*sigs)[i], i, path);
    if (!ids.insert(s.id).second)
      fail(path, fmt::format("signature '{}'", s.id), "the id is used twice");
    c.signatures.push_back(std::move(s));
  }
  index_signatures(c);
  return c;
}

namespace {

std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw catalog_error(fmt::format("{} {}: cannot be read", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// One generated format as a signature. A library's error and fatal lines are failures, and so
// are NCCL's WARN lines (NCCL prints its errors as WARN, and so does its OFI plugin through
// NCCL's logger) and libfabric's that name a decisive class; other warnings are notes.
// A format the generator could not class is recognized but decides nothing: a consequence whose
// class is `undetermined`.
signature format_signature(const nlohmann::json& f, std::size_t index, const std::string& path) {
  std::string where = fmt::format("format {}", index + 1);
  if (!f.is_object()) fail(path, where, "must be an object");
  signature s;
  s.generated = true;
  s.id = text_of(f, "id", path, where);
  where = fmt::format("format '{}'", s.id);
  s.library = text_of(f, "library", path, where);
  const std::string level = text_of(f, "level", path, where);
  std::string cls = text_of(f, "class", path, where);
  s.contains = text_of(f, "literal", path, where);
  if (s.contains.empty()) fail(path, where, "'literal' is empty");
  s.pattern = text_of(f, "regex", path, where);
  s.re = compile(s.pattern, path, where);
  const std::string file = text_of(f, "file", path, where);
  const auto versions = texts_of(f, "versions", path, where);
  std::string line;
  if (const auto l = f.find("line"); l != f.end() && l->is_number_integer())
    line = fmt::format(":{}", l->get<int>());
  s.source = fmt::format("{} {}{} ({}: '{}')", s.library, file, line, fmt::join(versions, ", "),
                         text_of(f, "format", path, where));
  if (level == "info") {
    s.kind = line_kind::context;
    if (text_of(f, "evidence", path, where, false) == "net_ib_using") s.implies = "rdma_in_use";
    return s;
  }
  if (level != "warn" && level != "error" && level != "fatal")
    fail(path, where, fmt::format("level '{}' is not info, warn, error or fatal", level));
  // libfabric's WARN is its highest level, but every EFA job prints some that change nothing
  // (hmem interfaces absent, userfaultfd or xpmem unavailable): its WARN lines are failures only
  // where their class says the network, a peer that is gone or two versions.
  const cause_class_info* info = find_cause_class(cls);
  const bool decisive =
      (info != nullptr && info->network) || cls == "peer_died" || cls == "version";
  const bool warn_is_error =
      s.library == "nccl" || s.library == "aws-ofi-nccl" || (s.library == "libfabric" && decisive);
  s.kind = level != "warn" || warn_is_error ? line_kind::failure : line_kind::warning;
  if (cls == "unclassified") {
    cls = s.kind == line_kind::failure ? "undetermined" : "";
    s.consequence = true;
  } else if (find_cause_class(cls) == nullptr) {
    fail(path, where, fmt::format("class '{}' is not one of {}", cls, cause_class_ids()));
  }
  if (s.kind == line_kind::failure) s.cause_class = cls;
  // A reset or a closed connection is what the survivor sees: whether the peer crashed or the
  // link dropped, the cause is elsewhere.
  if (cls == "link" || cls == "peer_died") s.consequence = true;
  s.stage = file;
  s.meaning = fmt::format("{} printed its message '{}' ({}{}, in {})", s.library,
                          text_of(f, "format", path, where), file, line, fmt::join(versions, ", "));
  return s;
}

}  // namespace

explain_catalog load_catalog(const std::string& path) {
  return parse_catalog(read_text(path, "explain catalog"), path);
}

void add_formats(explain_catalog& catalog, const std::string& text, const std::string& path) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, "JSON", e.what());
  }
  if (!doc.is_object() || text_of(doc, "schema", path, "document") != "pairperf.explain-formats")
    fail(path, "document", "'schema' must be 'pairperf.explain-formats'");
  const auto formats = doc.find("formats");
  if (formats == doc.end() || !formats->is_array())
    fail(path, "document", "'formats' must be a list");
  std::set<std::string> ids;
  for (const auto& s : catalog.signatures) ids.insert(s.id);
  for (std::size_t i = 0; i < formats->size(); ++i) {
    signature s = format_signature((*formats)[i], i, path);
    if (!ids.insert(s.id).second)
      fail(path, fmt::format("format '{}'", s.id), "the id is used twice");
    catalog.signatures.push_back(std::move(s));
    ++catalog.generated;
  }
  catalog.formats_path = path;
  index_signatures(catalog);
}

void load_formats(explain_catalog& catalog, const std::string& path) {
  add_formats(catalog, read_text(path, "explain formats"), path);
}

}  // namespace pairperf
