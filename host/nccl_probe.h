#pragma once
// NCCL's own answer to "which interface do you take here", asked of the libnccl.so.2 that the
// job would load, in a child process with this process's environment (NCCL_SOCKET_IFNAME,
// NCCL_SOCKET_FAMILY, NCCL_COMM_ID, ...). ncclGetUniqueId() runs NCCL's bootstrap interface
// search without a GPU (seen with NCCL 2.18.3, 2.28.9 and 2.32.3): with NCCL_DEBUG=INFO it prints
//   "Bootstrap : Using eth0:192.0.2.2<0>"   (2.18, src/bootstrap.cc bootstrapNetInit)
//   "Bootstrap: Using eth0:192.0.2.2<0>"    (2.28, 2.32)
// and on failure a WARN ("Bootstrap : no socket interface found", "NET/Socket : No usable
// listening interface found") with a non-zero ncclResult_t. The id it returns starts with an
// 8-byte magic followed by the root's socket address (union ncclSocketAddress, src/include/
// socket.h), which this probe reads as a check on the line.
//
// The library is loaded only in the child (core/self_probe.h's run_self: /proc/self/exe again),
// so that no copy of NCCL, its threads or its signal handling enters pairperf, and a library that
// crashes or hangs costs one bounded child. Which files are asked:
//   PAIRPERF_NCCL_LIBRARY   ':'-separated paths: only these (the job's own, named by the user)
//   otherwise               the dynamic loader's libnccl.so.2 (LD_LIBRARY_PATH, ld.so.cache), the
//                           CUDA toolkit's folders, and each Python environment's
//                           nvidia/nccl/lib (the nvidia-nccl-cu12/-cu13 wheels of torch, vLLM,
//                           SGLang), each file once
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pairperf {

// A libnccl.so.2 to ask, and how it was found ("PAIRPERF_NCCL_LIBRARY", "the dynamic loader",
// "the CUDA toolkit", "a Python environment").
struct nccl_candidate {
  std::string path;  // a path, or "libnccl.so.2" for the dynamic loader's search
  std::string found_by;
};

// The files to ask on this host, in the order above, without repeats (by their real path).
// `environment` is the NAME=VALUE list whose PAIRPERF_NCCL_LIBRARY, LD_LIBRARY_PATH, CUDA_HOME,
// CUDA_PATH, VIRTUAL_ENV, CONDA_PREFIX, PATH and HOME count.
std::vector<nccl_candidate> find_nccl_libraries(const std::vector<std::string>& environment);

// One library's answer.
struct nccl_answer {
  std::string found_by;
  std::string library;           // the file that really ran (the loader's real path)
  std::string version;           // "2.28.9" (ncclGetVersion); "" when it did not load
  bool ran = false;              // the child loaded the library and called ncclGetUniqueId
  bool ok = false;               // ncclGetUniqueId succeeded
  std::string iface;             // the bootstrap's interface, from NCCL's own line
  std::string address;           // its address (numeric, without scope)
  std::string family;            // "ipv4" or "ipv6"
  std::string root;              // the root address the id carries ("192.0.2.2:53267")
  std::string error;             // why not: NCCL's WARN line and result, or the child's failure
  std::vector<std::string> log;  // NCCL's INFO and WARN lines, trimmed to what follows "NCCL "
};
void to_json(nlohmann::json& j, const nccl_answer& a);
void from_json(const nlohmann::json& j, nccl_answer& a);

// Asks every library find_nccl_libraries() lists, one child each, all within `budget` (a library
// left when it is spent answers "not asked"): {"searched": "...", "answers": [nccl_answer...]}.
// No library found: "answers" is empty.
nlohmann::json describe_nccl(std::chrono::milliseconds budget = std::chrono::seconds(10));

// What describe_nccl(budget) said in this process (asked once, on first use, with the first
// call's budget; thread-safe).
const nlohmann::json& nccl_description(std::chrono::milliseconds budget = std::chrono::seconds(10));

// NCCL's "Bootstrap: Using NAME:ADDRESS<PORT>" line (either spelling) among `lines`, with the
// interface name matched against `names` (an alias "eth0:1" holds a ':'): {iface, address}; empty
// strings when no line says it.
std::pair<std::string, std::string> parse_bootstrap_line(const std::vector<std::string>& lines,
                                                         const std::vector<std::string>& names);

}  // namespace pairperf
