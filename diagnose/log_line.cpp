#include "diagnose/log_line.h"

#include <cctype>
#include <cstddef>

namespace pairperf {
namespace {

bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// "[0m", "[1;36m", "[38;5;208m" at `at` (after an optional ESC, or syslog's "#033" for it):
// the length, or 0.
std::size_t sgr_length(std::string_view s, std::size_t at) {
  std::size_t i = at;
  if (i < s.size() && s[i] == '\x1b') ++i;
  const bool syslog = s.substr(i, 4) == "#033";
  if (syslog) i += 4;
  if (i >= s.size() || s[i] != '[') return 0;
  ++i;
  const std::size_t body = i;
  while (i < s.size() && (digit(s[i]) || s[i] == ';')) ++i;
  if (i >= s.size() || s[i] != 'm') return 0;
  // Without ESC, only a real code: "[m" or "[0m" is a colour, "[am]" never gets here.
  if (s[at] != '\x1b' && !syslog && i == body) return 0;
  return i + 1 - at;
}

std::string without_colour(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '\x1b' || s[i] == '[' || s[i] == '#') {
      if (const std::size_t n = sgr_length(s, i); n > 0) {
        i += n;
        continue;
      }
    }
    if (s[i] == '\x1b') {  // another escape sequence: ESC and its one letter
      i += 2;
      continue;
    }
    out += s[i++];
  }
  return out;
}

std::size_t skip_spaces(std::string_view s, std::size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return i;
}

// "[rank3]:", "[default0]:" (torchrun), "[1,0]<stderr>:" (mpirun --tag-output).
std::size_t bracket_rank(std::string_view s, std::string& origin) {
  for (const std::string_view word : {"[rank", "[default"}) {
    if (s.substr(0, word.size()) != word) continue;
    std::size_t i = word.size();
    const std::size_t first = i;
    while (i < s.size() && digit(s[i])) ++i;
    if (i == first || s.substr(i, 2) != "]:") return 0;
    origin = "rank" + std::string(s.substr(first, i - first));
    return i + 2;
  }
  if (s.empty() || s[0] != '[') return 0;
  // "[trainer85612|12]:" (a launcher's host|rank)
  if (const std::size_t bar = s.find('|'), end = s.find("]:");
      bar != std::string_view::npos && end != std::string_view::npos && bar < end && end < 48 &&
      s.substr(0, end).find(' ') == std::string_view::npos) {
    origin = "rank" + std::string(s.substr(bar + 1, end - bar - 1));
    return end + 2;
  }
  const std::size_t close = s.find("]<std");
  if (close == std::string_view::npos || close > 16) return 0;
  const std::size_t colon = s.find(">:", close);
  if (colon == std::string_view::npos || colon > close + 10) return 0;
  const std::string_view ids = s.substr(1, close - 1);
  const std::size_t comma = ids.find(',');
  origin = "rank" + std::string(comma == std::string_view::npos ? ids : ids.substr(comma + 1));
  return colon + 2;
}

// "(RayWorker pid=123)", "(VllmWorkerProcess pid=7)", "(pid=9, ip=10.0.0.2)".
std::size_t paren_pid(std::string_view s, std::string& origin) {
  if (s.empty() || s[0] != '(') return 0;
  const std::size_t close = s.find(')');
  if (close == std::string_view::npos || close > 120) return 0;
  const std::string_view inside = s.substr(1, close - 1);
  if (inside.find("pid=") == std::string_view::npos) return 0;
  origin = std::string(inside.substr(0, inside.find(',')));
  return close + 1;
}

// "[pod/name/container] " (kubectl logs --prefix).
std::size_t kubectl_prefix(std::string_view s, std::string& origin) {
  if (s.substr(0, 5) != "[pod/") return 0;
  const std::size_t close = s.find("] ");
  if (close == std::string_view::npos) return 0;
  origin = std::string(s.substr(1, close - 1));
  return close + 1;
}

// "2024-05-01T10:00:00.123456789Z " (kubectl --timestamps, docker logs -t).
std::size_t iso_timestamp(std::string_view s) {
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':') return 0;
  for (const std::size_t d : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18}) {
    if (!digit(s[d])) return 0;
  }
  std::size_t i = 19;
  while (i < s.size() && (digit(s[i]) || s[i] == '.')) ++i;
  if (i < s.size() && s[i] == 'Z') ++i;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) i += 6;
  if (i >= s.size() || s[i] != ' ') return 0;
  return i;
}

// "Tue Jun 12 18:14:48 2018" (ctime(3)): Open MPI's mpirun --timestamp-output puts it right
// before its --tag-output tag ("Tue Jun 12 18:14:48 2018[1,15]<stderr>:").
std::size_t ctime_timestamp(std::string_view s) {
  if (s.size() < 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[13] != ':' || s[16] != ':' ||
      s[19] != ' ')
    return 0;
  for (const std::size_t a : {0, 1, 2, 4, 5, 6}) {
    if (std::isalpha(static_cast<unsigned char>(s[a])) == 0) return 0;
  }
  for (const std::size_t d : {9, 11, 12, 14, 15, 17, 18, 20, 21, 22, 23}) {
    if (!digit(s[d])) return 0;
  }
  if (s[8] != ' ' && !digit(s[8])) return 0;
  return 24;
}

// A separator pasted onto the line it came before ("=====...=====Tue Jun 12 ..."): three or
// more '=' glued to the text that goes on (UCX's "==== backtrace ====" is a heading, not that).
std::size_t separator_run(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && s[i] == '=') ++i;
  return i >= 3 && i < s.size() && s[i] != ' ' && s[i] != '\t' ? i : 0;
}

// "3: " (srun --label) and "worker-1  | " (docker compose).
std::size_t label_prefix(std::string_view s, std::string& origin) {
  std::size_t i = 0;
  while (i < s.size() && i < 6 && digit(s[i])) ++i;
  if (i > 0 && s.substr(i, 2) == ": ") {
    origin = "rank" + std::string(s.substr(0, i));
    return i + 1;
  }
  i = 0;
  while (i < s.size() && i < 64 &&
         (std::isalnum(static_cast<unsigned char>(s[i])) != 0 || s[i] == '-' || s[i] == '_' ||
          s[i] == '.'))
    ++i;
  const std::size_t name_end = i;
  i = skip_spaces(s, i);
  if (name_end == 0 || i == name_end || s.substr(i, 2) != "| ") return 0;
  origin = std::string(s.substr(0, name_end));
  return i + 1;
}

}  // namespace

clean_result clean_line(std::string_view raw) {
  clean_result r;
  const std::string plain = without_colour(raw);
  std::string_view s = plain;
  for (int round = 0; round < 6; ++round) {
    s = s.substr(skip_spaces(s, 0));
    std::string origin;
    std::size_t n = bracket_rank(s, origin);
    if (n == 0) n = paren_pid(s, origin);
    if (n == 0) n = kubectl_prefix(s, origin);
    if (n == 0) n = iso_timestamp(s);
    if (n == 0) n = ctime_timestamp(s);
    if (n == 0) n = separator_run(s);
    if (n == 0) n = label_prefix(s, origin);
    if (n == 0) break;
    if (!origin.empty() && r.origin.empty()) r.origin = origin;
    s = s.substr(n);
  }
  s = s.substr(skip_spaces(s, 0));
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  r.text = std::string(s);
  return r;
}

}  // namespace pairperf
