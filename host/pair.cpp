#include "host/pair.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/units.h"

namespace pairperf {
namespace {

const nlohmann::json& process_of(const nlohmann::json& host) {
  static const nlohmann::json none = nlohmann::json::object();
  if (!host.is_object()) return none;
  const auto it = host.find("process");
  return it != host.end() && it->is_object() ? *it : none;
}

std::string ns_of(const nlohmann::json& process, const char* kind) {
  const auto ns = process.find("namespaces");
  if (ns == process.end() || !ns->is_object()) return {};
  return ns->value(kind, std::string());
}

std::optional<std::uint64_t> shm_size(const nlohmann::json& process) {
  const auto shm = process.find("dev_shm");
  if (shm == process.end() || !shm->is_object() || !shm->contains("size_bytes"))
    return std::nullopt;
  return shm->at("size_bytes").get<std::uint64_t>();
}

// The lanes that carried the bulk of a measured message, as its transport told them apart.
std::vector<lane> bulk_lanes(const case_result& r) {
  if (!r.provenance) return {};
  return payload_lanes(*r.provenance);
}

std::string lanes_text(const std::vector<lane>& lanes) {
  std::vector<std::string> out;
  for (const auto& l : lanes) out.push_back(l.transport + "/" + l.device);
  return fmt::format("{}", fmt::join(out, ", "));
}

std::string lanes_text(const case_result& r) {
  if (!r.provenance || r.provenance->lanes.empty()) return "(no data lanes reported)";
  std::vector<std::string> out;
  for (const auto& l : r.provenance->lanes) out.push_back(l.transport + "/" + l.device);
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace

void to_json(nlohmann::json& j, const pair_facts& f) {
  j = {{"known", f.known},
       {"same_host", f.same_host},
       {"same_ipc_namespace", f.same_ipc},
       {"same_pid_namespace", f.same_pid},
       {"same_net_namespace", f.same_net},
       {"same_dev_shm", f.same_shm}};
  j["client"] = {{"ipc", f.client_ipc}, {"pid", f.client_pid_ns}};
  j["server"] = {{"ipc", f.server_ipc}, {"pid", f.server_pid_ns}};
  if (f.client_shm_bytes) j["client"]["dev_shm_bytes"] = *f.client_shm_bytes;
  if (f.server_shm_bytes) j["server"]["dev_shm_bytes"] = *f.server_shm_bytes;
}

pair_facts compare_hosts(const nlohmann::json& client_host, const nlohmann::json& server_host) {
  const nlohmann::json& c = process_of(client_host);
  const nlohmann::json& s = process_of(server_host);
  pair_facts f;
  const std::string cb = c.value("boot_id", std::string());
  const std::string sb = s.value("boot_id", std::string());
  f.known = !cb.empty() && !sb.empty();
  if (!f.known) return f;
  f.same_host = cb == sb;
  f.client_ipc = ns_of(c, "ipc");
  f.server_ipc = ns_of(s, "ipc");
  f.client_pid_ns = ns_of(c, "pid");
  f.server_pid_ns = ns_of(s, "pid");
  f.client_shm_bytes = shm_size(c);
  f.server_shm_bytes = shm_size(s);
  if (!f.same_host) return f;
  const auto same = [](const std::string& a, const std::string& b) { return !a.empty() && a == b; };
  f.same_ipc = same(f.client_ipc, f.server_ipc);
  f.same_pid = same(f.client_pid_ns, f.server_pid_ns);
  f.same_net = same(ns_of(c, "net"), ns_of(s, "net"));
  const auto shm_id = [](const nlohmann::json& p) {
    const auto shm = p.find("dev_shm");
    if (shm == p.end() || !shm->is_object()) return std::string();
    return fmt::format("{}/{}", shm->value("device", std::string()),
                       shm->value("inode", std::uint64_t{0}));
  };
  f.same_shm = same(shm_id(c), shm_id(s));
  return f;
}

std::optional<blocked_path> shared_memory_blocked(const pair_facts& f) {
  if (!f.known || !f.same_host) return std::nullopt;
  std::vector<std::string> causes;
  std::vector<std::string> fixes;
  if (!f.same_ipc) {
    causes.push_back(fmt::format(
        "the two processes are on one host but in different IPC namespaces (client {}, server "
        "{}): SysV and POSIX shared memory between them is impossible",
        f.client_ipc, f.server_ipc));
    fixes.emplace_back(
        "run both in one IPC namespace (Kubernetes: hostIPC: true on both pods, or both "
        "containers in one pod; Docker: --ipc=host or --ipc=container:<peer>)");
  }
  if (!f.same_pid) {
    causes.push_back(fmt::format(
        "the two processes are in different PID namespaces (client {}, server {}): CMA "
        "(process_vm_readv), UCX's zero-copy rendezvous on one host, cannot reach the peer's "
        "memory, so large messages go over a network transport",
        f.client_pid_ns, f.server_pid_ns));
    fixes.emplace_back(
        "share one PID namespace (Kubernetes: shareProcessNamespace: true in one pod, or "
        "hostPID: true; Docker: --pid=host or --pid=container:<peer>)");
  }
  if (f.same_ipc && !f.same_shm) {
    causes.emplace_back("the two processes see different /dev/shm file systems");
    fixes.emplace_back("mount the same /dev/shm into both (an emptyDir with medium: Memory)");
  }
  if (causes.empty()) return std::nullopt;
  return blocked_path{fmt::format("{}", fmt::join(causes, "; ")),
                      fmt::format("{}", fmt::join(fixes, "; "))};
}

expected_path expect_host_path(const pair_facts& f) {
  if (!f.known) return {"unknown", "a side did not report its process facts (older pairperf?)"};
  if (!f.same_host)
    return {"network", "the two processes run on different hosts (boot ids differ)"};
  if (const auto blocked = shared_memory_blocked(f))
    return {"shared memory", "one host, but " + blocked->cause};
  return {"shared memory",
          "one host, one IPC and PID namespace and the same /dev/shm: UCX should use posix, sysv "
          "or cma"};
}

void to_json(nlohmann::json& j, const path_verdict& v) {
  j = {{"verdict", v.verdict},
       {"expected", v.expected},
       {"seen", v.seen},
       {"cause", v.cause},
       {"fix", v.fix}};
}

path_verdict judge_host_path(const pair_facts& f, const case_result& measured) {
  path_verdict v;
  const expected_path want = expect_host_path(f);
  const auto blocked = shared_memory_blocked(f);
  v.expected = want.kind;
  if (measured.status != case_status::ok && measured.status != case_status::fail) {
    v.verdict = "failed";
    v.seen = measured.message;
    if (blocked) {
      v.cause = blocked->cause;
      v.fix = blocked->fix;
    } else {
      v.cause = "UCX could not connect the pair with its default transports";
      v.fix = "run `pairperf doctor` with UCX_LOG_LEVEL=info on both sides to see UCX's choice";
    }
    return v;
  }
  const std::vector<lane> bulk = bulk_lanes(measured);
  const auto any = [](const std::vector<lane>& lanes, auto pred) {
    return std::any_of(lanes.begin(), lanes.end(), pred);
  };
  const auto sm_lane = [](const lane& l) { return l.kind == lane_kind::shared_memory; };
  const bool sm_any = measured.provenance && any(measured.provenance->lanes, sm_lane);
  const bool sm_bulk = any(bulk, sm_lane);
  const auto network_bulk = std::find_if(
      bulk.begin(), bulk.end(), [](const lane& l) { return l.kind == lane_kind::network; });
  v.seen = lanes_text(measured);
  if (bulk.size() < (measured.provenance ? measured.provenance->lanes.size() : 0))
    v.seen += fmt::format(" (the {} message's bulk: {})", format_size(measured.test.size_bytes),
                          lanes_text(bulk));
  if (!f.known || !f.same_host) {
    v.verdict = "network";
    v.cause = want.why;
    return v;
  }
  if (sm_bulk) {
    v.verdict = "fast path";
    v.cause = "shared memory carries the data";
    return v;
  }
  v.verdict = network_bulk != bulk.end() ? "fallback to " + network_bulk->transport : "fallback";
  if (sm_any) v.verdict += " for large messages";
  if (blocked) {
    v.cause = blocked->cause;
    v.fix = blocked->fix;
  } else if (sm_any) {
    v.cause =
        "one host with shared namespaces, yet the rendezvous (large messages) took no "
        "shared-memory lane: UCX_TLS (or the build) lacks cma, knem or xpmem";
    v.fix = "add cma to UCX_TLS on both sides (or use UCX_TLS=sm,... which includes it)";
  } else {
    v.cause =
        "one host with shared namespaces, yet UCX chose no shared-memory transport: UCX_TLS "
        "(or the build's transports) excludes posix, sysv and cma";
    v.fix = "add sm (or posix,sysv,cma) to UCX_TLS on both sides";
  }
  return v;
}

}  // namespace pairperf
