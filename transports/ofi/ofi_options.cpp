#include "transports/ofi/ofi_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <set>

#include "core/errors.h"
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

std::vector<offer> rdm_offers() {
  info_ptr hints(fi_allocinfo());
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
    o.remote = (i->caps & FI_REMOTE_COMM) != 0 || (i->caps & FI_LOCAL_COMM) == 0;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const offer& x) {
      return x.provider == o.provider && x.fabric == o.fabric && x.domain == o.domain &&
             x.tagged == o.tagged && x.rma == o.rma && x.hmem == o.hmem;
    });
    if (!seen) out.push_back(std::move(o));
  }
  return out;
}

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
  const std::uint32_t v = fi_version();
  nlohmann::json providers = nlohmann::json::array();
  for (const auto& o : rdm_offers()) {
    providers.push_back({{"provider", o.provider},
                         {"fabric", o.fabric},
                         {"domain", o.domain},
                         {"addr_format", o.addr_format},
                         {"tagged", o.tagged},
                         {"rma", o.rma},
                         {"hmem", o.hmem},
                         {"remote", o.remote}});
  }
  return {{"library", "libfabric"},
          {"version", fmt::format("{}.{}", FI_MAJOR(v), FI_MINOR(v))},
          {"endpoint_type", "FI_EP_RDM"},
          {"providers", providers}};
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

transport_cli add_run_options(CLI::App& run) {
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
  cli.given = [option] {
    return option->count() > 0 ? std::vector<std::string>{option->get_name()}
                               : std::vector<std::string>{};
  };
  return cli;
}

}  // namespace pairperf::ofi
