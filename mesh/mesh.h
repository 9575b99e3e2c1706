#pragma once
// pairperf mesh: every pair (or a ring, or one-to-all) of n nodes, in rounds of disjoint pairs
// that run at once (the circle method: n-1 rounds of n/2 pairs, n even; one idle node per round
// when n is odd), outliers retested alone, and the nodes' interfaces and variables compared.
// Pure functions of ranks, results and host facts: the MPI launcher and the --hosts driver
// share them.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "host/netvars.h"

namespace pairperf {

enum class mesh_pattern { all_pairs, ring, one_to_all };
mesh_pattern parse_mesh_pattern(const std::string& text);  // throws usage_error
const char* to_string(mesh_pattern p) noexcept;

struct node_pair {
  int client = 0;  // measures towards `server`
  int server = 0;
  bool operator==(const node_pair&) const = default;
};
using mesh_round = std::vector<node_pair>;

// Rounds of disjoint pairs. all_pairs: each unordered pair once, the lower rank as client.
// both_directions: every pair is measured again with client and server swapped (each direction
// of a link carries its own traffic; a bad cable or a mismatched bond degrades one), in as many
// rounds again.
std::vector<mesh_round> mesh_schedule(int nodes, mesh_pattern pattern,
                                      bool both_directions = false);

// One pair's measurement: the cases run between them, the first time and (outliers) alone.
struct pair_result {
  node_pair pair;
  std::vector<case_result> results;
  std::vector<case_result> retest;  // empty unless retested
  // "ok", "unreachable", "error", "slow link", "contention" (an outlier that recovered alone),
  // "noisy" (an outlier alone too, which its processes' wait for a CPU could explain)
  std::string verdict;
};

// A pair's host noise over `results` (the noise meter of `run`, per case): whether a case was
// noisy, the largest share of a measurement either process waited for a CPU or lost to steal,
// and why.
struct pair_noise {
  bool noisy = false;
  double waited = 0;
  std::string why;
};
pair_noise noise_of(const std::vector<case_result>& results);

struct outlier_rule {
  double bw_fraction = 0.5;   // bandwidth below this fraction of the median
  double lat_multiple = 3.0;  // latency p50 above this multiple of the minimum
};
// The pairs whose first measurement is an outlier (or failed), by index into `pairs`.
std::vector<std::size_t> find_outliers(const std::vector<pair_result>& pairs,
                                       const outlier_rule& rule);

// What to measure again alone: the outliers, and both directions of every link whose two
// directions differ beyond the rule on the first figures (a round's contention can make one
// direction look slow; alone, both show what the link does). Sorted indices into `pairs`.
std::vector<std::size_t> find_retests(const std::vector<pair_result>& pairs,
                                      const outlier_rule& rule);

// The verdict of outlier `idx` measured again alone (`alone`), against every pair's first
// figures: "contention" when it is no longer an outlier; "slow link" when it still is even
// crediting the CPU its processes waited for (its bandwidth divided by 1 - that share); "noisy"
// when that wait could explain it, or when its latency is the outlier of a noisy measurement
// (a ping-pong whose processes wait for a CPU slows without bound). Never slow for want of a CPU.
std::string retest_verdict(std::vector<pair_result> pairs, std::size_t idx,
                           const std::vector<case_result>& alone, const outlier_rule& rule);

// Why pairs stayed noisy, from the nodes' host facts (host_context() blocks, one per node, named
// by `names`): a node whose process may use less than one CPU (its cgroup's limit, such as a
// pod's), and a host where more nodes measure at once (every node is in a pair each round) than
// its processes may use CPUs (affinity). Or says that neither is so: something else took the CPU.
std::string oversubscription(const std::vector<std::string>& names,
                             const std::vector<nlohmann::json>& hosts);

// Links whose two directions differ beyond the outlier rule (one direction's bandwidth below
// bw_fraction of the other's, or its latency above lat_multiple of the other's), on the final
// figures (the retest where there was one): a finding per link naming both directions.
std::vector<finding> find_asymmetric(const std::vector<std::string>& names,
                                     const std::vector<pair_result>& pairs,
                                     const outlier_rule& rule);

// A pair's headline figures: the best bandwidth over its stream cases, the p50 of its ping-pong.
std::optional<double> pair_bandwidth(const std::vector<case_result>& results);
std::optional<double> pair_latency(const std::vector<case_result>& results);

// The n x n matrices (row = client, column = server; null where not measured) and a
// per-pair list, for the results file.
nlohmann::json mesh_matrices(int nodes, const std::vector<std::string>& names,
                             const std::vector<pair_result>& pairs);

// Differences between the nodes that break pairs: an interface variable naming an interface a
// node lacks, variables that differ between nodes, interface names present on some nodes only,
// MTU mismatches within a subnet. `hosts` are host_context() blocks, `envs` the variables.
std::vector<finding> compare_nodes(const std::vector<std::string>& names,
                                   const std::vector<nlohmann::json>& hosts,
                                   const std::vector<nlohmann::json>& envs);

// gloo between every pair of nodes, from each node's gloo devices (`sides`, as torch.distributed
// makes them there) and gloo's rule (the lower address listens): a `fails` finding naming each
// node whose gloo address its peers cannot reach, which peers fail because their addresses sort
// above it and which pairs work only because they sort below; a `fragile` one for a loopback
// address no peer had to reach yet. `measured`: the pairs ran gloo's own connection (mesh
// --transport gloo), whose outcomes decide; else only what the rule makes certain (a loopback
// address across hosts). `reached_at`: the address each node's peers reached it at.
std::vector<finding> judge_gloo(const std::vector<std::string>& names,
                                const std::vector<nlohmann::json>& hosts,
                                const std::vector<std::string>& reached_at,
                                const std::vector<gloo_side>& sides,
                                const std::vector<pair_result>& pairs, bool measured);

void print_matrix(std::FILE* out, const std::vector<std::string>& names,
                  const std::vector<pair_result>& pairs, bool latency);

}  // namespace pairperf
