#include "transports/verbs/verbs_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>

#include "core/errors.h"
#include "transports/verbs/verbs_addressing.h"

namespace pairperf::verbs {

void check(const options& o) {
  if (!o.device.empty()) (void)parse_device_spec(o.device);
  if (o.gid_index < -1 || o.gid_index > 255) throw usage_error("--gid-index must be 0 to 255");
  if (o.mtu != 0) (void)mtu_enum(o.mtu);
  if (o.qps < 1 || o.qps > 16) throw usage_error("--qps must be 1 to 16");
  if (o.signal_every < 1 || o.signal_every > 1024)
    throw usage_error("--signal-every must be 1 to 1024");
  if (o.inline_bytes > 1024) throw usage_error("--inline must be 0 to 1024 bytes");
}

nlohmann::json to_json(const options& o) {
  return {{"device", o.device},
          {"gid_index", o.gid_index},
          {"mtu_bytes", o.mtu},
          {"qps", o.qps},
          {"rdma_cm", o.rdma_cm},
          {"inline_bytes", o.inline_bytes},
          {"signal_every", o.signal_every}};
}

options options_from(const nlohmann::json& own) {
  options o;
  const auto whole = [&](const char* key, unsigned& out, unsigned max) {
    if (const auto v = own.find(key); v != own.end())
      out = static_cast<unsigned>(whole_number(*v, key, max));
  };
  whole("mtu_bytes", o.mtu, 4096);
  whole("qps", o.qps, 16);
  whole("inline_bytes", o.inline_bytes, 1024);
  whole("signal_every", o.signal_every, 1024);
  if (const auto v = own.find("gid_index"); v != own.end()) {
    if (!v->is_number_integer() || v->get<std::int64_t>() < -1 || v->get<std::int64_t>() > 255)
      throw usage_error(fmt::format("gid_index must be -1 (automatic) to 255, not {}", v->dump()));
    o.gid_index = static_cast<int>(v->get<std::int64_t>());
  }
  try {
    o.device = own.value("device", o.device);
    o.rdma_cm = own.value("rdma_cm", o.rdma_cm);
  } catch (const nlohmann::json::exception& e) {
    throw usage_error(fmt::format("verbs options: {}", e.what()));
  }
  if (o.device.size() > 256) throw usage_error("verbs device name is longer than 256 characters");
  check(o);
  return o;
}

transport_cli add_run_options(CLI::App& run) {
  auto o = std::make_shared<options>();
  std::vector<CLI::Option*> added{
      run.add_option("--ib-dev", o->device,
                     "verbs: RDMA device NAME[:PORT] (default: the one --iface maps to, else the "
                     "first active port)"),
      run.add_option("--gid-index", o->gid_index,
                     "verbs: GID index (default: RoCE v2 IPv4-mapped, chosen and shown)"),
      run.add_option("--mtu", o->mtu, "verbs: lower the path MTU to this many bytes (256..4096)"),
      run.add_option("--qps", o->qps, "verbs: data queue pairs")->capture_default_str(),
      run.add_flag("--rdma-cm", o->rdma_cm, "verbs: connect through librdmacm"),
      run.add_option("--inline", o->inline_bytes, "verbs: post messages up to this size inline")
          ->capture_default_str(),
      run.add_option("--signal-every", o->signal_every,
                     "verbs: in stream tests, ask for a completion every N posts")
          ->capture_default_str()};
  transport_cli cli;
  cli.options = [o] {
    check(*o);
    return to_json(*o);
  };
  cli.given = [added] {
    std::vector<std::string> out;
    for (const CLI::Option* opt : added) {
      if (opt->count() > 0) out.push_back(opt->get_name());
    }
    return out;
  };
  return cli;
}

}  // namespace pairperf::verbs
