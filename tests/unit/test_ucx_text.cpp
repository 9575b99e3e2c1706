// The UCX text parsers on real output: UCX 1.13.1 (Debian 12, captured on this project's CI
// machine) and the newer formats quoted in UCX's documentation and issue reports.
#include <gtest/gtest.h>

#include "core/errors.h"
#include "transports/registry.h"
#include "transports/ucx/ucx_options.h"
#include "transports/ucx/ucx_provenance.h"

namespace pairperf::ucx {
namespace {

// ucp_ep_print_info, UCX 1.13.1, UCX_TLS=tcp with lo and eth0.
constexpr const char* ep_info_tcp = R"(#
# UCP endpoint 
#
#               peer: <no debug data>
#                 lane[0]:  0:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] rma_bw#0 am am_bw#0
#                 lane[1]:  1:tcp/eth0.0 md[0]              -> md[0]/tcp/sysdev[255] rma_bw#1 wireup
#
#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)
#            tag_send_nbr: 0..<egr/short>..8185..<egr/bcopy>..262144..<rndv>..(inf)
#           tag_send_sync: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)
#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)
#
#                  rma_bw: mds [0] rndv_rkey_size 10
#
)";

// ucp_ep_print_info, UCX 1.13.1, default UCX_TLS between two processes on one host.
constexpr const char* ep_info_shm =
    R"(#                 lane[0]:  2:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] am am_bw#0
#                 lane[1]:  4:cma/memory.0 md[4]            -> md[4]/cma/sysdev[255] rma_bw#0
#                 lane[2]:  0:tcp/lo.0 md[0]                -> md[0]/tcp/sysdev[255] wireup
#                tag_send: 0..<egr/short>..92..<egr/bcopy>..8192..<rndv>..(inf)
)";

TEST(UcxEpInfo, LanesWithTheirUse) {
  const auto lanes = parse_ep_info(ep_info_tcp);
  ASSERT_EQ(lanes.size(), 2U);
  EXPECT_EQ(lanes[0].index, 0);
  EXPECT_EQ(lanes[0].transport, "tcp");
  EXPECT_EQ(lanes[0].device, "lo");
  EXPECT_EQ(lanes[0].usage, (std::vector<std::string>{"rma_bw#0", "am", "am_bw#0"}));
  EXPECT_TRUE(lanes[0].carries_data());
  EXPECT_EQ(lanes[1].device, "eth0");
  EXPECT_TRUE(lanes[1].carries_data());  // rma_bw#1 besides wireup
  const auto shm = parse_ep_info(ep_info_shm);
  ASSERT_EQ(shm.size(), 3U);
  EXPECT_EQ(shm[1].transport, "cma");
  EXPECT_EQ(shm[1].device, "memory");
  EXPECT_TRUE(shm[1].carries_data());
  EXPECT_FALSE(shm[2].carries_data());  // wireup only: not a data lane
}

TEST(UcxEpInfo, LaneLineWithSegmentField) {
  const auto lanes = parse_ep_info(
      "#                 lane[2]:  2:cma/memory.0 md[2]            -> md[2]/cma/sysdev[255] seg "
      "4294967295 rma_bw#0");
  ASSERT_EQ(lanes.size(), 1U);
  EXPECT_EQ(lanes[0].index, 2);
  EXPECT_EQ(lanes[0].transport, "cma");
  EXPECT_EQ(lanes[0].usage, (std::vector<std::string>{"rma_bw#0"}));
  const auto ib = parse_ep_info(
      "#  lane[1]:  3:rc_mlx5/mlx5_0:1.0 md[1] -> md[1]/ib/sysdev[0] rma_bw#0 am_bw#1");
  ASSERT_EQ(ib.size(), 1U);
  EXPECT_EQ(ib[0].transport, "rc_mlx5");
  EXPECT_EQ(ib[0].device, "mlx5_0:1");
}

TEST(UcxEpInfo, ProtocolFromThresholds) {
  EXPECT_EQ(protocol_for_size(ep_info_tcp, "tag_send", 8), "egr/short");
  EXPECT_EQ(protocol_for_size(ep_info_tcp, "tag_send", 8185), "egr/short");
  EXPECT_EQ(protocol_for_size(ep_info_tcp, "tag_send", 8186), "egr/zcopy");
  EXPECT_EQ(protocol_for_size(ep_info_tcp, "tag_send", 8193), "rndv");
  EXPECT_EQ(protocol_for_size(ep_info_tcp, "tag_send", 1 << 20), "rndv");
  EXPECT_EQ(protocol_for_size(ep_info_shm, "tag_send", 100), "egr/bcopy");
  EXPECT_EQ(protocol_for_size(ep_info_tcp, "am_send", 64), "egr/short");
  EXPECT_EQ(protocol_for_size(ep_info_tcp, "stream_send", 64), "");
}

TEST(UcxRequestInfo, Ucx113Rendezvous) {
  const auto r = parse_request_info(
      "flags:0x44000 send length 65536 ucp_proto_progress_tag_rndv_rts() lane[0]:  0:tcp/lo.0 "
      "md[0] -> md[0]/tcp/sysdev[255] rma_bw#0 "
      "am am_bw#0 wireuphost memory");
  EXPECT_EQ(r.protocol, "tag rndv rts");
  ASSERT_EQ(r.lanes.size(), 1U);
  EXPECT_EQ(r.lanes[0].transport, "tcp");
  EXPECT_EQ(r.lanes[0].device, "lo");
}

TEST(UcxRequestInfo, Ucx113EagerHasNoNamedProtocol) {
  const auto r = parse_request_info(
      "flags:0x4001 send length 8 ??"
      "?() lane[0]: 2:sysv/memory.0 md[2] -> md[2]/sysv/sysdev[255] "
      "am am_bw#0host memory");
  EXPECT_NE(r.protocol.find("???"), std::string::npos);  // the caller falls back to the thresholds
  ASSERT_EQ(r.lanes.size(), 1U);
  EXPECT_EQ(r.lanes[0].transport, "sysv");
}

TEST(UcxRequestInfo, Ucx118Format) {
  const auto r = parse_request_info(
      "{proto|cb|init|rk_use} tag_send(multi) from host memory length 1048576 rendezvous zero-copy "
      "read from remote cma/memory "
      "11145.0 MB/s 89.73 us");
  EXPECT_EQ(r.protocol, "rendezvous zero-copy read from remote");
  ASSERT_EQ(r.lanes.size(), 1U);
  EXPECT_EQ(r.lanes[0].transport, "cma");
  EXPECT_EQ(r.lanes[0].device, "memory");
  const auto cuda = parse_request_info(
      "811556..inf | (?) rendezvous pipeline cuda_copy, fenced write to remote, cuda | "
      "rc_mlx5/mlx5_0:1");
  ASSERT_EQ(cuda.lanes.size(), 1U);
  EXPECT_EQ(cuda.lanes[0].transport, "rc_mlx5");
  EXPECT_EQ(cuda.lanes[0].device, "mlx5_0:1");
}

TEST(UcxLaneKinds, EachTransportNameHasItsKind) {
  for (const char* sm : {"posix", "sysv", "cma", "knem", "xpmem", "self"})
    EXPECT_EQ(kind_of_transport(sm), lane_kind::shared_memory) << sm;
  EXPECT_EQ(kind_of_transport("tcp"), lane_kind::network);
  for (const char* rdma : {"rc_mlx5", "rc_verbs", "dc_mlx5", "ud_mlx5", "ud_verbs", "rc"})
    EXPECT_EQ(kind_of_transport(rdma), lane_kind::rdma) << rdma;
  EXPECT_EQ(kind_of_transport("cuda_ipc"), lane_kind::gpu_ipc);
  EXPECT_EQ(kind_of_transport("rocm_ipc"), lane_kind::gpu_ipc);
  EXPECT_EQ(kind_of_transport("cuda_copy"), lane_kind::staged_copy);
  EXPECT_EQ(kind_of_transport("gdr_copy"), lane_kind::staged_copy);
  EXPECT_EQ(kind_of_transport("tcpx"), lane_kind::unknown);
  EXPECT_EQ(kind_of_transport(""), lane_kind::unknown);
}

TEST(UcxLaneKinds, StagingIsNamedByTheProtocolWords) {
  EXPECT_EQ(staging_in("(?) rendezvous pipeline cuda_copy, fenced write to remote, cuda"),
            "rendezvous pipeline cuda_copy");
  EXPECT_EQ(staging_in("tag_send from cuda memory length 8 software emulation"),
            "software emulation");
  EXPECT_EQ(staging_in("eager fragmented copy-in copy-out"), "fragmented copy-in copy-out");
  EXPECT_EQ(staging_in("rendezvous zero-copy read from remote"), "");
}

TEST(UcxLaneKinds, BulkLanesOfARendezvousAreItsRmaLanes) {
  // UCX 1.13 with split PID namespaces: eager over sysv, the rendezvous' bulk over tcp's rma_bw.
  const std::vector<lane_info> ep{{0, "sysv", "memory", {"am", "am_bw#0"}},
                                  {1, "tcp", "lo", {"rma_bw#0", "wireup"}}};
  const auto rndv = bulk_lanes("tag rndv rts", "", ep, {});
  ASSERT_EQ(rndv.size(), 1U);
  EXPECT_EQ(rndv[0].transport, "tcp");
  EXPECT_EQ(rndv[0].kind, lane_kind::network);
  // Not a rendezvous: the request's own lanes.
  const auto eager = bulk_lanes("tag egr/short", "", ep, {{0, "sysv", "memory", {}}});
  ASSERT_EQ(eager.size(), 1U);
  EXPECT_EQ(eager[0].kind, lane_kind::shared_memory);
  // Neither says: empty (then all lanes carried it).
  EXPECT_TRUE(bulk_lanes("tag egr/short", "", ep, {}).empty());
  // A GPU IPC transport named only in the text, once even when a device names it too.
  const auto ipc =
      bulk_lanes("rndv put", "... cuda_ipc/cuda0 ... cuda_ipc", {}, {{0, "cuda_ipc", "cuda0", {}}});
  ASSERT_EQ(ipc.size(), 1U);
  EXPECT_EQ(ipc[0].kind, lane_kind::gpu_ipc);
  EXPECT_EQ(bulk_lanes("protocol cuda_ipc zcopy", "", {}, {}).at(0).transport, "cuda_ipc");
}

TEST(UcxLogLine, EpConfigLinesOfOldAndNewUcx) {
  const auto old_format = parse_log_line(
      "[1700000000.123456] [node1:1234:0]     ucp_worker.c:1888 UCX  INFO  ep_cfg[0]: "
      "tag(sysv/memory cma/memory) rma(cma/memory)");
  ASSERT_EQ(old_format.size(), 2U);
  EXPECT_EQ(old_format[0].transport, "sysv");
  EXPECT_EQ(old_format[1].transport, "cma");
  EXPECT_EQ(old_format[1].usage, (std::vector<std::string>{"tag", "rma"}));
  const auto new_format = parse_log_line(
      "[1700000000.123456] [node1:1234:0]     ucp_worker.c:1855 UCX  INFO    ucp_context_0 "
      "intra-node cfg#0 tag(sysv/memory cma/memory)");
  ASSERT_EQ(new_format.size(), 2U);
  EXPECT_EQ(new_format[0].device, "memory");
  const auto net =
      parse_log_line("ucp_context_1 inter-node cfg#2 tag(rc_mlx5/mlx5_0:1 tcp/eth0) am(tcp/eth0)");
  ASSERT_EQ(net.size(), 2U);
  EXPECT_EQ(net[0].transport, "rc_mlx5");
  EXPECT_EQ(net[0].device, "mlx5_0:1");
  EXPECT_EQ(net[1].usage, (std::vector<std::string>{"tag", "am"}));
  EXPECT_TRUE(parse_log_line("UCX  WARN  something else (tcp/eth0)").empty());
}

TEST(UcxResourceToken, AcceptsResourcesRefusesTheRest) {
  lane_info l;
  EXPECT_TRUE(parse_resource_token("cuda_ipc/cuda", l));
  EXPECT_EQ(l.transport, "cuda_ipc");
  EXPECT_FALSE(parse_resource_token("md[0]/tcp/sysdev[255]", l));
  EXPECT_FALSE(parse_resource_token("MB/s", l));
  EXPECT_FALSE(parse_resource_token("host", l));
}

TEST(UcxOptions, CatalogSeparatesProcessWideOptions) {
  const auto c = parse_option_catalog(R"(#
# UCS global configuration
#
UCX_LOG_LEVEL=WARN
UCX_HANDLE_ERRORS=bt
#
# UCM configuration
#
UCX_MEM_MALLOC_HOOKS=y
#
# tcp transport configuration
#
UCX_TCP_SNDBUF=auto
#
# UCP context configuration
#
UCX_NET_DEVICES=all
UCX_TLS=all
UCX_MEMTYPE_CACHE=try
)");
  EXPECT_EQ(c.process_wide, (std::set<std::string>{"LOG_LEVEL", "HANDLE_ERRORS", "MEM_MALLOC_HOOKS",
                                                   "MEMTYPE_CACHE"}));
  EXPECT_EQ(c.per_context, (std::set<std::string>{"TCP_SNDBUF", "NET_DEVICES", "TLS"}));
}

TEST(UcxOptions, ResourcesFromContextInfo) {
  const auto r = parse_context_resources(R"(#      resource 0  :  md 0  dev 0  flags -- tcp/lo
#      resource 1  :  md 0  dev 1  flags -- tcp/eth0
#      resource 2  :  md 1  dev 2  flags -- sysv/memory
#      resource 3  :  md 3  dev 3  flags -- cma/memory
#            md 0  :  component 1  tcp
)");
  EXPECT_EQ(r, (std::set<std::string>{"tcp", "sysv", "cma"}));
}

TEST(UcxOptions, MissingTransportsKnowAliases) {
  const std::set<std::string> here{"tcp", "sysv", "posix", "cma", "self"};
  EXPECT_TRUE(missing_transports("tcp", here).empty());
  EXPECT_TRUE(missing_transports("posix,sysv,cma", here).empty());
  EXPECT_TRUE(missing_transports("shm", here).empty());
  EXPECT_TRUE(missing_transports("all", here).empty());
  EXPECT_TRUE(missing_transports("^tcp", here).empty());
  EXPECT_EQ(missing_transports("rc", here), (std::vector<std::string>{"rc"}));
  EXPECT_EQ(missing_transports("tcp,cuda_ipc,rc:aux", here),
            (std::vector<std::string>{"cuda_ipc", "rc"}));
  EXPECT_EQ(missing_transports("cuda", here), (std::vector<std::string>{"cuda"}));
  EXPECT_EQ(missing_transports("tpc", here), (std::vector<std::string>{"tpc"}));
  EXPECT_TRUE(missing_transports("rc", {"rc_verbs"}).empty());
}

TEST(UcxOptions, SplitsAndChecksNamesAgainstThisUcx) {
  EXPECT_EQ(split_option("UCX_TCP_SNDBUF=1M"),
            std::make_pair(std::string("TCP_SNDBUF"), std::string("1M")));
  EXPECT_THROW(split_option("NOEQUALS"), usage_error);
  std::vector<std::string> o{"RNDV_THRESH=16K"};
  EXPECT_NO_THROW(check_options(o));
  o = {"NO_SUCH_KNOB=1"};
  try {
    check_options(o);
    FAIL();
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("no option 'NO_SUCH_KNOB'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("ucx_info -c"), std::string::npos);  // where to look
  }
  o = {"RNDV_TRESH=16K"};
  try {
    check_options(o);
    FAIL();
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("Did you mean RNDV_THRESH"), std::string::npos)
        << e.what();
  }
  o = {"LOG_LEVEL=info"};
  try {
    check_options(o);
    FAIL();
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("whole process"), std::string::npos);
  }
  o = {"TLS=tcp"};
  EXPECT_THROW(check_options(o), usage_error);
}

TEST(UcxOptions, TheRunOptionsObjectIsCheckedLikeAPeersInput) {
  EXPECT_TRUE(options_from(nlohmann::json::object()).empty());
  EXPECT_EQ(options_from({{"options", {"RNDV_THRESH=1K"}}}),
            (std::vector<std::string>{"RNDV_THRESH=1K"}));
  EXPECT_THROW(options_from({{"options", "RNDV_THRESH=1K"}}), usage_error);
  EXPECT_THROW(options_from({{"options", {1, 2}}}), usage_error);
  EXPECT_THROW(options_from({{"options", {"NOEQUALS"}}}), usage_error);
  EXPECT_THROW(options_from({{"options", {std::string(300, 'A') + "=1"}}}), usage_error);
  EXPECT_THROW(options_from({{"options", std::vector<std::string>(65, "A=1")}}), usage_error);
}

TEST(UcxOptions, TheTlsAxisDefault) {
  EXPECT_EQ(default_tls({"tcp"}, true, "sm"), (std::vector<std::string>{"tcp"}));
  EXPECT_EQ(default_tls({}, true, "sm"), (std::vector<std::string>{"sm"}));
  EXPECT_EQ(default_tls({}, true, ""), (std::vector<std::string>{"tcp", "posix,sysv,cma", ""}));
  EXPECT_EQ(default_tls({}, false, nullptr), (std::vector<std::string>{""}));
}

TEST(UcxOptions, TheRegistryJudgesUcxTlsAgainstASidesLibrary) {
  const transport_entry* e = transport_registry::instance().find("ucx");
  ASSERT_TRUE(e != nullptr && e->env_axis);
  EXPECT_EQ(e->env_axis->variable, "UCX_TLS");
  const nlohmann::json library{{"transports", {"tcp", "sysv", "posix", "cma", "self"}}};
  const auto [missing, available] = e->env_axis->judge("sm,cuda_ipc,tcp", library);
  EXPECT_EQ(missing, (std::vector<std::string>{"cuda_ipc"}));  // sm is an alias UCX expands
  EXPECT_EQ(available.size(), 5U);
  // A side whose hello does not describe its UCX: nothing can be judged.
  EXPECT_TRUE(e->env_axis->judge("cuda_ipc", nlohmann::json::object()).first.empty());
  EXPECT_TRUE(e->env_axis->judge("cuda_ipc", {{"transports", 7}}).first.empty());
}

TEST(UcxOptions, ThisHostHasTheDebianTransports) {
  const auto& t = available_transports();
  EXPECT_EQ(t.count("tcp"), 1U);
  EXPECT_EQ(t.count("self"), 1U);
}

}  // namespace
}  // namespace pairperf::ucx

namespace pairperf::ucx {
namespace {

TEST(UcxCudaTls, SetsThatCannotMoveGpuMemory) {
  EXPECT_EQ(cuda_tls_problem(""), "");  // UCX's default: whatever it has
  EXPECT_EQ(cuda_tls_problem("cuda_copy,cuda_ipc,tcp"), "");
  EXPECT_EQ(cuda_tls_problem("cuda,rc"), "");
  EXPECT_EQ(cuda_tls_problem("all"), "");
  EXPECT_NE(cuda_tls_problem("tcp,sm").find("has no cuda_copy"), std::string::npos);
  EXPECT_NE(cuda_tls_problem("^cuda_copy").find("excludes cuda_copy"), std::string::npos);
  EXPECT_EQ(cuda_tls_problem("^ud"), "");
}

}  // namespace
}  // namespace pairperf::ucx

#include "transports/ucx/ucx_cuda.h"

namespace pairperf::ucx {
namespace {

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

TEST(UcxCudaSupport, SaysWhichOfTheThreeCausesStopsGpuMemory) {
  cuda_support s;
  s.ucs_library = "/usr/lib/x86_64-linux-gnu/libucs.so.0.0.0";
  s.module_dir = "/usr/lib/x86_64-linux-gnu/ucx";
  // Debian's libucx0: no CUDA module at all.
  std::string why = explain_missing_cuda(s);
  EXPECT_TRUE(has(why, "built without CUDA support")) << why;
  EXPECT_TRUE(has(why, "/usr/lib/x86_64-linux-gnu/ucx")) << why;
  EXPECT_TRUE(has(why, "scripts/build-ucx-cuda")) << why;
  // A CUDA UCX where the driver's libraries are missing (a container without the NVIDIA runtime).
  s.module = "/opt/ucx/lib/ucx/libuct_cuda.so.0";
  s.driver_error = "libcuda.so.1: cannot open shared object file: No such file or directory";
  why = explain_missing_cuda(s);
  EXPECT_TRUE(has(why, "installed but cannot load: libcuda.so.1")) << why;
  EXPECT_TRUE(has(why, "NVIDIA container runtime")) << why;
  // Everything loads but UCX sees no GPU.
  s.driver_error.clear();
  why = explain_missing_cuda(s);
  EXPECT_TRUE(has(why, "sees no usable GPU")) << why;
  EXPECT_TRUE(has(why, "CUDA_VISIBLE_DEVICES")) << why;
  // cuda_copy offered: nothing to explain, and the JSON says so.
  s.cuda_copy = true;
  EXPECT_EQ(explain_missing_cuda(s), "");
  const auto j = to_json(s);
  EXPECT_TRUE(j["cuda_copy"].get<bool>());
  EXPECT_FALSE(j.contains("why_not"));
}

TEST(UcxCudaSupport, ThisProcessFindsItsOwnLibucs) {
  const cuda_support& s = probe_cuda_support();
  EXPECT_TRUE(has(s.ucs_library, "libucs.so")) << s.ucs_library;
  EXPECT_TRUE(has(s.module_dir, "ucx")) << s.module_dir;
  // Whatever this host has, the answer is consistent: cuda_copy, or a reason.
  EXPECT_NE(s.cuda_copy, !explain_missing_cuda(s).empty());
}

}  // namespace
}  // namespace pairperf::ucx

namespace pairperf::ucx {
namespace {

TEST(UcxCudaRma, V1ProtocolsAreRefusedWithTheWayOut) {
  // UCX 1.13 (Debian 12): v1 unless asked for v2, by option or environment.
  EXPECT_FALSE(uses_protocols_v2(1, 13, {}, nullptr));
  EXPECT_TRUE(uses_protocols_v2(1, 13, {"PROTO_ENABLE=y"}, nullptr));
  EXPECT_TRUE(uses_protocols_v2(1, 13, {}, "yes"));
  EXPECT_FALSE(uses_protocols_v2(1, 13, {"PROTO_ENABLE=n"}, "y"));  // the case's option wins
  // From 1.16 v2 is the default, and can still be turned off.
  EXPECT_TRUE(uses_protocols_v2(1, 16, {}, nullptr));
  EXPECT_TRUE(uses_protocols_v2(2, 0, {}, nullptr));
  EXPECT_FALSE(uses_protocols_v2(1, 18, {}, "n"));
  EXPECT_FALSE(uses_protocols_v2(1, 15, {"TLS=tcp"}, ""));

  const std::string why = cuda_rma_problem(1, 13, false);
  EXPECT_NE(why.find("UCX 1.13 runs its v1 protocols"), std::string::npos) << why;
  EXPECT_NE(why.find("--ucx PROTO_ENABLE=y"), std::string::npos) << why;
  EXPECT_EQ(cuda_rma_problem(1, 13, true), "");
}

}  // namespace
}  // namespace pairperf::ucx

namespace pairperf::ucx {
namespace {

TEST(UcxOptions, MistypedNamesGetTheClosestRealOnes) {
  const std::set<std::string> known{"TCP_SNDBUF",   "TCP_RCVBUF",  "RNDV_THRESH",
                                    "ZCOPY_THRESH", "RNDV_SCHEME", "PROTO_ENABLE"};
  EXPECT_EQ(similar_options("TCP_SNDBUFF", known), (std::vector<std::string>{"TCP_SNDBUF"}));
  EXPECT_EQ(similar_options("RNDV_TRESH", known), (std::vector<std::string>{"RNDV_THRESH"}));
  EXPECT_EQ(similar_options("TCP_RCVBUF", known).front(), "TCP_RCVBUF");
  EXPECT_TRUE(similar_options("NO_SUCH_KNOB", known).empty());
}

}  // namespace
}  // namespace pairperf::ucx
