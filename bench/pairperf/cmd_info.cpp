#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/private_files.h"
#include "core/errors.h"
#include "core/interfaces.h"
#include "harness/context.h"
#include "host/gpus.h"
#include "transports/memory/allocator.h"
#include "transports/registry.h"

namespace pairperf::cli {
namespace {

nlohmann::json memory_types() {
  nlohmann::json out = nlohmann::json::object();
  for (auto m : {memory_type::host, memory_type::cuda}) {
    std::string why;
    out[to_string(m)] = find_allocator(m, why) != nullptr ? std::string("available") : why;
  }
  return out;
}

// The files pairperf ships beside its binary: where each was found, or why it is missing.
nlohmann::json private_files() {
  const nlohmann::json missing = nullptr;
  nlohmann::json out = nlohmann::json::object();
  for (const char* name :
       {"report", "pairperf-mpi", "explain-catalog.json", "explain-formats.json"}) {
    const bool program = std::string_view(name).find('.') == std::string_view::npos;
    const std::string path = find_private_file(name, {}, program);
    out[name] = path.empty() ? missing : nlohmann::json(path);
  }
  return out;
}

// `nvidia-smi topo -m`: from the file given, else run here.
nlohmann::json topology(const std::string& file) {
  std::string why;
  std::optional<gpu_topology> t;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw usage_error(fmt::format("--topo-file {}: cannot read it", file));
    std::stringstream text;
    text << in.rdbuf();
    try {
      t = parse_topo_matrix(text.str());
    } catch (const std::exception& e) {
      throw usage_error(fmt::format("--topo-file {}: {}", file, e.what()));
    }
  } else {
    t = read_topology(why);
  }
  if (!t) return {{"available", false}, {"reason", why}};
  nlohmann::json j = *t;
  j["available"] = true;
  j["source"] = file.empty() ? std::string("nvidia-smi topo -m") : file;
  return j;
}

// RDMA devices, GPUs and the GPU topology.
void print_devices(const nlohmann::json& host, const nlohmann::json& topo) {
  fmt::print("\nrdma devices:");
  if (host["rdma_devices"].empty()) fmt::print(" none\n");
  for (const auto& d : host["rdma_devices"]) {
    fmt::print("\n  {}", d["name"].get<std::string>());
    for (const auto& p : d["ports"]) {
      fmt::print("  port {} {} {} {}", p["port"].get<std::string>(), p["state"].get<std::string>(),
                 p["link_layer"].get<std::string>(), p["rate"].get<std::string>());
    }
  }
  if (!host["rdma_devices"].empty()) fmt::print("\n");
  const auto& gpus = host["gpus"];
  fmt::print("\ngpus:");
  if (!gpus.value("available", false)) {
    fmt::print(" unknown: {}\n", gpus.value("reason", std::string("?")));
  } else if (gpus["gpus"].empty()) {
    fmt::print(" none (driver {})\n", gpus.value("driver", std::string("?")));
  } else {
    fmt::print(" driver {}\n", gpus.value("driver", std::string("?")));
    for (const auto& g : gpus["gpus"]) {
      fmt::print("  {} {} {} {} ({} active NVLinks)\n", g["index"].get<unsigned>(),
                 g["name"].get<std::string>(), g["uuid"].get<std::string>(),
                 g["bus_id"].get<std::string>(), g["nvlink_peers"].size());
    }
  }
  fmt::print("\ngpu topology:");
  if (!topo.value("available", false)) {
    fmt::print(" unknown: {}\n", topo.value("reason", std::string("?")));
  } else {
    fmt::print(" ({})\n", topo.value("source", std::string("?")));
    for (const auto& line : topo["summary"]) fmt::print("  {}\n", line.get<std::string>());
  }
}

// Each transport, its tests and its library's facts.
void print_transports() {
  fmt::print("\ntransports:\n");
  for (const auto& e : transport_registry::instance().all()) {
    std::vector<std::string> tests;
    for (const auto& t : e.tests) tests.emplace_back(t.name);
    fmt::print("  {:<6} {} [{}]\n", e.name, e.description, fmt::join(tests, ", "));
    if (e.describe_library) {
      const nlohmann::json lib = e.describe_library();
      if (lib.contains("transports")) {
        std::vector<std::string> tls;
        for (const auto& t : lib["transports"]) tls.push_back(t.get<std::string>());
        const std::string file = lib.value("library", "");
        fmt::print("         library {}{}; transports on this host: {}\n",
                   lib.value("version", "?"), file.empty() ? file : fmt::format(" ({})", file),
                   fmt::join(tls, ", "));
        if (lib.contains("cuda") && lib["cuda"].contains("why_not"))
          fmt::print("         GPU memory: {}\n", lib["cuda"]["why_not"].get<std::string>());
      } else if (lib.contains("devices")) {
        std::vector<std::string> devs;
        for (const auto& d : lib["devices"]) devs.push_back(d.get<std::string>());
        fmt::print("         {}; devices: {}\n", lib.value("library", "?"),
                   devs.empty() ? std::string("none") : fmt::format("{}", fmt::join(devs, ", ")));
      }
    }
    if (e.unavailable) {
      if (const std::string why = e.unavailable(); !why.empty())
        fmt::print("         unavailable here: {} (its cases are skipped)\n", why);
    }
  }
}

// Each libnccl.so.2 found here and the interface its bootstrap takes in this environment.
void print_nccl(const nlohmann::json& host) {
  const nlohmann::json nccl = host.value("nccl", nlohmann::json::object());
  const auto answers = nccl.value("answers", nlohmann::json::array());
  fmt::print("\nNCCL (libnccl.so.2 asked with this environment; searched: {}):\n",
             nccl.value("searched", "?"));
  if (answers.empty()) fmt::print("  none found\n");
  for (const auto& a : answers) {
    const std::string what =
        !a.value("ran", false) ? fmt::format("no answer: {}", a.value("error", ""))
        : !a.value("ok", false)
            ? fmt::format("finds no interface: {}", a.value("error", ""))
            : fmt::format("bootstrap takes {}:{}", a.value("iface", ""), a.value("address", ""));
    const std::string version = a.value("version", "");
    fmt::print("  {:<8} {}  ({}, {})\n", version.empty() ? "-" : version, what,
               a.value("library", ""), a.value("found_by", ""));
  }
}

void print_table(const nlohmann::json& host, const nlohmann::json& topo) {
  fmt::print("host        {} ({}, {})\n", host["hostname"].get<std::string>(),
             host["kernel"].get<std::string>(), host["os"].get<std::string>());
  fmt::print("cpu         {} x {}\n", host["cpus"].get<unsigned>(),
             host["cpu_model"].get<std::string>());
  fmt::print("\n{:<16} {:<6} {:>6} {:>10}  {}\n", "interface", "state", "mtu", "speed",
             "addresses");
  for (const auto& i : list_interfaces()) {
    std::vector<std::string> addrs;
    for (const auto& a : i.addresses)
      addrs.push_back(fmt::format("{}/{}", a.address, a.prefix_len));
    fmt::print("{:<16} {:<6} {:>6} {:>10}  {}\n", i.name,
               i.up ? (i.running ? "up" : "nocarr") : "down", i.mtu,
               i.speed_mbps ? fmt::format("{} Mb/s", *i.speed_mbps) : "-", fmt::join(addrs, " "));
  }
  print_devices(host, topo);
  print_nccl(host);
  print_transports();
  fmt::print("\nmemory types:\n");
  const nlohmann::json memory = memory_types();  // items() must not outlive it
  for (const auto& [name, state] : memory.items())
    fmt::print("  {:<6} {}\n", name, state.get<std::string>());
  const nlohmann::json files = private_files();
  fmt::print("\ncommands beside this binary:\n");
  fmt::print("  report  {}\n", files["report"].is_null()
                                   ? "not installed: `pairperf report` cannot run"
                                   : files["report"].get<std::string>());
  fmt::print("  mesh    {}\n",
             files["pairperf-mpi"].is_null()
                 ? "no MPI mesh (install pairperf-mpi); --hosts still works"
                 : "under mpirun/srun: " + files["pairperf-mpi"].get<std::string>());
}

}  // namespace

command add_info(CLI::App& root) {
  auto as_json = std::make_shared<bool>(false);
  auto topo_file = std::make_shared<std::string>();
  CLI::App* app = root.add_subcommand(
      "info",
      "Show this host: interfaces, RDMA devices, GPUs and their topology, transports, "
      "memory types");
  app->add_flag("--json", *as_json, "Print JSON instead of a table");
  app->add_option("--topo-file", *topo_file,
                  "Read the GPU topology from this saved `nvidia-smi topo -m` output instead of "
                  "running nvidia-smi here");
  return command{app, [as_json, topo_file] {
                   const nlohmann::json topo = topology(*topo_file);
                   describe_nccl_in_context();
                   const nlohmann::json host = host_context();
                   if (*as_json) {
                     // results/info.schema.json describes it.
                     const nlohmann::json doc{
                         {"schema", "pairperf.info"},      {"schema_version", "1.0.0"},
                         {"tool", tool_context()},         {"host", host},
                         {"gpu_topology", topo},           {"env", relevant_environment()},
                         {"memory_types", memory_types()}, {"private_files", private_files()}};
                     fmt::print("{}\n", doc.dump(2));
                   } else {
                     print_table(host, topo);
                   }
                   return 0;
                 }};
}

}  // namespace pairperf::cli
