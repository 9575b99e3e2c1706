#include "harness/matrix.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/errors.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

template <class T>
void push_unique(std::vector<T>& v, const T& item) {
  if (std::find(v.begin(), v.end(), item) == v.end()) v.push_back(item);
}

std::vector<std::string> test_names(const transport_entry& e) {
  std::vector<std::string> out;
  for (const auto& t : e.tests) out.emplace_back(t.name);
  return out;
}

// The (transport, test) pairs to run, in registry order.
std::vector<std::pair<const transport_entry*, const test_spec*>> select_tests(
    const matrix_request& req, const transport_registry& reg) {
  for (const auto& name : req.transports) {
    if (reg.find(name) == nullptr) {
      throw usage_error(fmt::format("unknown transport '{}' (this build has: {})", name,
                                    fmt::join(reg.names(), ", ")));
    }
  }
  std::vector<std::pair<const transport_entry*, const test_spec*>> out;
  for (const auto& name : req.tests) {
    const transport_entry* owner = nullptr;
    for (const auto& e : reg.all()) {
      if (reg.find_test(e.name, name) != nullptr) owner = &e;
    }
    if (owner == nullptr) {
      std::vector<std::string> all;
      for (const auto& e : reg.all()) {
        for (const auto& t : test_names(e)) all.push_back(t);
      }
      throw usage_error(fmt::format("unknown test '{}' (tests: {})", name, fmt::join(all, ", ")));
    }
    if (!req.transports.empty() && std::find(req.transports.begin(), req.transports.end(),
                                             owner->name) == req.transports.end()) {
      throw usage_error(
          fmt::format("test '{}' belongs to transport '{}', which --transport does not select",
                      name, owner->name));
    }
  }
  for (const auto& e : reg.all()) {
    const bool chosen =
        req.transports.empty() ||
        std::find(req.transports.begin(), req.transports.end(), e.name) != req.transports.end();
    if (!chosen) continue;
    for (const auto& t : e.tests) {
      const bool wanted = req.tests.empty() ||
                          std::find(req.tests.begin(), req.tests.end(), t.name) != req.tests.end();
      if (wanted) out.emplace_back(&e, &t);
    }
  }
  return out;
}

std::vector<std::string> select_ifaces(const matrix_request& req,
                                       const std::vector<interface_info>& usable) {
  if (req.ifaces.empty()) return {""};
  std::vector<std::string> out;
  for (const auto& name : req.ifaces) {
    if (name == "all") {
      for (const auto& i : usable) push_unique(out, i.name);
      continue;
    }
    const bool known = std::any_of(usable.begin(), usable.end(),
                                   [&](const interface_info& i) { return i.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& i : usable) names.push_back(i.name);
      throw usage_error(fmt::format("no usable interface named '{}' (up, with an address: {})",
                                    name, fmt::join(names, ", ")));
    }
    push_unique(out, name);
  }
  if (out.empty()) throw usage_error("--iface all: this host has no usable interface");
  return out;
}

}  // namespace

std::pair<memory_type, memory_type> parse_memory_pair(std::string_view text) {
  const auto comma = text.find(',');
  if (comma == std::string_view::npos) {
    const memory_type m = parse_memory_type(std::string(text));
    return {m, m};
  }
  return {parse_memory_type(std::string(text.substr(0, comma))),
          parse_memory_type(std::string(text.substr(comma + 1)))};
}

std::vector<test_case> expand_matrix(const matrix_request& req, const transport_registry& reg,
                                     const std::vector<interface_info>& usable) {
  if (req.sizes.empty()) throw usage_error("no message sizes given");
  const auto tests = select_tests(req, reg);
  const auto ifaces = select_ifaces(req, usable);
  std::vector<std::pair<memory_type, memory_type>> memory = req.memory;
  if (memory.empty()) memory.emplace_back(memory_type::host, memory_type::host);
  std::vector<test_case> out;
  const std::vector<std::string> library_default{""};
  for (const auto& [entry, spec] : tests) {
    const auto axis = req.axes.find(entry->name);
    const bool has_values = axis != req.axes.end() && !axis->second.empty();
    for (const auto& tls : has_values ? axis->second : library_default) {
      for (const auto& iface : ifaces) {
        for (const auto& [client_mem, server_mem] : memory) {
          for (const std::uint64_t size : req.sizes) {
            test_case c;
            c.index = out.size();
            c.transport = entry->name;
            c.test = std::string(spec->name);
            c.pattern = spec->pattern;
            c.tls = tls;
            c.iface = iface;
            c.client_memory = client_mem;
            c.server_memory = server_mem;
            c.size_bytes = size;
            out.push_back(std::move(c));
          }
        }
      }
    }
  }
  return out;
}

}  // namespace pairperf
