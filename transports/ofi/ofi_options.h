#pragma once
// What this host's libfabric offers (providers, fabrics, domains of RDM endpoints) and the OFI
// transport's axis: the provider, one case each, as UCX_TLS is for UCX.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "transports/registry.h"

namespace pairperf::ofi {

inline constexpr const char* name = "ofi";  // the registry name

// A provider as the axis and fi_getinfo name it: "" (libfabric's own choice) or provider names
// joined by ';' for a layered one ("tcp;ofi_rxm"), each of letters, digits, '_' and '-', at most
// 64 characters in all. It came from a peer or the command line: throws usage_error.
void check_provider(std::string_view text);

// One RDM endpoint fi_getinfo offers (an fi_info entry).
struct offer {
  std::string provider;  // "tcp;ofi_rxm"
  std::string fabric;    // "127.0.0.1/32"
  std::string domain;    // "lo"
  std::string addr_format;
  bool tagged = false, rma = false, hmem = false;
  bool remote = false;  // FI_REMOTE_COMM: reaches other hosts (shm does not)
};
// What this host's libfabric offers, every provider whatever FI_PROVIDER says, asked once per
// process in a child process (libfabric's initialization has side effects on the rest of a
// process: see ofi_options.cpp); empty when the discovery failed (describe_library() then says
// why).
const std::vector<offer>& rdm_offers();
// The distinct providers of `offers`, in libfabric's order of preference; `remote_only` leaves
// out those that stay within one host.
std::vector<std::string> provider_names(const std::vector<offer>& offers, bool remote_only);

// The --ofi-provider axis: as given; else FI_PROVIDER's names (`environment`, may be null; an
// exclusion list "^x" leaves the choice to libfabric: ""); else, for a local run, one network and
// one shared-memory provider (tcp;ofi_rxm and shm, where offered); else every provider offering
// RDM endpoints that reach other hosts.
std::vector<std::string> default_providers(const std::vector<std::string>& given, bool local_run,
                                           const char* environment,
                                           const std::vector<offer>& offered);

// The names in a FI_PROVIDER value ("efa", "tcp;ofi_rxm", "shm,tcp", "^sockets") that a
// libfabric described by `library` (describe_library()) lacks, and the names it has (both empty
// when `library` does not say). Exclusions lack nothing.
std::pair<std::vector<std::string>, std::vector<std::string>> judge_provider_variable(
    std::string_view value, const nlohmann::json& library);

// libfabric's version and its RDM providers with their fabrics and domains, as fi_info lists them.
nlohmann::json describe_library();
// Why this host cannot run the transport ("" = it can): libfabric missing, or no RDM provider.
std::string unavailable();

// The kind of lane a provider is: shm moves data within the host, tcp/udp/sockets/net through the
// kernel's network stack, verbs/efa/psm2/psm3/opx/cxi through an RDMA NIC. A layered name is the
// kind of its core (first) provider.
lane_kind kind_of_provider(std::string_view provider);

// The transport's own options, the "ofi" object of the run's transport options (checked on both
// sides: the server's come from the peer).
struct options {
  // --ofi-inject: how host messages up to the provider's inject size are sent: "tinject"
  // (fi_tinject, complete at once; a flush message after each phase), "flag" (FI_INJECT with a
  // completion), "off", or "auto": each provider the way it was seen to work (use_inject).
  std::string inject = "auto";
};
nlohmann::json to_json(const options& o);
// Absent keys take the defaults; anything else throws usage_error.
options options_from(const nlohmann::json& own);
enum class inject_mode { tinject, flag, off };
// How to inject with `provider` under `o`, and why ("" for the plain default).
std::pair<inject_mode, std::string> use_inject(const options& o, std::string_view provider);

// Whether closing an endpoint of `provider` (libfabric `version`, as fi_version() gives it) that
// still holds transfers (a case that failed on a connection that stopped moving) can crash inside
// fi_close: the endpoint is then better left open (ofi_transport's destructor). True for
// tcp;ofi_rxm before libfabric 1.18, whose tcp provider 1.18 replaced with the net provider's code.
bool close_may_crash_in_flight(std::string_view provider, std::uint32_t version);

// What a provider lacks for a case, from `offers(rma, hmem, ordered)`: whether fi_getinfo offers
// an RDM endpoint with tagged messages and those. "" when it lacks nothing of them.
std::string what_lacks(const std::function<bool(bool rma, bool hmem, bool ordered)>& offers,
                       bool rma, bool hmem);

// --ofi-provider and --ofi-inject on `run`.
transport_cli add_run_options(CLI::App& run);

}  // namespace pairperf::ofi
