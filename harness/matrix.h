#pragma once
// Expansion of the user's request into the matrix of cases:
// transport x test x the transport's own axis (UCX's --tls, for transports that have one) x
// interface x memory pair x size (size varies fastest).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/interfaces.h"

namespace pairperf {

class transport_registry;

struct matrix_request {
  std::vector<std::string> transports;  // empty: every built-in transport (or those of --test)
  std::vector<std::string> tests;       // empty: every test of the chosen transports
  std::vector<std::uint64_t> sizes;     // required
  // Per transport with an axis, its values (each a case's tls); a transport not named here, or
  // with no values, gets one case with "" (its library's default).
  std::map<std::string, std::vector<std::string>> axes;
  std::vector<std::string>
      ifaces;  // empty: one case with routing's choice; "all": every usable one
  std::vector<std::pair<memory_type, memory_type>> memory;  // empty: host,host
};

// "host,cuda" -> {host, cuda}; "cuda" -> {cuda, cuda}. Throws usage_error.
std::pair<memory_type, memory_type> parse_memory_pair(std::string_view text);

// Throws usage_error naming the bad value and the valid ones.
std::vector<test_case> expand_matrix(const matrix_request& request,
                                     const transport_registry& registry,
                                     const std::vector<interface_info>& usable_ifaces);

}  // namespace pairperf
