#pragma once
// The explicit list of built-in transports. Each optional transport is added under its own
// #if PAIRPERF_HAVE_* in registry.cpp, and nowhere else in the harness.
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace pairperf {

struct transport_entry {
  std::string name;
  std::string description;
  std::vector<test_spec> tests;
  std::function<std::unique_ptr<transport>(const transport_params&)> create;
  // Whether cases of this transport are crossed with the --tls axis (a transport-set selection
  // inside the library, as UCX_TLS is); others get one case with an empty tls.
  bool tls_axis = false;
  // Checks the run's transport options before anything runs; throws usage_error. May be empty.
  std::function<void(const transport_options&)> check_options;
  // Facts for `pairperf info` and the context block (library version, available transports...).
  std::function<nlohmann::json()> describe_library;
  // Why this host cannot run the transport at all ("" = it can; empty function = always can).
  // Such transports stay out of the default sweep; asked for by name, their cases are skipped.
  std::function<std::string()> unavailable;
  // The kind of a lane this transport reports under `name` (UCX's "cma": shared memory), for
  // judging a name that did not show up in a case's lanes. Empty function = unknown.
  std::function<lane_kind(std::string_view name)> lane_kind_of;
};

class transport_registry {
 public:
  // The built-ins; constructed once.
  static const transport_registry& instance();

  // Throws std::logic_error on a duplicate name.
  void add(transport_entry entry);
  [[nodiscard]] const transport_entry* find(const std::string& name) const noexcept;
  [[nodiscard]] const test_spec* find_test(const std::string& transport,
                                           const std::string& test) const noexcept;
  [[nodiscard]] const std::vector<transport_entry>& all() const noexcept { return m_entries; }
  [[nodiscard]] std::vector<std::string> names() const;

 private:
  std::vector<transport_entry> m_entries;
};

}  // namespace pairperf
