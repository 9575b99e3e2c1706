#pragma once
// UCX's own account of the protocol it selected: the protocol tables of UCX's v2 protocols (the
// default from UCX 1.16). UCX prints one table per endpoint configuration and operation, in three
// places with the same rows:
//   ucp_ep_print_info / ucp_worker_print_info and `ucx_info -e -u t`, each line prefixed "# ";
//   UCX_PROTO_INFO=y (or UCX_LOG_LEVEL=info in 1.1x), each line behind UCX's log prefix
//   "[1737025510.220313] [node13:2857558:0]   " or "... proto_debug.c:406  UCX  INFO  ".
// Title, UCX 1.16-1.21 (src/ucp/proto/proto_debug.c, ucp_proto_select_elem_info):
//   "| perftest inter-node cfg#0 | tagged message by ucp_tag_send* from host memory |"
// and UCX 1.22 (the same text as two full-width rows):
//   "| ucp_context_1 intra-node cfg#0 |" then "| tagged message by ucp_tag_send*(multi) from ... |"
// Rows: "| 256K..inf | (?) rendezvous zero-copy read from remote | cma/memory |", where the range
// is UCX's memory units (K, M, G, T: powers of 1024; "inf"), "(?)" marks a protocol whose
// performance UCX estimated, and the config names the lanes: "tcp/lo", "rc_mlx5/mlx5_0:1/path0",
// "50% on rc_mlx5/mlx5_bond_0:1/path0 and 50% on rc_mlx5/mlx5_bond_1:1/path0".
// A request's own text (ucp_request_query, ucp_proto_config_info_str) names the same protocol:
//   "{proto|cb|init} tag_send(multi) from host memory length 1048576 rendezvous zero-copy read
//    from remote cma/memory 11087.1 MB/s 90.20 us"
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "transports/ucx/ucx_provenance.h"

namespace pairperf::ucx {

struct protocol_row {
  std::size_t first = 0;         // the smallest message size the row covers
  std::size_t last = 0;          // the largest; SIZE_MAX for "inf"
  std::string range;             // as printed: "256K..inf"
  std::string description;       // "rendezvous zero-copy read from remote", "(?) " taken off
  bool estimated = false;        // the row began "(?) "
  std::string config;            // as printed
  std::vector<lane_info> lanes;  // the transport/device pairs the config names, in order
};

struct protocol_table {
  std::string source;     // the log prefix's "host:pid" where the lines had one, else ""
  std::string endpoint;   // "ucp_context_1 intra-node cfg#0", "mpi ep_cfg[3]"
  std::string operation;  // "tagged message by ucp_tag_send*(multi) from host memory"
  std::vector<protocol_row> rows;
  std::vector<std::string> lines;  // the table's lines from the first '|' or '+', as printed
  [[nodiscard]] const protocol_row* row_for(std::size_t size) const;
};

// Every protocol table in the text, in order. Lines of interleaved processes (two log prefixes)
// go to their own tables. Text that holds no table gives none.
std::vector<protocol_table> parse_protocol_tables(std::string_view text);

// "512", "256K", "1M", "inf" -> bytes (SIZE_MAX for inf); nullopt where it is not one.
std::optional<std::size_t> parse_memunits(std::string_view text);

// The lanes a config cell names: "50% on rc_mlx5/mlx5_0:1/path0 and 50% on rc_mlx5/mlx5_1:1/path0"
// -> rc_mlx5/mlx5_0:1, rc_mlx5/mlx5_1:1.
std::vector<lane_info> config_lanes(std::string_view config);

struct protocol_choice {
  const protocol_table* table = nullptr;  // null: the request's own text is the whole account
  protocol_row row;                       // the row (or, without a table, what the request says)
  std::size_t length = 0;                 // the request's message length
};

// The table row that a request's text names: the table of the request's operation (its name,
// variant and memory, e.g. "tag_send(multi) from host memory"; "put from host memory" matches a
// table "... by ucp_put* from host memory to host memory") whose row for the request's length has
// the protocol the request names. nullopt where the request text is not of the v2 form or no
// table agrees with it.
std::optional<protocol_choice> choice_for_request(const std::vector<protocol_table>& tables,
                                                  std::string_view request_text);

// What a v2 request's text alone says (remote-key operations, whose tables UCX prints only with
// UCX_PROTO_INFO): the protocol is the words before the first lane or share ("50% on"), the
// config runs to UCX's estimate ("11072.2 MB/s 90.32 us"). nullopt where the text is not of the v2
// form or names no lane.
std::optional<protocol_choice> request_selection(std::string_view request_text);

}  // namespace pairperf::ucx
