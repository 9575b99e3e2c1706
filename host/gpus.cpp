#include "host/gpus.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "host/nvml_abi.h"

namespace pairperf {
namespace {

using nvml_abi::nvml_device;
using nvml_abi::nvml_return;
using nvml_pci_info = nvml_abi::pci_info;
using nvml_api = nvml_abi::api;
constexpr nvml_return nvml_success = nvml_abi::success;
constexpr unsigned nvml_max_links = nvml_abi::max_links;
constexpr unsigned nvml_feature_enabled = nvml_abi::feature_enabled;

template <class F>
bool load(void* lib, const char* symbol, F& out) {
  out = reinterpret_cast<F>(::dlsym(lib, symbol));  // NOLINT: dlsym returns void*
  return out != nullptr;
}

// "00000000:18:00.0" and "0000:18:00.0" name the same device.
std::string normalize_bus_id(std::string id) {
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto colon = id.find(':');
  if (colon != std::string::npos && colon > 4 && id.find(':', colon + 1) != std::string::npos) {
    const std::string domain = id.substr(0, colon);
    if (domain.find_first_not_of('0') >= colon - 4) id = id.substr(colon - 4);
  }
  return id;
}

std::string short_uuid(const std::string& uuid) {
  return uuid.substr(0, std::min<std::size_t>(uuid.size(), 12));
}

std::string uuids(const std::vector<gpu_info>& list) {
  std::vector<std::string> out;
  for (const auto& g : list) out.push_back(short_uuid(g.uuid));
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace

gpu_inventory read_gpus() {
  gpu_inventory inv;
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    inv.reason = "NVML not found (libnvidia-ml.so.1: no NVIDIA driver here)";
    return inv;
  }
  nvml_api api{};
  const bool ok = load(lib, "nvmlInit_v2", api.init) && load(lib, "nvmlShutdown", api.shutdown) &&
                  load(lib, "nvmlErrorString", api.error_string) &&
                  load(lib, "nvmlDeviceGetCount_v2", api.count) &&
                  load(lib, "nvmlDeviceGetHandleByIndex_v2", api.by_index) &&
                  load(lib, "nvmlDeviceGetUUID", api.uuid) &&
                  load(lib, "nvmlDeviceGetName", api.name) &&
                  load(lib, "nvmlDeviceGetPciInfo_v3", api.pci) &&
                  load(lib, "nvmlSystemGetDriverVersion", api.driver);
  // NVLink queries are optional (older drivers, no NVLink hardware).
  load(lib, "nvmlDeviceGetNvLinkState", api.link_state);
  load(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.link_remote_pci);
  if (!ok) {
    inv.reason = "NVML is too old (missing nvmlDeviceGetPciInfo_v3 or another entry point)";
    ::dlclose(lib);
    return inv;
  }
  if (const nvml_return rc = api.init(); rc != nvml_success) {
    inv.reason = fmt::format("nvmlInit: {}", api.error_string(rc));
    ::dlclose(lib);
    return inv;
  }
  inv.available = true;
  std::array<char, nvml_abi::text_buffer_size> text{};
  if (api.driver(text.data(), text.size()) == nvml_success) inv.driver = text.data();
  unsigned count = 0;
  if (api.count(&count) != nvml_success) count = 0;
  for (unsigned i = 0; i < count; ++i) {
    nvml_device dev = nullptr;
    if (api.by_index(i, &dev) != nvml_success) continue;
    gpu_info g;
    g.index = i;
    if (api.uuid(dev, text.data(), text.size()) == nvml_success) g.uuid = text.data();
    if (api.name(dev, text.data(), text.size()) == nvml_success) g.name = text.data();
    nvml_pci_info pci{};
    if (api.pci(dev, &pci) == nvml_success) g.bus_id = normalize_bus_id(pci.bus_id);
    for (unsigned link = 0; api.link_state && api.link_remote_pci && link < nvml_max_links;
         ++link) {
      unsigned active = 0;
      if (api.link_state(dev, link, &active) != nvml_success) break;  // no such link
      nvml_pci_info remote{};
      if (active == nvml_feature_enabled && api.link_remote_pci(dev, link, &remote) == nvml_success)
        g.nvlink_peers.push_back(normalize_bus_id(remote.bus_id));
    }
    inv.gpus.push_back(std::move(g));
  }
  api.shutdown();
  ::dlclose(lib);
  return inv;
}

void to_json(nlohmann::json& j, const gpu_inventory& inv) {
  j = {{"available", inv.available}, {"gpus", inv.gpus}};
  if (!inv.reason.empty()) j["reason"] = inv.reason;
  if (!inv.driver.empty()) j["driver"] = inv.driver;
}

gpu_pair judge_gpu_pair(bool same_host, const std::vector<gpu_info>& client,
                        const std::vector<gpu_info>& server) {
  gpu_pair p;
  if (client.empty() || server.empty()) return p;
  if (!same_host) {
    p.expected = "network";
    p.why =
        "the GPUs are in different hosts: GPUDirect RDMA through the NICs, or staged through "
        "host memory";
    return p;
  }
  std::set<std::string> theirs;
  for (const auto& g : server) theirs.insert(g.uuid);
  const bool shared = std::any_of(client.begin(), client.end(),
                                  [&](const gpu_info& g) { return theirs.count(g.uuid) > 0; });
  // NVLinks from the client's GPUs to the server's (by bus id; NVML reports the far end even of
  // a link to a GPU this container does not see).
  std::map<std::string, unsigned> links;
  for (const auto& c : client) {
    for (const auto& s : server) {
      if (c.bus_id == s.bus_id) continue;
      const auto n =
          static_cast<unsigned>(std::count(c.nvlink_peers.begin(), c.nvlink_peers.end(), s.bus_id));
      if (n > 0) links[fmt::format("{} -> {}", c.bus_id, s.bus_id)] = n;
    }
  }
  const std::string link_text =
      links.empty() ? std::string()
                    : fmt::format("{} NVLink(s) {}", links.begin()->second, links.begin()->first);
  if (!shared) {
    p.expected = "cuda_ipc impossible";
    p.problem = fmt::format(
        "one host, but each side sees only its own GPUs (client {}; server {}){}: cuda_ipc needs "
        "each process to open the peer's GPU memory, so UCX falls back to staging through host "
        "memory and a network transport (hundreds of MB/s instead of hundreds of GB/s)",
        uuids(client), uuids(server),
        links.empty() ? std::string() : fmt::format(", though {} joins them", link_text));
    p.fix =
        "make every GPU visible to both containers (NVIDIA_VISIBLE_DEVICES=all, or both "
        "processes in one pod) and pick each process's GPU with CUDA_VISIBLE_DEVICES";
    p.why = p.problem;
    return p;
  }
  if (!links.empty()) {
    p.expected = "cuda_ipc over NVLink";
    p.why = fmt::format("both sides see the pair's GPUs and {} joins them", link_text);
  } else if (client.size() == 1 && server.size() == 1 && client[0].uuid == server[0].uuid) {
    p.expected = "cuda_ipc within one GPU";
    p.why = fmt::format("both sides use the same GPU {}", short_uuid(client[0].uuid));
  } else {
    p.expected = "cuda_ipc over PCIe";
    p.why =
        "both sides see the GPUs but no NVLink joins them: UCX may disable cuda_ipc's zero-copy "
        "get (\"no nvlinks detected\") and stage through host memory";
  }
  return p;
}

gpu_topology parse_topo_matrix(const std::string& text) {
  gpu_topology t;
  std::istringstream in(text);
  std::string line;
  bool header = false;
  while (std::getline(in, line)) {
    // ANSI colour codes (nvidia-smi on a terminal) and tabs out.
    std::string clean;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\x1b') {
        while (i < line.size() && line[i] != 'm') ++i;
        continue;
      }
      clean.push_back(line[i] == '\t' ? ' ' : line[i]);
    }
    std::istringstream words(clean);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.empty()) continue;
    if (!header && w.front() == "GPU0") {  // the column header
      header = true;
      for (const auto& x : w) {
        if (x.rfind("GPU", 0) == 0 && x.size() > 3 &&
            std::isdigit(static_cast<unsigned char>(x[3])) != 0)
          t.gpus.push_back(x);
        else if (x.rfind("NIC", 0) == 0 || x.rfind("mlx", 0) == 0)
          t.nics.push_back(x);
      }
      continue;
    }
    if (header && w.front().rfind("GPU", 0) == 0 && t.links.size() < t.gpus.size() &&
        w.size() > t.gpus.size() + t.nics.size()) {
      const std::size_t cols = t.gpus.size() + t.nics.size();
      t.links.emplace_back(w.begin() + 1, w.begin() + 1 + static_cast<long>(cols));
      t.cpu_affinity.push_back(w.size() > cols + 1 ? w[cols + 1] : "");
      continue;
    }
    if (w.front().size() > 4 && w.front().rfind("NIC", 0) == 0 && w.front().back() == ':' &&
        w.size() >= 2)
      t.nic_devices[w.front().substr(0, w.front().size() - 1)] = w[1];
  }
  if (t.gpus.empty() || t.links.size() != t.gpus.size())
    throw std::runtime_error("no GPU matrix in this text (expected `nvidia-smi topo -m` output)");
  return t;
}

unsigned nvlinks_between(const gpu_topology& t, std::size_t a, std::size_t b) {
  if (a >= t.links.size() || b >= t.gpus.size()) return 0;
  const std::string& l = t.links[a][b];
  if (l.rfind("NV", 0) != 0) return 0;
  unsigned n = 0;
  for (std::size_t i = 2; i < l.size() && std::isdigit(static_cast<unsigned char>(l[i])) != 0; ++i)
    n = n * 10 + static_cast<unsigned>(l[i] - '0');
  return n;
}

std::vector<std::string> describe_topology(const gpu_topology& t) {
  std::vector<std::string> out;
  for (std::size_t g = 0; g < t.links.size(); ++g) {
    // NVLink peers grouped by link count: "NV18 to GPU1-GPU7" or "NV4 to GPU1, GPU3".
    std::map<unsigned, std::vector<std::size_t>> by_count;
    for (std::size_t p = 0; p < t.gpus.size(); ++p) {
      if (p == g) continue;
      if (const unsigned n = nvlinks_between(t, g, p); n > 0) by_count[n].push_back(p);
    }
    std::vector<std::string> parts;
    for (const auto& [n, peers] : by_count) {
      std::vector<std::string> names;
      for (auto p : peers) names.push_back(t.gpus[p]);
      const bool all = peers.size() + 1 == t.gpus.size() && peers.size() > 1;
      const bool run = peers.back() - peers.front() + 1 == peers.size() && peers.size() > 2;
      parts.push_back(fmt::format("NV{} to {}", n,
                                  all   ? fmt::format("all {} other GPUs", peers.size())
                                  : run ? fmt::format("{}-{}", names.front(), names.back())
                                        : fmt::format("{}", fmt::join(names, ", "))));
    }
    std::string line = fmt::format(
        "{}: {}", t.gpus[g],
        parts.empty() ? std::string("no NVLink") : fmt::format("{}", fmt::join(parts, "; ")));
    // The nearest NICs: the best PCIe relation present in this GPU's row.
    for (const char* rel : {"PIX", "PXB", "PHB"}) {
      std::vector<std::string> nics;
      for (std::size_t n = 0; n < t.nics.size(); ++n) {
        const std::size_t col = t.gpus.size() + n;
        if (col < t.links[g].size() && t.links[g][col] == rel) {
          const auto dev = t.nic_devices.find(t.nics[n]);
          nics.push_back(dev == t.nic_devices.end() ? t.nics[n]
                                                    : fmt::format("{} {}", t.nics[n], dev->second));
        }
      }
      if (!nics.empty()) {
        line += fmt::format("; nearest NIC{}: {} ({})", nics.size() > 1 ? "s" : "",
                            fmt::join(nics, ", "), rel);
        break;
      }
    }
    if (!t.nics.empty() && line.find("nearest NIC") == std::string::npos)
      line += "; no NIC on its PCIe switch or host bridge (NODE/SYS only)";
    if (g < t.cpu_affinity.size() && !t.cpu_affinity[g].empty())
      line += fmt::format("; CPUs {}", t.cpu_affinity[g]);
    out.push_back(std::move(line));
  }
  return out;
}

void to_json(nlohmann::json& j, const gpu_topology& t) {
  j = {{"gpus", t.gpus},
       {"nics", t.nics},
       {"nic_devices", t.nic_devices},
       {"links", t.links},
       {"cpu_affinity", t.cpu_affinity},
       {"summary", describe_topology(t)}};
}

std::optional<gpu_topology> read_topology(std::string& why) {
  // coreutils' timeout bounds nvidia-smi, which can stall on a wedged driver.
  FILE* pipe = ::popen(
      "command -v nvidia-smi >/dev/null 2>&1 || { echo 'nvidia-smi: not found'; exit 127; }; "
      "exec timeout -k 2 10 nvidia-smi topo -m 2>&1",
      "r");
  if (pipe == nullptr) {
    why = "cannot start nvidia-smi";
    return std::nullopt;
  }
  std::string text;
  std::array<char, 4096> buf{};
  while (text.size() < (1U << 20)) {
    const std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe);
    if (n == 0) break;
    text.append(buf.data(), n);
  }
  const int status = ::pclose(pipe);
  if (status != 0) {
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::string first = text.substr(0, text.find('\n'));
    why = code == 124   ? "nvidia-smi topo -m did not answer within 10 s"
          : code == 127 ? "no nvidia-smi here"
                        : fmt::format("nvidia-smi topo -m failed (exit {}): {}", code, first);
    return std::nullopt;
  }
  try {
    return parse_topo_matrix(text);
  } catch (const std::exception& e) {
    why = e.what();
    return std::nullopt;
  }
}

std::vector<lane> carrying_lanes(const case_result& r) {
  std::vector<lane> out;
  if (!r.provenance) return out;
  const bool mixed = r.test.client_memory != r.test.server_memory;
  for (const auto& l : r.provenance->lanes) {
    if (!(mixed && l.kind == lane_kind::gpu_ipc)) out.push_back(l);
  }
  return out;
}

gpu_path_verdict classify_gpu_path(const case_result& r) {
  if (r.test.client_memory != memory_type::cuda && r.test.server_memory != memory_type::cuda)
    return {};
  if (!r.provenance) return {"unknown", "no provenance (the case did not run)"};
  const auto& p = *r.provenance;
  if (r.test.client_memory != r.test.server_memory) {
    // GPU IPC maps one GPU buffer into the other process: it needs GPU memory on both sides, so a
    // lane of it on the endpoint does not carry a host <-> GPU transfer; a staged copy does.
    return {"host-GPU copy",
            "one side's buffer is in host memory: the GPU data is copied between host and GPU "
            "(UCX: cuda_copy) and carried on the host path; GPU IPC (cuda_ipc) applies only "
            "between GPU buffers"};
  }
  const std::vector<lane> lanes = carrying_lanes(r);
  const auto first_of = [&](lane_kind kind) -> const lane* {
    for (const auto* set : {&lanes, &p.bulk}) {
      const auto it =
          std::find_if(set->begin(), set->end(), [&](const lane& l) { return l.kind == kind; });
      if (it != set->end()) return &*it;
    }
    return nullptr;
  };
  if (const lane* ipc = first_of(lane_kind::gpu_ipc))
    return {"fast path",
            fmt::format("{} carried the GPU data (NVLink or PCIe peer-to-peer)", ipc->transport)};
  if (!p.staged.empty())
    return {"fallback",
            fmt::format("the GPU data was staged through host memory (\"{}\")", p.staged)};
  if (const lane* net = first_of(lane_kind::network))
    return {"fallback",
            fmt::format("GPU data went over {}/{}: no GPU IPC (cuda_ipc) between these GPUs",
                        net->transport, net->device)};
  if (first_of(lane_kind::rdma) != nullptr)
    return {"network (RDMA)", "an RDMA lane carried the GPU data (GPUDirect RDMA if registered)"};
  return {"unknown", "no lane names how the GPU data moved"};
}

}  // namespace pairperf
