#include "diagnose/explain_read.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>

#include "core/errors.h"
#include "diagnose/log_line.h"

namespace pairperf {
namespace {

// std::regex recurses per character: a bounded line keeps a pathological log from the stack.
constexpr std::size_t max_line_chars = 2048;
constexpr std::size_t max_lines = 2'000'000;
// Indented lines joined to the line above them as one wrapped message.
constexpr std::size_t max_continuation = 3;

bool is_traceback_frame(const std::string& line) {
  static const std::regex frame(R"(^\s+File ".*", line \d+)");
  return line.find("File \"") != std::string::npos && std::regex_search(line, frame);
}

// Lines that say "failed" or "error" without being failures: NCCL's INFO lines (NCCL prints its
// failures as WARN; its INFO "Failed to find ncclNetPlugin_v6 symbol" is a probe), and the frames
// of a C++ or UCX backtrace below the failure that names them.
bool is_quiet(const std::string& text) {
  if (text.find(" NCCL INFO ") != std::string::npos) return true;
  if (text.rfind("frame #", 0) == 0) return true;
  // UCX's backtrace: " 3 0x000000000005de2d ncclGroupEnd()  ???:0"
  std::size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) ++i;
  return i > 0 && text.compare(i, 3, " 0x") == 0;
}

// `shown` is the line as the log printed it (trimmed, capped); the groups come from the cleaned
// text they matched (without a launcher's prefix, with a wrapped message's continuation).
void add_match(explanation& e, std::size_t log, std::size_t n, const std::string& shown,
               std::string origin, const signature* hit, const std::smatch& groups) {
  log_match m{log, n + 1, shown, std::move(origin), hit, {}};
  for (std::size_t g = 0; g < hit->fields.size(); ++g) {
    if (groups[g + 1].matched && groups[g + 1].length() > 0)
      m.fields[hit->fields[g]] = groups[g + 1].str();
  }
  e.matches.push_back(std::move(m));
}

std::string cleaned(const std::string& raw, std::string* origin = nullptr) {
  clean_result clean =
      clean_line(std::string_view(raw).substr(0, std::min(raw.size(), 2 * max_line_chars)));
  if (clean.text.size() > max_line_chars) clean.text.resize(max_line_chars);
  if (origin != nullptr) *origin = std::move(clean.origin);
  return std::move(clean.text);
}

std::string printed(const std::string& raw) {
  std::size_t b = 0, e = raw.size();
  while (b < e && (raw[b] == ' ' || raw[b] == '\t')) ++b;
  while (e > b && (raw[e - 1] == ' ' || raw[e - 1] == '\t' || raw[e - 1] == '\r')) --e;
  return raw.substr(b, std::min(e - b, max_line_chars));
}

// A generated socket-level format ("connect: %s") whose %s is an errno's words: the words
// decide (No route to host is the interface's, Connection refused the port's).
const signature* errno_words(const explain_catalog& catalog, const std::string& text,
                             const signature* hit, std::smatch& groups) {
  static const std::set<std::string> socket_level{"port", "link", "interface", "undetermined"};
  if (!hit->generated || socket_level.count(hit->cause_class) == 0) return hit;
  for (const std::size_t i : candidates(catalog, text)) {
    const signature& sig = catalog.signatures[i];
    if (!sig.last || text.find(sig.contains) == std::string::npos) continue;
    std::smatch words;
    if (!std::regex_search(text, words, sig.re)) continue;
    groups = std::move(words);
    return &sig;
  }
  return hit;
}

const signature* match_text(const explain_catalog& catalog, const std::string& text,
                            std::smatch& groups) {
  // A failure or warning before context: a line that carries both (torch's "NCCL error in: ...,
  // NCCL version 2.19.3") is the failure, not NCCL's version banner.
  const signature* context = nullptr;
  for (const std::size_t i : candidates(catalog, text)) {
    const signature& sig = catalog.signatures[i];
    if (text.find(sig.contains) == std::string::npos) continue;
    if (context != nullptr && sig.kind == line_kind::context) continue;
    if (!std::regex_search(text, groups, sig.re)) continue;
    if (sig.kind != line_kind::context) return errno_words(catalog, text, &sig, groups);
    context = &sig;
  }
  if (context != nullptr) std::regex_search(text, groups, context->re);
  return context;
}

std::size_t indent_of(const std::string& line) {
  return std::min(line.find_first_not_of(" \t"), line.size());
}

// A message a program or a paste wrapped: the lines right below that are indented deeper than it
// (and are not a traceback's frames), joined to it with one space. A log pasted with one indent
// on every line has no continuations: each of its lines stands alone.
std::size_t continuation_lines(const log_input& in, std::size_t n) {
  const std::size_t indent = indent_of(in.lines[n]);
  std::size_t k = 0;
  while (k < max_continuation && n + k + 1 < in.lines.size()) {
    const std::string& next = in.lines[n + k + 1];
    if (next.size() < 3 || indent_of(next) <= indent || indent_of(next) == next.size()) break;
    if (next.find("File \"") != std::string::npos || is_traceback_frame(in.lines[n + k])) break;
    ++k;
  }
  return k;
}

}  // namespace

void read_lines(const explain_catalog& catalog, const log_input& in, std::size_t log,
                const explain_options& options, explanation& e) {
  for (std::size_t n = 0; n < in.lines.size(); ++n) {
    std::string origin;
    std::string text = cleaned(in.lines[n], &origin);
    if (text.empty()) continue;
    const std::string shown = printed(in.lines[n]);
    std::smatch groups;
    const signature* hit = nullptr;
    // The wrapped message first (its fields may sit on the continuation), then the line alone.
    if (const std::size_t more = continuation_lines(in, n); more > 0) {
      std::string joined = text;
      for (std::size_t k = 1; k <= more; ++k) joined += " " + cleaned(in.lines[n + k]);
      if (joined.size() > max_line_chars) joined.resize(max_line_chars);
      hit = match_text(catalog, joined, groups);
      if (hit != nullptr) {
        text = std::move(joined);
        hit = match_text(catalog, text, groups);  // groups point into `text` now
      }
      if (hit != nullptr) {
        add_match(e, log, n, shown, std::move(origin), hit, groups);
        n += more;
        continue;
      }
    }
    hit = match_text(catalog, text, groups);
    if (hit != nullptr) {
      add_match(e, log, n, shown, std::move(origin), hit, groups);
      continue;
    }
    // A Python traceback quotes source code under each frame ("File ..., line N, in f"):
    // code that says timeout= is not a failure.
    if (n > 0 && is_traceback_frame(in.lines[n - 1])) continue;
    if (is_quiet(text)) continue;
    if (std::any_of(catalog.failure_looking.begin(), catalog.failure_looking.end(),
                    [&](const std::regex& re) { return std::regex_search(text, re); })) {
      ++e.unexplained_total;
      if (e.unexplained.size() < options.max_unexplained)
        e.unexplained.push_back({log, n + 1, shown});
    }
  }
}

log_input read_log(const std::string& name) {
  log_input in{name, {}};
  std::ifstream file;
  std::istream* s = &std::cin;
  if (name != "-") {
    file.open(name, std::ios::binary);
    if (!file) throw usage_error(fmt::format("cannot read log {}: {}", name, std::strerror(errno)));
    s = &file;
  }
  std::string line;
  while (std::getline(*s, line)) {
    if (in.lines.size() >= max_lines)
      throw usage_error(
          fmt::format("log {} has more than {} lines: give the part around the "
                      "failure",
                      name, max_lines));
    in.lines.push_back(std::move(line));
  }
  if (s->bad()) throw usage_error(fmt::format("cannot read log {}: read error", name));
  return in;
}

}  // namespace pairperf
