#pragma once
// What this host's UCX offers and accepts: its option names (UCX takes unknown names silently,
// so pairperf checks them itself), which options act process-wide, and which transports exist.
// The parsers take text so they are tested on real UCX output.
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "transports/registry.h"

namespace pairperf::ucx {

inline constexpr const char* name = "ucx";  // the registry name, and its options' key

struct option_catalog {
  std::set<std::string> per_context;   // names without the UCX_ prefix, e.g. "TLS", "TCP_SNDBUF"
  std::set<std::string> process_wide;  // e.g. "LOG_LEVEL", "MEM_MALLOC_HOOKS", "MEMTYPE_CACHE"
};

// From ucs_config_parser_print_all_opts with headers ("# UCS global configuration" ...).
option_catalog parse_option_catalog(std::string_view text);
// The transport names in ucp_context_print_info's resource lines ("... flags -- tcp/lo").
std::set<std::string> parse_context_resources(std::string_view text);
// The names in a UCX_TLS value that a host with `available` transports lacks (aliases such as
// "shm", "ib", "rc", "cuda" count as present when any member is). "all" and negated lists
// ("^tcp") lack nothing.
// Why a UCX_TLS set cannot move GPU memory ("" when it can): it must include cuda_copy (or the
// cuda alias, all, or be a ^exclusion that leaves it in).
std::string cuda_tls_problem(std::string_view tls);

// Whether UCX's v2 protocols carry the operations: UCX_PROTO_ENABLE from the case's options, else
// from the environment, else the version's default (v2 from UCX 1.16).
bool uses_protocols_v2(unsigned major, unsigned minor, const std::vector<std::string>& options,
                       const char* environment);
// Why put/get cannot use cuda memory ("" when they can). UCX's v1 RMA sets every local buffer's
// memory type to host (ucp_rma_request_init in 1.13): over a software-emulated or bcopy lane the
// CPU would read GPU memory, a crash. The v2 protocols detect the memory type.
std::string cuda_rma_problem(unsigned major, unsigned minor, bool protocols_v2);

std::vector<std::string> missing_transports(std::string_view tls,
                                            const std::set<std::string>& available);

// This process's UCX, asked once.
const option_catalog& catalog();
const std::set<std::string>& available_transports();

// Splits "KEY=VALUE" (a leading "UCX_" is dropped). Throws usage_error.
std::pair<std::string, std::string> split_option(std::string_view text);
// Up to five names of `known` within a small edit distance of `name`, closest first: the
// suggestions for a mistyped --ucx option.
std::vector<std::string> similar_options(const std::string& name,
                                         const std::set<std::string>& known);
// Refuses unknown names (with the valid ones) and process-wide ones (with what to do instead).
// Throws usage_error.
void check_options(const std::vector<std::string>& options);

// The --ucx KEY=VALUE list from UCX's object in the run's transport options ({"options": [...]}),
// its shape checked (a peer sent it): at most 64 strings of at most 256 characters, each
// KEY=VALUE. Absent: none. Throws usage_error.
std::vector<std::string> options_from(const nlohmann::json& own);

// The --tls axis: as given; else UCX_TLS from the environment (`environment`, may be null);
// else, for a local run, the sets worth comparing on one host (tcp, shared memory, and UCX's own
// choice); else UCX's own choice ("").
std::vector<std::string> default_tls(const std::vector<std::string>& given, bool local_run,
                                     const char* environment);

// --tls and --ucx on `run`.
transport_cli add_run_options(CLI::App& run);

}  // namespace pairperf::ucx
