#pragma once
// Parsers for what UCX says about the path of the bytes. They take text so they can be tested on
// real output of several UCX versions:
//   ucp_ep_print_info (all versions):
//     "#                 lane[2]:  2:cma/memory.0 md[2]            -> md[2]/cma/sysdev[255] seg
//     4294967295 rma_bw#0"
//   ucp_request_query INFO_STRING, UCX 1.13:
//     "flags:0x44000 send length 65536 ucp_proto_progress_tag_rndv_rts() lane[0]:  0:tcp/lo.0 md[0]
//     -> ..."
//   ucp_request_query INFO_STRING, UCX 1.18+:
//     "{proto|cb|init|rk_use} tag_send(multi) from host memory length 1048576 rendezvous zero-copy
//      read from remote cma/memory 11145.0 MB/s 89.73 us"   (the figures are UCX's estimate)
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pairperf::ucx {

struct lane_info {
  int index = -1;                           // lane number, -1 where the text has none
  std::string transport;                    // e.g. "cma", "tcp", "rc_mlx5", "cuda_ipc"
  std::string device;                       // e.g. "memory", "eth0", "mlx5_0:1", "cuda"
  std::vector<std::string> usage;           // e.g. "am", "am_bw", "rma_bw#0", "tag", "wireup", "ka"
  [[nodiscard]] bool carries_data() const;  // used for anything but wireup and keepalive
};

// The lanes of an endpoint from ucp_ep_print_info's text, in lane order.
std::vector<lane_info> parse_ep_info(std::string_view text);

// The transport resources of a context from ucp_context_print_info's text, e.g.
// "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0" -> {tcp, eth0}, in order.
std::vector<lane_info> context_resources(std::string_view text);

struct request_info {
  std::string protocol;  // "tag rndv rts" (1.13), "rendezvous zero-copy read from remote" (1.18+)
  std::vector<lane_info> lanes;  // the transports/devices named
  std::string raw;               // the whole string, whitespace collapsed
};

request_info parse_request_info(std::string_view text);

// The lanes of one endpoint configuration in UCX's own log (UCX_LOG_LEVEL=info), as an
// application using UCX prints it:
//   UCX 1.13/1.14: "ep_cfg[0]: tag(sysv/memory cma/memory) rma(cma/memory)"
//   UCX 1.15+:     "<name> intra-node cfg#0 tag(sysv/memory cma/memory)"
// Each "op(tl/dev ...)" group's resources, deduplicated, with the group names as usage. Lines
// without such groups give nothing. (For reading other programs' logs: `doctor`, issue 4.)
std::vector<lane_info> parse_log_line(std::string_view line);

// The protocol ucp_ep_print_info's threshold table gives for a message size, e.g. for
// "tag_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)" and 64 -> "egr/short".
// `operation` is the table's name ("tag_send", "am_send"); "" when the table has no such line.
std::string protocol_for_size(std::string_view ep_text, std::string_view operation,
                              std::size_t size);

// The text with each run of whitespace made one space, none at either end.
std::string collapse_spaces(std::string_view text);

// "tcp/lo.0" -> {tcp, lo}; "cma/memory" -> {cma, memory}; "rc_mlx5/mlx5_0:1.0" -> {rc_mlx5,
// mlx5_0:1}. Returns false when the token does not name a transport and device.
bool parse_resource_token(std::string_view token, lane_info& out);

// The kind of a UCX transport, by its UCX_TLS name: posix, sysv, cma, knem, xpmem and self share
// host memory; tcp is a network; rc_*, dc_*, ud_* and ugni_* are RDMA; cuda_ipc, rocm_ipc and
// ze_ipc map GPU memory into the peer; cuda_copy, rocm_copy, ze_copy and gdr_copy copy GPU memory
// through the host. Anything else is unknown.
lane_kind kind_of_transport(std::string_view transport);

// The words of a protocol description that show GPU data staged through host memory
// ("rendezvous pipeline cuda_copy", "software emulation", "copy-in copy-out"), "" if none. Only
// meaningful for GPU memory: host memory's eager protocols copy in and out too.
std::string staging_in(std::string_view text);

// The lanes that carried a message's payload, with their kinds: for a rendezvous protocol the
// endpoint's RMA bandwidth lanes (where the bulk moves), else the lanes the request names, plus a
// GPU IPC transport the protocol or the request's text names without a device. Empty where none
// of them says.
std::vector<lane> bulk_lanes(std::string_view protocol_text, std::string_view request_text,
                             const std::vector<lane_info>& endpoint_lanes,
                             const std::vector<lane_info>& request_lanes);

}  // namespace pairperf::ucx
