#include "transports/ofi/ofi_options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>

#include "core/errors.h"
#include "core/self_probe.h"
#include "core/socket.h"
#include "transports/ofi/ofi_handles.h"

namespace pairperf::ofi {
namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(sep, start), text.size());
    std::string part(text.substr(start, end - start));
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) out.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

void check_provider(std::string_view text) {
  if (text.size() > 64)
    throw usage_error(
        fmt::format("libfabric provider '{}...' is longer than 64 characters", text.substr(0, 16)));
  if (text.empty()) return;
  for (const auto& part : split(text, ';')) {
    if (!std::all_of(part.begin(), part.end(),
                     [](unsigned char c) { return std::isalnum(c) != 0 || c == '_' || c == '-'; }))
      throw usage_error(fmt::format(
          "libfabric provider '{}': a provider name has letters, digits, '_' and '-' only "
          "(layered: 'tcp;ofi_rxm')",
          text));
  }
  if (text.front() == ';' || text.back() == ';' || text.find(";;") != std::string_view::npos)
    throw usage_error(fmt::format("libfabric provider '{}' has an empty name", text));
}

namespace {

std::vector<offer> query_offers() {
  if (load() == nullptr) return {};
  info_ptr hints = alloc_info();
  if (!hints) return {};
  hints->ep_attr->type = FI_EP_RDM;
  // Every mode and MR mode (as fi_info asks): list what exists, not only what pairperf accepts.
  hints->mode = ~std::uint64_t{0};
  hints->domain_attr->mode = ~std::uint64_t{0};
  hints->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);
  int rc = 0;
  const info_ptr list = get_info(hints.get(), nullptr, 0, rc);
  std::vector<offer> out;
  for (const fi_info* i = list.get(); i != nullptr; i = i->next) {
    offer o;
    o.provider = i->fabric_attr->prov_name != nullptr ? i->fabric_attr->prov_name : "";
    o.fabric = i->fabric_attr->name != nullptr ? i->fabric_attr->name : "";
    o.domain = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
    o.addr_format = text_of(&i->addr_format, FI_TYPE_ADDR_FORMAT);
    o.tagged = (i->caps & FI_TAGGED) != 0;
    o.rma = (i->caps & FI_RMA) != 0;
    o.hmem = (i->caps & FI_HMEM) != 0;
    // Within one host only where it says so, or where it is shared memory (shm says neither).
    o.remote = ((i->caps & FI_REMOTE_COMM) != 0 || (i->caps & FI_LOCAL_COMM) == 0) &&
               kind_of_provider(o.provider) != lane_kind::shared_memory;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const offer& x) {
      return x.provider == o.provider && x.fabric == o.fabric && x.domain == o.domain &&
             x.tagged == o.tagged && x.rma == o.rma && x.hmem == o.hmem;
    });
    if (!seen) out.push_back(std::move(o));
  }
  return out;
}

nlohmann::json offers_json(const std::vector<offer>& offers) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& o : offers) {
    out.push_back({{"provider", o.provider},
                   {"fabric", o.fabric},
                   {"domain", o.domain},
                   {"addr_format", o.addr_format},
                   {"tagged", o.tagged},
                   {"rma", o.rma},
                   {"hmem", o.hmem},
                   {"remote", o.remote}});
  }
  return out;
}

std::vector<offer> offers_of(const nlohmann::json& j) {
  std::vector<offer> out;
  for (const auto& o : j) {
    out.push_back(offer{o.at("provider").get<std::string>(), o.at("fabric").get<std::string>(),
                        o.at("domain").get<std::string>(), o.at("addr_format").get<std::string>(),
                        o.at("tagged").get<bool>(), o.at("rma").get<bool>(),
                        o.at("hmem").get<bool>(), o.at("remote").get<bool>()});
  }
  return out;
}

// Loading libfabric and its first call change the rest of a process (ofi_handles.h: a SIGABRT
// handler from a provider's library; raw verbs failing with EACCES afterwards on Soft-RoCE), and
// cost 0.1-0.5 s. So what this host offers is asked in a child process (this binary again,
// spawned: safe in a threaded process), and libfabric is loaded into pairperf's own process only
// where an OFI case runs.
constexpr const char* discovery_variable = "PAIRPERF_OFI_DISCOVERY_CHILD";
constexpr auto discovery_limit = std::chrono::seconds(30);

// In the spawned child, before main: print the offers as JSON on stdout and exit.
[[gnu::constructor]] void discovery_child() {
  if (!is_self_probe_child(discovery_variable)) return;
  std::string why;
  nlohmann::json out{{"offers", offers_json(query_offers())}};
  if (const library* l = load(&why); l != nullptr) {
    const std::uint32_t v = l->version();
    out["version"] = fmt::format("{}.{}", FI_MAJOR(v), FI_MINOR(v));
  } else {
    out["error"] = why;
  }
  answer_self_probe(out.dump());
}

struct discovery {
  std::vector<offer> offers;
  std::string version;  // libfabric's, "major.minor"
  std::string error;    // why the offers are unknown ("" = they are known)
};

discovery discover() {
  // Every provider the library has, whatever FI_PROVIDER filters: doctor judges FI_PROVIDER
  // against this list, and the axis follows FI_PROVIDER itself.
  const self_probe_answer a =
      ask_self_probe({discovery_variable, "pairperf-ofi-discovery", "libfabric's discovery"},
                     discovery_limit, {"FI_PROVIDER="});
  if (!a.error.empty()) return {{}, "", a.error};
  const auto j = nlohmann::json::parse(a.text, nullptr, false);
  try {
    if (j.is_object() && j.contains("error")) return {{}, "", j.at("error").get<std::string>()};
    if (j.is_object()) return {offers_of(j.at("offers")), j.at("version").get<std::string>(), ""};
  } catch (const nlohmann::json::exception&) {
  }
  return {{}, "", "libfabric's discovery printed no list"};
}

const discovery& discovered() {
  static std::once_flag once;
  static discovery d;
  std::call_once(once, [] { d = discover(); });
  return d;
}

}  // namespace

const std::vector<offer>& rdm_offers() { return discovered().offers; }

std::vector<std::string> provider_names(const std::vector<offer>& offers, bool remote_only) {
  std::vector<std::string> out;
  for (const auto& o : offers) {
    if (!o.tagged || (remote_only && !o.remote) || has(out, o.provider)) continue;
    out.push_back(o.provider);
  }
  return out;
}

std::vector<std::string> default_providers(const std::vector<std::string>& given, bool local_run,
                                           const char* environment,
                                           const std::vector<offer>& offered) {
  if (!given.empty()) return given;
  if (environment != nullptr && *environment != '\0') {
    const std::string value = environment;
    if (value.front() == '^') return {""};
    return split(value, ',');
  }
  const auto names = provider_names(offered, !local_run);
  if (local_run) {
    std::vector<std::string> out;
    for (const char* p : {"tcp;ofi_rxm", "shm"}) {
      if (has(names, p)) out.emplace_back(p);
    }
    if (out.empty() && !names.empty()) out.push_back(names.front());
    return out.empty() ? std::vector<std::string>{""} : out;
  }
  return names.empty() ? std::vector<std::string>{""} : names;
}

std::pair<std::vector<std::string>, std::vector<std::string>> judge_provider_variable(
    std::string_view value, const nlohmann::json& library) {
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  const auto providers = library.is_object() ? library.find("providers") : library.end();
  if (!library.is_object() || providers == library.end() || !providers->is_array()) return out;
  std::set<std::string> names;  // every provider name, layered ones split into their parts
  for (const auto& p : *providers) {
    if (!p.is_object() || !p.contains("provider") || !p.at("provider").is_string()) continue;
    const std::string whole = p.at("provider").get<std::string>();
    if (!has(out.second, whole)) out.second.push_back(whole);
    for (auto& part : split(whole, ';')) names.insert(std::move(part));
  }
  if (out.second.empty()) return out;
  const std::string text(value);
  if (!text.empty() && text.front() == '^') return out;
  for (const auto& item : split(text, ',')) {
    const auto parts = split(item, ';');
    if (std::any_of(parts.begin(), parts.end(),
                    [&](const std::string& part) { return names.count(part) == 0; }))
      out.first.push_back(item);
  }
  return out;
}

nlohmann::json describe_library() {
  const discovery& d = discovered();
  nlohmann::json out{{"library", "libfabric"},
                     {"version", d.version},
                     {"endpoint_type", "FI_EP_RDM"},
                     {"providers", offers_json(d.offers)}};
  if (!d.error.empty()) out["discovery_error"] = d.error;
  return out;
}

std::string unavailable() {
  const discovery& d = discovered();
  if (!d.error.empty()) return d.error;
  return provider_names(d.offers, false).empty()
             ? "libfabric offers no provider with RDM endpoints on this host"
             : "";
}

lane_kind kind_of_provider(std::string_view provider) {
  const std::string_view core = provider.substr(0, provider.find(';'));
  if (core == "shm" || core == "sm2") return lane_kind::shared_memory;
  if (core == "tcp" || core == "udp" || core == "sockets" || core == "net")
    return lane_kind::network;
  if (core == "verbs" || core == "efa" || core == "psm2" || core == "psm3" || core == "opx" ||
      core == "cxi" || core == "usnic")
    return lane_kind::rdma;
  return lane_kind::unknown;
}

nlohmann::json to_json(const options& o) { return {{"inject", o.inject}}; }

options options_from(const nlohmann::json& own) {
  options o;
  if (const auto v = own.find("inject"); v != own.end()) {
    if (!v->is_string() || (*v != "auto" && *v != "tinject" && *v != "flag" && *v != "off"))
      throw usage_error(fmt::format("--ofi-inject must be auto, tinject, flag or off, not {}",
                                    v->dump().substr(0, 40)));
    o.inject = v->get<std::string>();
  }
  return o;
}

std::pair<inject_mode, std::string> use_inject(const options& o, std::string_view provider) {
  if (o.inject == "tinject") return {inject_mode::tinject, "--ofi-inject tinject"};
  if (o.inject == "flag") return {inject_mode::flag, "--ofi-inject flag"};
  if (o.inject == "off") return {inject_mode::off, "--ofi-inject off"};
  // What was seen with libfabric 1.17: rxd (over udp) accepts injected messages, with or without
  // a completion asked, and never delivers them (every case at or below its inject size timed
  // out on loopback; all passed without injection). verbs;ofi_rxm on rxe: a stream of
  // fi_tinject messages and the flush after it crashed the receiving process in libfabric at
  // its next case; FI_INJECT with completions passed every test. fi_tinject is what fi_pingpong
  // does, and is kept where it passed every test: shared memory and the socket providers.
  if (provider.find("ofi_rxd") != std::string_view::npos)
    return {inject_mode::off, "ofi_rxd loses injected messages (libfabric 1.17)"};
  const lane_kind kind = kind_of_provider(provider);
  if (kind == lane_kind::shared_memory || kind == lane_kind::network)
    return {inject_mode::tinject, ""};
  return {inject_mode::flag,
          "fi_tinject is kept to shm and the socket providers (it crashed verbs;ofi_rxm on rxe)"};
}

bool close_may_crash_in_flight(std::string_view provider, std::uint32_t version) {
  // What was seen with libfabric 1.17.0 (Debian 12): a case that failed while the link was down
  // left transfers on rxm's tcp connection, and closing the endpoint then crashed the process
  // (SIGSEGV) in 7 of 28 tries with a stream each way, 6 of 10 with one. fi_close(ep) runs
  // rxm_ep_close -> rxm_freeall_conns -> rxm_close_conn, which closes the tcp endpoint (whose flush
  // reports each queued transfer as FI_ECANCELED) and reads the errors back in rxm_flush_msg_cq;
  // one of them came with no context and no flags (what tcpx_free_xfer leaves of a transfer), and
  // rxm_handle_comp_error (prov/rxm/src/rxm_cq.c) reads the protocol state through that null
  // context.
  return provider == "tcp;ofi_rxm" && FI_VERSION_LT(version, FI_VERSION(1, 18));
}

std::string what_lacks(const std::function<bool(bool rma, bool hmem, bool ordered)>& offers,
                       bool rma, bool hmem) {
  if (offers(rma, hmem, true)) return {};
  if (!offers(false, false, true)) return "send-after-send ordering (FI_ORDER_SAS)";
  if (rma && !offers(true, false, true)) return "RMA (FI_RMA with remote read and write)";
  if (hmem && !offers(false, true, true)) return "device memory (FI_HMEM), which cuda buffers need";
  return "RMA and device memory (FI_RMA with FI_HMEM) together";
}

transport_cli add_run_options(CLI::App& run) {
  auto own = std::make_shared<options>();
  CLI::Option* inject =
      run.add_option("--ofi-inject", own->inject,
                     "ofi: how small host messages are sent: tinject, flag (FI_INJECT with a "
                     "completion), off, or auto (each provider the way it was seen to work)")
          ->check(CLI::IsMember({"auto", "tinject", "flag", "off"}))
          ->capture_default_str();
  auto providers = std::make_shared<std::vector<std::string>>();
  CLI::Option* option = run.add_option(
      "--ofi-provider", *providers,
      "libfabric provider, one case each (repeatable: --ofi-provider 'tcp;ofi_rxm' "
      "--ofi-provider shm); default: FI_PROVIDER, or locally tcp;ofi_rxm and shm, else every "
      "provider with RDM endpoints");
  transport_cli cli;
  cli.axis = [providers](bool local_run) {
    for (const auto& p : *providers) check_provider(p);
    return default_providers(*providers, local_run, std::getenv("FI_PROVIDER"), rdm_offers());
  };
  cli.options = [own] { return to_json(*own); };
  cli.given = [option, inject] {
    std::vector<std::string> out;
    for (const CLI::Option* o : {option, inject}) {
      if (o->count() > 0) out.push_back(o->get_name());
    }
    return out;
  };
  return cli;
}

}  // namespace pairperf::ofi
