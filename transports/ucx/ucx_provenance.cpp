#include "transports/ucx/ucx_provenance.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>

namespace pairperf::ucx {
namespace {

bool is_number(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
  });
}

}  // namespace

std::string collapse_spaces(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

bool lane_info::carries_data() const {
  return std::any_of(usage.begin(), usage.end(), [](const std::string& u) {
    return u.rfind("wireup", 0) != 0 && u.rfind("ka", 0) != 0;
  });
}

bool parse_resource_token(std::string_view token, lane_info& out) {
  // Strip a "N:" lane-number prefix.
  if (const auto colon = token.find(':');
      colon != std::string_view::npos && colon < token.find('/') &&
      std::all_of(token.begin(), token.begin() + static_cast<long>(colon),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    token.remove_prefix(colon + 1);
  }
  const auto slash = token.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= token.size()) return false;
  std::string_view tl = token.substr(0, slash);
  std::string_view dev = token.substr(slash + 1);
  if (tl.find('[') != std::string_view::npos || dev.find('[') != std::string_view::npos ||
      dev.find('/') != std::string_view::npos)
    return false;
  if (!std::all_of(tl.begin(), tl.end(), [](char c) {
        return std::islower(static_cast<unsigned char>(c)) ||
               std::isdigit(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return false;
  }
  if (tl == "MB" || dev == "s") return false;  // "MB/s" in an estimate
  // A trailing ".N" is the path index of the device, not part of its name.
  if (const auto dot = dev.rfind('.');
      dot != std::string_view::npos && is_number(dev.substr(dot + 1)))
    dev = dev.substr(0, dot);
  out.transport = std::string(tl);
  out.device = std::string(dev);
  return true;
}

std::vector<lane_info> context_resources(std::string_view text) {
  static const std::regex resource_line(R"(resource\s+\d+\s*:.*--\s+(\S+))");
  std::vector<lane_info> out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    lane_info r;
    if (std::regex_search(line, m, resource_line) && parse_resource_token(m[1].str(), r))
      out.push_back(std::move(r));
  }
  return out;
}

std::vector<lane_info> parse_ep_info(std::string_view text) {
  static const std::regex lane_line(R"(lane\[(\d+)\]:\s*(\S+)\s+md\[\d+\]\s+->\s+\S+\s*(.*))");
  std::vector<lane_info> lanes;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, lane_line)) continue;
    lane_info lane;
    if (!parse_resource_token(m[2].str(), lane)) continue;
    lane.index = std::stoi(m[1].str());
    std::istringstream words(m[3].str());
    std::string w;
    // Usage words: am, am_bw#0, rma_bw#1, amo, tag, wireup, ka; skip "seg N" style fields.
    bool skip_next = false;
    while (words >> w) {
      if (skip_next) {
        skip_next = false;
        continue;
      }
      if (w == "seg") {
        skip_next = true;
        continue;
      }
      lane.usage.push_back(w);
    }
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

request_info parse_request_info(std::string_view text) {
  request_info info;
  info.raw = collapse_spaces(text);
  std::istringstream words(info.raw);
  std::vector<std::string> tokens;
  for (std::string w; words >> w;) tokens.push_back(w);
  for (const auto& t : tokens) {
    lane_info lane;
    if (parse_resource_token(t, lane)) {
      const bool seen = std::any_of(info.lanes.begin(), info.lanes.end(), [&](const lane_info& l) {
        return l.transport == lane.transport && l.device == lane.device;
      });
      if (!seen) info.lanes.push_back(std::move(lane));
    }
  }
  // UCX 1.13 names the protocol by its progress function.
  static const std::regex progress_fn(R"(ucp_proto_progress_(\w+)\(\))");
  static const std::regex proto_fn(R"(ucp_(\w+)_proto\w*\(\))");
  std::smatch m;
  if (std::regex_search(info.raw, m, progress_fn) || std::regex_search(info.raw, m, proto_fn)) {
    std::string p = m[1].str();
    std::replace(p.begin(), p.end(), '_', ' ');
    info.protocol = p;
    return info;
  }
  // UCX 1.18+: "... length N <protocol words> <tl/dev> [estimate]".
  static const std::regex newer(R"(length \d+ (.+?)(?: \S+/\S+.*)?$)");
  if (std::regex_search(info.raw, m, newer)) {
    std::string p = m[1].str();
    // Drop a trailing estimate such as "11145.0 MB/s 89.73 us" when no lane token preceded it.
    static const std::regex estimate(R"(\s+[0-9.]+ MB/s.*$)");
    info.protocol = std::regex_replace(p, estimate, "");
    return info;
  }
  info.protocol = info.raw;
  return info;
}

}  // namespace pairperf::ucx

namespace pairperf::ucx {

std::string protocol_for_size(std::string_view ep_text, std::string_view operation,
                              std::size_t size) {
  std::istringstream in{std::string(ep_text)};
  const std::string key = std::string(operation) + ":";
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string w, table;
    while (words >> w && (w == "#")) {
    }
    if (w != key || !(words >> table)) continue;
    // "0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)": each number closes the
    // protocol before it.
    std::string current;
    std::size_t start = 0;
    while (start <= table.size()) {
      const std::size_t dots = std::min(table.find("..", start), table.size());
      const std::string part = table.substr(start, dots - start);
      start = dots + 2;
      if (part.size() > 2 && part.front() == '<' && part.back() == '>') {
        current = part.substr(1, part.size() - 2);
      } else if (part == "(inf)") {
        return current;
      } else if (!current.empty() && is_number(part) && size <= std::stoull(part)) {
        return current;
      }
    }
    return current;
  }
  return {};
}

}  // namespace pairperf::ucx

namespace pairperf::ucx {

std::vector<lane_info> parse_log_line(std::string_view line) {
  std::vector<lane_info> lanes;
  if (line.find("ep_cfg[") == std::string_view::npos &&
      line.find(" cfg#") == std::string_view::npos)
    return lanes;
  static const std::regex group(R"(([a-z_]+)\(([^)]*)\))");
  const std::string text(line);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), group);
       it != std::sregex_iterator(); ++it) {
    const std::string usage = (*it)[1].str();
    std::istringstream words((*it)[2].str());
    for (std::string w; words >> w;) {
      lane_info lane;
      if (!parse_resource_token(w, lane)) continue;
      auto same = std::find_if(lanes.begin(), lanes.end(), [&](const lane_info& l) {
        return l.transport == lane.transport && l.device == lane.device;
      });
      if (same == lanes.end()) {
        lane.usage.push_back(usage);
        lanes.push_back(std::move(lane));
      } else if (std::find(same->usage.begin(), same->usage.end(), usage) == same->usage.end()) {
        same->usage.push_back(usage);
      }
    }
  }
  return lanes;
}

lane_kind kind_of_transport(std::string_view t) {
  const auto starts = [&](std::string_view prefix) { return t.rfind(prefix, 0) == 0; };
  for (std::string_view sm : {"posix", "sysv", "cma", "knem", "xpmem", "self"}) {
    if (t == sm) return lane_kind::shared_memory;
  }
  if (t == "tcp") return lane_kind::network;
  if (starts("rc_") || starts("dc_") || starts("ud_") || starts("ugni_") || t == "rc" ||
      t == "dc" || t == "ud")
    return lane_kind::rdma;
  if (t == "cuda_ipc" || t == "rocm_ipc" || t == "ze_ipc") return lane_kind::gpu_ipc;
  if (t == "cuda_copy" || t == "rocm_copy" || t == "ze_copy" || t == "gdr_copy")
    return lane_kind::staged_copy;
  return lane_kind::unknown;
}

std::string staging_in(std::string_view text) {
  for (std::string_view phrase : {"software emulation", "rendezvous pipeline cuda_copy",
                                  "fragmented copy-in copy-out", "copy-in copy-out"}) {
    if (text.find(phrase) != std::string_view::npos) return std::string(phrase);
  }
  return {};
}

std::vector<lane> bulk_lanes(std::string_view protocol_text, std::string_view request_text,
                             const std::vector<lane_info>& endpoint_lanes,
                             const std::vector<lane_info>& request_lanes) {
  std::vector<lane> out;
  const auto add = [&](const std::string& transport, const std::string& device) {
    const bool known = std::any_of(out.begin(), out.end(), [&](const lane& l) {
      return l.transport == transport && (l.device == device || device.empty());
    });
    if (!known) out.push_back(lane{transport, device, kind_of_transport(transport)});
  };
  if (protocol_text.find("rndv") != std::string_view::npos) {
    for (const auto& l : endpoint_lanes) {
      if (std::any_of(l.usage.begin(), l.usage.end(),
                      [](const std::string& u) { return u.rfind("rma_bw", 0) == 0; }))
        add(l.transport, l.device);
    }
  }
  if (out.empty()) {
    for (const auto& l : request_lanes) add(l.transport, l.device);
  }
  // A GPU IPC transport named in the text without a device ("... cuda_ipc ...").
  const std::string text = std::string(protocol_text) + " " + std::string(request_text);
  const auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  for (std::size_t i = 0; i < text.size();) {
    if (!word_char(text[i])) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && word_char(text[end])) ++end;
    const std::string word = text.substr(i, end - i);
    if (kind_of_transport(word) == lane_kind::gpu_ipc) add(word, "");
    i = end;
  }
  return out;
}

}  // namespace pairperf::ucx
