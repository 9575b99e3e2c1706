#pragma once
// The explicit list of built-in transports. Each optional transport is added under its own
// #if PAIRPERF_HAVE_* in registry.cpp, and nowhere else in the harness. Each entry carries what
// the layers above need to know of its transport: its tests, its options and axis on the command
// line, how its lanes are classified, and its part in `doctor`.
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transports/transport.h"

namespace CLI {
class App;
}

namespace pairperf {

// What a transport put on the `run` command line (transport_entry::add_run_options); each
// function is called after parsing. Empty functions: nothing of that kind.
struct transport_cli {
  // The transport's own object for run_config's transport options (defaults filled in). Checks
  // the values: throws usage_error.
  std::function<nlohmann::json()> options;
  // The values of the transport's axis (cases are crossed with them, each in test_case::tls):
  // the ones given, else the transport's default; `local_run`: the server is a local one.
  std::function<std::vector<std::string>(bool local_run)> axis;
  // The options the user gave, as typed ("--ucx"): none may be given when no case of the
  // transport is selected.
  std::function<std::vector<std::string>()> given;
};

// The cases `pairperf doctor` runs through a transport that has a role there.
struct doctor_probe {
  enum class role {
    reach,    // per pair of interfaces: can the peer be reached, and how fast (a plain socket)
    library,  // per local interface, kept on it, and with the library's own choice (the path)
    // once per pair, each side's library as that side's own environment configures it (gloo:
    // its devices as torch.distributed makes them), connected through the library's own code:
    // whether the application's connection works, measured
    application,
  };
  role what = role::reach;
  std::string bandwidth_test;  // a test of the transport's table
  std::string latency_test;    // library: the path's small-message test; application: its test
  // library: the axis value that keeps the library on the one interface's network (UCX: tcp).
  std::string per_interface_axis;
  // library: the variable that pins it to a device (UCX_NET_DEVICES); application: the variable
  // whose findings its outcome decides (GLOO_SOCKET_IFNAME).
  std::string device_variable;
};

struct transport_entry {
  std::string name;
  std::string description;
  std::vector<test_spec> tests;
  std::function<std::unique_ptr<transport>(const transport_params&)> create;
  // Adds the transport's own options (and the option of its axis, where it has one) to `run`.
  // Empty function = it has none: its cases get its defaults and one case with an empty tls.
  std::function<transport_cli(CLI::App& run)> add_run_options;
  // Facts for `pairperf info` and the context block (library version, available transports...).
  std::function<nlohmann::json()> describe_library;
  // Why the two sides' libraries, as their describe_library() facts (client's, server's) tell,
  // cannot be trusted to work together, and the fix: {problem, fix}; an empty problem where they
  // can or the facts do not say. Empty function = no such rule. Doctor folds this transport's
  // failing probes into that finding, and `run` warns at its start.
  std::function<std::pair<std::string, std::string>(const nlohmann::json& client,
                                                    const nlohmann::json& server)>
      peer_mismatch;
  // Why this host cannot run the transport at all ("" = it can; empty function = always can).
  // Such transports stay out of the default sweep; asked for by name, their cases are skipped.
  std::function<std::string()> unavailable;
  // The kind of a lane this transport reports under `name` (UCX's "cma": shared memory), for
  // judging a name that did not show up in a case's lanes. Empty function = unknown.
  std::function<lane_kind(std::string_view name)> lane_kind_of;
  // The prefixes of its library's environment variables ("UCX_"), recorded with every result and
  // in each side's hello, where doctor reads them.
  std::vector<std::string> env_prefixes;
  // The variable an application sets to choose this library's transports (UCX_TLS), which
  // doctor checks on both sides. Empty = none.
  struct env_axis_check {
    std::string variable;
    // Of the names in `value`, those that a side's library, as its describe_library() facts
    // (`library`) tell, lacks; and the names it has. Both empty where `library` does not say.
    std::function<std::pair<std::vector<std::string>, std::vector<std::string>>(
        std::string_view value, const nlohmann::json& library)>
        judge;
  };
  std::optional<env_axis_check> env_axis;
  // The transport's part in `pairperf doctor`, if any (the first transport of each role is used).
  std::optional<doctor_probe> doctor;
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
  // The libraries' own variables that doctor and mesh show and compare between sides: each
  // transport's axis variable (UCX_TLS), then each doctor device variable (UCX_NET_DEVICES).
  [[nodiscard]] std::vector<std::string> library_variables() const;
  // The library role's device variables alone: those an interface recommendation names.
  [[nodiscard]] std::vector<std::string> device_variables() const;

 private:
  std::vector<transport_entry> m_entries;
};

}  // namespace pairperf
