#include "transports/ucx/ucx_proto_table.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <map>
#include <regex>
#include <sstream>
#include <utility>

namespace pairperf::ucx {
namespace {

// The cells between the first and the last '|'.
std::vector<std::string> cells_of(std::string_view body) {
  std::vector<std::string> cells;
  const auto last = body.rfind('|');
  if (last == 0 || last == std::string_view::npos) return cells;
  body = body.substr(1, last - 1);
  for (std::size_t start = 0;;) {
    const auto bar = body.find('|', start);
    cells.push_back(collapse_spaces(body.substr(start, bar - start)));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return cells;
}

bool names_endpoint(std::string_view text) {
  return text.find("cfg#") != std::string_view::npos ||
         text.find("ep_cfg[") != std::string_view::npos;
}

// "0..92", "256K..inf", "0": the row's sizes.
bool parse_range(std::string_view cell, protocol_row& row) {
  // UCX 1.21 may put a selection counter before the range; the range is the last word.
  const auto space = cell.find_last_of(' ');
  if (space != std::string_view::npos) cell.remove_prefix(space + 1);
  const auto dots = cell.find("..");
  const auto first = parse_memunits(cell.substr(0, dots));
  const auto last = dots == std::string_view::npos ? first : parse_memunits(cell.substr(dots + 2));
  if (!first || !last || *last < *first) return false;
  row.first = *first;
  row.last = *last;
  row.range = std::string(cell);
  return true;
}

// The log prefix's "host:pid" ("[1737025510.220313] [node13:2857558:0]" -> "node13:2857558").
std::string source_of(std::string_view prefix) {
  static const std::regex who(R"(\[([^\]\s:]+:\d+)(?::\d+)?\])");
  std::match_results<std::string_view::const_iterator> m;
  if (std::regex_search(prefix.begin(), prefix.end(), m, who)) return m[1].str();
  return {};
}

struct parser {
  std::vector<protocol_table> tables;
  std::map<std::string, std::size_t> open;  // source -> the table its lines go to
  std::map<std::string, std::string> rule;  // source -> a separator not yet placed

  protocol_table* current(const std::string& source) {
    const auto it = open.find(source);
    return it == open.end() ? nullptr : &tables[it->second];
  }
  protocol_table& start(const std::string& source, std::string endpoint) {
    tables.push_back(protocol_table{source, std::move(endpoint), {}, {}, {}});
    open[source] = tables.size() - 1;
    // The separator just before a title opens the new table.
    if (auto r = rule.find(source); r != rule.end()) {
      tables.back().lines.push_back(std::move(r->second));
      rule.erase(r);
    }
    return tables.back();
  }

  void line(std::string_view text) {
    const auto at = text.find_first_of("|+");
    if (at == std::string_view::npos) return;
    const std::string source = source_of(text.substr(0, at));
    const std::string_view body = text.substr(at);
    if (body.front() == '+') {
      if (body.find_first_not_of("+-", 0) != std::string_view::npos) return;
      place_rule(source);
      rule[source] = std::string(body);
      return;
    }
    if (!names_endpoint(body)) place_rule(source);
    const std::vector<std::string> cells = cells_of(body);
    if (cells.size() == 2 && names_endpoint(cells[0])) {
      start(source, cells[0]).operation = cells[1];  // UCX 1.16-1.21
    } else if (cells.size() == 1 && names_endpoint(cells[0])) {
      start(source, cells[0]);  // UCX 1.22: the operation follows on its own row
    } else if (auto* t = current(source); t == nullptr) {
      return;
    } else if (cells.size() == 1 && t->operation.empty() && t->rows.empty()) {
      t->operation = cells[0];
    } else if (cells.size() == 3 || cells.size() == 4) {
      row(*t, std::vector<std::string>(cells.end() - 3, cells.end()));
    } else {
      return;
    }
    if (auto* t = current(source)) t->lines.emplace_back(body);
  }

  // A separator that did not open a table closes (or continues) the current one.
  void place_rule(const std::string& source) {
    const auto r = rule.find(source);
    if (r == rule.end()) return;
    if (auto* t = current(source)) t->lines.push_back(std::move(r->second));
    rule.erase(r);
  }
  void finish() {
    while (!rule.empty()) place_rule(rule.begin()->first);
  }

  static void row(protocol_table& t, const std::vector<std::string>& cells) {
    protocol_row r;
    if (!parse_range(cells[0], r)) return;  // the "Range | Description | Config" header
    r.description = cells[1];
    if (r.description.rfind("(?) ", 0) == 0) {
      r.estimated = true;
      r.description.erase(0, 4);
    }
    r.config = cells[2];
    r.lanes = config_lanes(r.config);
    t.rows.push_back(std::move(r));
  }
};

// UCX 1.16-1.22, src/ucp/proto/proto.c: ucp_operation_names -> ucp_operation_descs.
constexpr std::array<std::pair<std::string_view, std::string_view>, 13> operation_descs{{
    {"tag_send", "tagged message by ucp_tag_send*"},
    {"tag_send_sync", "synchronous tagged message by ucp_tag_send_sync*"},
    {"am_send", "active message by ucp_am_send*"},
    {"am_send_reply", "active message by ucp_am_send* with reply flag"},
    {"stream", "stream message by ucp_stream_send*"},
    {"put", "remote memory write by ucp_put*"},
    {"get", "remote memory read by ucp_get*"},
    {"amo_post", "posted atomic by ucp_atomic_op*"},
    {"amo_fetch", "fetching atomic by ucp_atomic_op*"},
    {"amo_cswap", "atomic compare-and-swap by ucp_atomic_op*"},
    {"rndv_send", "rendezvous data send"},
    {"rndv_recv", "rendezvous data fetch"},
    {"rndv_recv_drop", "rendezvous data drop"},
}};

// "tagged message by ucp_tag_send*() from host memory" (UCX 1.12-1.13 printed empty
// parentheses) -> without them.
std::string without_empty_parens(std::string s) {
  for (auto at = s.find("()"); at != std::string::npos; at = s.find("()")) s.erase(at, 2);
  return s;
}

// "rc_mlx5/mlx5_0:1/path0": the path is not part of the device.
bool lane_token(const std::string& word, lane_info& lane) {
  static const std::regex path(R"(/path\d+$)");
  return parse_resource_token(std::regex_replace(word, path, ""), lane);
}

}  // namespace

const protocol_row* protocol_table::row_for(std::size_t size) const {
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const protocol_row& r) {
    return r.first <= size && size <= r.last;
  });
  return it == rows.end() ? nullptr : &*it;
}

std::optional<std::size_t> parse_memunits(std::string_view text) {
  const std::string s = collapse_spaces(text);
  if (s == "inf") return std::numeric_limits<std::size_t>::max();
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  std::size_t digits = 0;
  std::uint64_t value = 0;
  for (; digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits])); ++digits) {
    if (value > (std::numeric_limits<std::uint64_t>::max() - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(s[digits] - '0');
  }
  const std::string_view unit = std::string_view(s).substr(digits);
  int shift = 0;
  if (unit == "K")
    shift = 10;
  else if (unit == "M")
    shift = 20;
  else if (unit == "G")
    shift = 30;
  else if (unit == "T")
    shift = 40;
  else if (!unit.empty())
    return std::nullopt;
  if (shift > 0 && value > (std::numeric_limits<std::uint64_t>::max() >> shift))
    return std::nullopt;
  return static_cast<std::size_t>(value << shift);
}

std::vector<lane_info> config_lanes(std::string_view config) {
  std::vector<lane_info> out;
  std::istringstream words{std::string(config)};
  for (std::string w; words >> w;) {
    while (!w.empty() && (w.back() == ',' || w.back() == ';')) w.pop_back();
    // "rc_mlx5/mlx5_0:1/path0": the path is not part of the device.
    lane_info lane;
    if (!lane_token(w, lane)) continue;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const lane_info& l) {
      return l.transport == lane.transport && l.device == lane.device;
    });
    if (!seen) out.push_back(std::move(lane));
  }
  return out;
}

std::vector<protocol_table> parse_protocol_tables(std::string_view text) {
  parser p;
  for (std::size_t start = 0; start < text.size();) {
    const auto end = std::min(text.find('\n', start), text.size());
    p.line(text.substr(start, end - start));
    start = end + 1;
  }
  p.finish();
  std::vector<protocol_table> out;
  for (auto& t : p.tables) {
    if (!t.operation.empty() && !t.rows.empty()) out.push_back(std::move(t));
  }
  return out;
}

namespace {

struct request_form {
  std::string title;  // the table title the request's operation has
  std::size_t length = 0;
  std::string said;  // "<protocol> <config> <estimate>"
};

// "{flags} tag_send(multi) from host memory length 1048576 <protocol> <config> <estimate>"
std::optional<request_form> request_form_of(std::string_view request_text) {
  static const std::regex form(
      R"(\}\s*([a-z_]+)(\([^)]*\))?\s+((?:from|into) .+?) length (\d+) (.+)$)");
  const std::string text = collapse_spaces(request_text);
  std::smatch m;
  if (!std::regex_search(text, m, form)) return std::nullopt;
  const auto desc = std::find_if(operation_descs.begin(), operation_descs.end(),
                                 [&](const auto& d) { return d.first == m[1].str(); });
  const auto length = parse_memunits(m[4].str());
  if (desc == operation_descs.end() || !length) return std::nullopt;
  return request_form{std::string(desc->second) + m[2].str() + " " + m[3].str(), *length,
                      m[5].str()};
}

}  // namespace

std::optional<protocol_choice> choice_for_request(const std::vector<protocol_table>& tables,
                                                  std::string_view request_text) {
  const auto req = request_form_of(request_text);
  if (!req) return std::nullopt;
  for (const auto& t : tables) {
    const std::string op = without_empty_parens(t.operation);
    if (op != req->title && op.rfind(req->title + " ", 0) != 0) continue;
    const protocol_row* r = t.row_for(req->length);
    if (r == nullptr) continue;
    const std::string expected = r->description + " " + r->config;
    if (req->said == expected || req->said.rfind(expected + " ", 0) == 0)
      return protocol_choice{&t, *r, req->length};
  }
  return std::nullopt;
}

std::optional<protocol_choice> request_selection(std::string_view request_text) {
  const auto req = request_form_of(request_text);
  if (!req) return std::nullopt;
  static const std::regex estimate(R"( [0-9.]+ MB/s [0-9.]+ us$)");
  const std::string said = std::regex_replace(req->said, estimate, "");
  static const std::regex share(R"(^\d+%$)");
  std::istringstream words(said);
  std::vector<std::string> protocol, config;
  for (std::string w; words >> w;) {
    lane_info lane;
    if (config.empty() && !lane_token(w, lane) && !std::regex_match(w, share)) {
      protocol.push_back(w);
    } else {
      config.push_back(w);
    }
  }
  protocol_choice c;
  c.length = req->length;
  for (const auto& w : protocol) c.row.description += (c.row.description.empty() ? "" : " ") + w;
  for (const auto& w : config) c.row.config += (c.row.config.empty() ? "" : " ") + w;
  c.row.lanes = config_lanes(c.row.config);
  c.row.first = c.row.last = req->length;
  c.row.range = std::to_string(req->length);
  if (c.row.lanes.empty() || c.row.description.empty()) return std::nullopt;
  return c;
}

}  // namespace pairperf::ucx
