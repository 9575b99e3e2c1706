#include "diagnose/explain_text.h"

#include <algorithm>
#include <optional>

namespace pairperf::log_text {

bool is_bridge(const std::string& iface) {
  for (const char* p : {"docker", "virbr", "cni", "br-", "veth", "lxcbr", "podman", "flannel"}) {
    if (iface.rfind(p, 0) == 0) return true;
  }
  return false;
}

bool is_link_local(const std::string& addr) {
  return addr.rfind("169.254.", 0) == 0 || addr.rfind("fe80:", 0) == 0 ||
         addr.rfind("FE80:", 0) == 0;
}

std::vector<std::pair<std::string, std::string>> interface_list(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  for (std::size_t at = text.find('['); at != std::string::npos; at = text.find('[', at + 1)) {
    const auto close = text.find(']', at);
    const auto colon = close == std::string::npos ? close : text.find(':', close);
    const auto lt = colon == std::string::npos ? colon : text.find('<', colon);
    if (lt == std::string::npos) break;
    out.emplace_back(text.substr(close + 1, colon - close - 1),
                     text.substr(colon + 1, lt - colon - 1));
  }
  return out;
}

bool is_loopback(const std::string& addr) {
  return addr.rfind("127.", 0) == 0 || addr == "::1" || addr == "localhost" ||
         addr.rfind("::ffff:127.", 0) == 0;
}

void add_distinct(std::vector<std::string>& values, const std::string& v) {
  if (!v.empty() && std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
}

std::pair<std::string, std::vector<std::string>> fill(
    const std::string& tmpl, const std::map<std::string, std::string>& values,
    const std::map<std::string, std::string>& fallback) {
  std::string out;
  std::vector<std::string> missing;
  std::size_t i = 0;
  auto fill_part = [&](const std::string& part, bool optional) -> std::optional<std::string> {
    std::string text;
    std::vector<std::string> lacks;
    for (std::size_t k = 0; k < part.size(); ++k) {
      if (part[k] != '{') {
        text += part[k];
        continue;
      }
      const auto end = part.find('}', k);
      const std::string name = part.substr(k + 1, end - k - 1);
      const auto v = values.find(name);
      if (v == values.end() || v->second.empty()) {
        lacks.push_back(name);
        const auto words = fallback.find(name);
        text += words != fallback.end() ? words->second : "<" + name + ">";
      } else {
        text += v->second;
      }
      k = end;
    }
    if (!lacks.empty()) {
      if (optional) return std::nullopt;
      for (auto& l : lacks) add_distinct(missing, l);
    }
    return text;
  };
  while (i < tmpl.size()) {
    const auto open = tmpl.find('[', i);
    if (open == std::string::npos) {
      out += *fill_part(tmpl.substr(i), false);
      break;
    }
    out += *fill_part(tmpl.substr(i, open - i), false);
    const auto close = tmpl.find(']', open);
    if (close == std::string::npos) {
      out += *fill_part(tmpl.substr(open), false);
      break;
    }
    if (auto part = fill_part(tmpl.substr(open + 1, close - open - 1), true)) out += *part;
    i = close + 1;
  }
  return {out, missing};
}

std::string fill_text(const std::string& tmpl, const std::map<std::string, std::string>& values) {
  static const std::map<std::string, std::string> unnamed{
      {"host", "this node"}, {"addr", "the peer"}, {"iface", "its interface"}};
  return fill(tmpl, values, unnamed).first;
}

}  // namespace pairperf::log_text
