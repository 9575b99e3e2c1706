#pragma once
// Helpers the variable checks share (netvars.cpp, netvars_gloo.cpp); not part of host's interface.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "host/netvars.h"

namespace pairperf::netvars_detail {

inline std::string joined(const std::vector<std::string>& v) {
  return v.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(v, ","));
}

inline std::optional<std::string> get(const side_view& s, const char* name) {
  const auto it = s.env.find(name);
  if (it == s.env.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

inline bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The value to recommend for an interface variable on this side: the fastest reaching interface.
// Never a loopback interface (recommendable leaves them out).
inline std::string best(const side_view& s) {
  return s.recommendable.empty() ? std::string() : s.recommendable.front();
}

inline std::string fix_line(const side_view& s, const char* var) {
  const std::string b = best(s);
  if (b.empty() && !s.ranked.empty())
    return fmt::format(
        "only loopback reached the peer from the {} (the two are on one host); "
        "name the interface that reaches the other nodes",
        s.name);
  if (b.empty())
    return fmt::format("no interface of the {} reached the peer: fix the network first", s.name);
  return fmt::format("on the {}: {}={}", s.name, var, b);
}

// NCCL's interface on one side (netvars_nccl.cpp): its libraries' answers, else its rule.
std::vector<finding> check_nccl(const side_view& s);

// gloo's checks, with its devices known (netvars_gloo.cpp).
std::vector<finding> check_gloo(const side_view& client, const side_view& server,
                                const application_outcome& probe);

}  // namespace pairperf::netvars_detail
