#include "transports/ucx/ucx_options.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <ucp/api/ucp.h>
#include <ucs/config/parser.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/errors.h"
#include "core/self_probe.h"
#include "core/units.h"
#include "transports/ucx/ucx_handles.h"
#include "transports/ucx/ucx_provenance.h"

namespace pairperf::ucx {
namespace {

// UCX_TLS aliases and what they stand for (UCX's ucp_tl_aliases).
const std::map<std::string, std::vector<std::string>, std::less<>>& aliases() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> table{
      {"mm", {"posix", "sysv", "xpmem"}},
      {"sm", {"posix", "sysv", "xpmem", "knem", "cma"}},
      {"shm", {"posix", "sysv", "xpmem", "knem", "cma"}},
      {"ib", {"rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5"}},
      {"rc", {"rc_verbs", "rc_mlx5"}},
      {"rc_v", {"rc_verbs"}},
      {"rc_x", {"rc_mlx5"}},
      {"ud", {"ud_verbs", "ud_mlx5"}},
      {"ud_v", {"ud_verbs"}},
      {"ud_x", {"ud_mlx5"}},
      {"dc", {"dc_mlx5"}},
      {"dc_x", {"dc_mlx5"}},
      {"ugni", {"ugni_smsg", "ugni_udt", "ugni_rdma"}},
      {"cuda", {"cuda_copy", "cuda_ipc", "gdr_copy"}},
      {"rocm", {"rocm_copy", "rocm_ipc", "rocm_gdr"}},
  };
  return table;
}

bool is_process_wide_section(const std::string& header) {
  return header.rfind("UCS global", 0) == 0 || header.rfind("UCM", 0) == 0;
}

}  // namespace

option_catalog parse_option_catalog(std::string_view text) {
  option_catalog out;
  std::istringstream in{std::string(text)};
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.rfind("# ", 0) == 0) {
      section = line.substr(2);
      continue;
    }
    if (line.rfind("UCX_", 0) != 0) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string name = line.substr(4, eq - 4);
    // UCX applies the memory-type cache process-wide though it sits among the context's options.
    (is_process_wide_section(section) || name == "MEMTYPE_CACHE" ? out.process_wide
                                                                 : out.per_context)
        .insert(std::move(name));
  }
  return out;
}

std::set<std::string> parse_context_resources(std::string_view text) {
  std::set<std::string> out;
  for (const auto& r : context_resources(text)) out.insert(r.transport);
  return out;
}

std::string cuda_tls_problem(std::string_view tls) {
  if (tls.empty() || tls.front() == '^') {
    if (tls.find("cuda_copy") != std::string_view::npos)
      return fmt::format("UCX_TLS={} excludes cuda_copy: UCX cannot move GPU memory without it",
                         tls);
    return {};
  }
  for (const auto& t : split_list(std::string(tls))) {
    if (t == "cuda_copy" || t == "cuda" || t == "all") return {};
  }
  return fmt::format(
      "UCX_TLS={} has no cuda_copy: UCX cannot move GPU memory without it (add cuda_copy, and "
      "cuda_ipc for the fast path between GPUs of one host)",
      tls);
}

bool uses_protocols_v2(unsigned major, unsigned minor, const std::vector<std::string>& options,
                       const char* environment) {
  std::string value = environment != nullptr ? environment : "";
  for (const auto& o : options) {
    if (const auto [key, v] = split_option(o); key == "PROTO_ENABLE") value = v;
  }
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (value == "y" || value == "yes" || value == "on" || value == "1") return true;
  if (value == "n" || value == "no" || value == "off" || value == "0") return false;
  return major > 1 || (major == 1 && minor >= 16);  // UCX 1.16 made them the default
}

std::string cuda_rma_problem(unsigned major, unsigned minor, bool protocols_v2) {
  if (protocols_v2) return {};
  return fmt::format(
      "put/get with cuda memory: UCX {}.{} runs its v1 protocols here, whose RMA takes the "
      "initiator's buffer for host memory (a fallback without cuda_ipc would read GPU memory "
      "with the CPU); use UCX >= 1.16, or --ucx PROTO_ENABLE=y",
      major, minor);
}

std::vector<std::string> missing_transports(std::string_view tls,
                                            const std::set<std::string>& available) {
  std::vector<std::string> missing;
  if (tls.empty() || tls.front() == '^') return missing;
  std::size_t start = 0;
  while (start <= tls.size()) {
    const std::size_t comma = std::min(tls.find(',', start), tls.size());
    std::string name(tls.substr(start, comma - start));
    start = comma + 1;
    if (const auto colon = name.find(':'); colon != std::string::npos)
      name.resize(colon);  // "rc:aux"
    if (name.empty() || name == "all" || available.count(name) > 0) continue;
    const auto alias = aliases().find(name);
    const bool any = alias != aliases().end() &&
                     std::any_of(alias->second.begin(), alias->second.end(),
                                 [&](const std::string& m) { return available.count(m) > 0; });
    if (!any) missing.push_back(name);
  }
  return missing;
}

namespace {

// A context over every transport and device, for the questions above: its resources (as
// ucp_context_print_info lists them) and every option table (as `ucx_info -c` lists them, the
// components being loaded then). Made in a child process (core/self_probe.h): on a GPU host
// ucp_init initializes CUDA (cuda_copy's memory domain), and a process forked after that (a
// case's worker, a server's session) cannot use the GPU: "initialization error".
constexpr const char* probe_variable = "PAIRPERF_UCX_PROBE_CHILD";
constexpr auto probe_limit = std::chrono::seconds(60);

[[gnu::constructor]] void probe_child() {
  if (!is_self_probe_child(probe_variable)) return;
  nlohmann::json out;
  try {
    config_ptr config = read_config();
    check(lib().ucp_config_modify(config.get(), "TLS", "all"), "ucp_config_modify TLS");
    check(lib().ucp_config_modify(config.get(), "NET_DEVICES", "all"),
          "ucp_config_modify NET_DEVICES");
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AM;
    ucp_context_h raw = nullptr;
    check(lib().init(&params, config.get(), &raw), "ucp_init (probe)");
    const context_ptr context(raw);
    out["resources"] = capture([&](FILE* f) { lib().ucp_context_print_info(context.get(), f); });
    const auto flags = static_cast<ucs_config_print_flags_t>(
        UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_HEADER | UCS_CONFIG_PRINT_HIDDEN);
    out["options"] = capture([&](FILE* f) { lib().print_all_opts(f, "UCX_", flags); });
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  answer_self_probe(out.dump());
}

struct probe {
  option_catalog options;
  std::set<std::string> transports;

  probe() {
    const self_probe_answer a =
        ask_self_probe({probe_variable, "pairperf-ucx-probe", "UCX's probe"}, probe_limit);
    if (!a.error.empty()) throw std::runtime_error(a.error);
    const auto j = nlohmann::json::parse(a.text, nullptr, false);
    if (!j.is_object()) throw std::runtime_error("UCX's probe printed no answer");
    if (j.contains("error") && j.at("error").is_string())
      throw std::runtime_error(j.at("error").get<std::string>());
    if (!j.contains("resources") || !j.at("resources").is_string() || !j.contains("options") ||
        !j.at("options").is_string())
      throw std::runtime_error("UCX's probe printed no resources or options");
    transports = parse_context_resources(j.at("resources").get<std::string>());
    options = parse_option_catalog(j.at("options").get<std::string>());
  }
};

const probe& the_probe() {
  static const probe p;
  return p;
}

}  // namespace

const option_catalog& catalog() { return the_probe().options; }
const std::set<std::string>& available_transports() { return the_probe().transports; }

std::pair<std::string, std::string> split_option(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw usage_error(fmt::format("--ucx '{}': expected KEY=VALUE", text));
  std::string key(text.substr(0, eq));
  if (key.rfind("UCX_", 0) == 0) key.erase(0, 4);
  return {key, std::string(text.substr(eq + 1))};
}

std::vector<std::string> similar_options(const std::string& name,
                                         const std::set<std::string>& known) {
  // Edit distance, one row at a time; names are short (< 40 characters).
  const auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t above = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
        diagonal = above;
      }
    }
    return row[b.size()];
  };
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 4);
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& k : known) {
    if (const std::size_t d = distance(name, k); d <= limit) scored.emplace_back(d, k);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (const auto& [d, k] : scored) {
    if (out.size() == 5) break;
    out.push_back(k);
  }
  return out;
}

void check_options(const std::vector<std::string>& options) {
  if (options.empty()) return;  // nothing to check: no need for this UCX's catalog
  const option_catalog& known = catalog();
  for (const auto& text : options) {
    const auto [key, value] = split_option(text);
    if (known.process_wide.count(key) > 0) {
      throw usage_error(
          fmt::format("--ucx {}: UCX applies {} to the whole process, not per case; set UCX_{} in "
                      "the environment of "
                      "both client and server instead (it is recorded in the results' context)",
                      text, key, key));
    }
    if (key == "TLS" || key == "NET_DEVICES") {
      throw usage_error(fmt::format(
          "--ucx {}: use --tls and --iface for {}: they are axes of the sweep", text, key));
    }
    if (known.per_context.count(key) == 0) {
      const auto near = similar_options(key, known.per_context);
      std::string hint =
          near.empty() ? std::string() : fmt::format(" Did you mean {}?", fmt::join(near, ", "));
      if (key.rfind("CUDA_", 0) == 0 || key.rfind("GDR_COPY_", 0) == 0)
        hint +=
            " Options of UCX's CUDA transports exist only where its CUDA module loads (see "
            "`pairperf info`).";
      throw usage_error(fmt::format(
          "--ucx {}: UCX has no option '{}'.{} `ucx_info -c` lists this UCX's {} per-context "
          "options.",
          text, key, hint, known.per_context.size()));
    }
  }
}

std::vector<std::string> options_from(const nlohmann::json& own) {
  const auto list = own.find("options");
  if (list == own.end()) return {};
  const bool shaped = list->is_array() && list->size() <= 64 &&
                      std::all_of(list->begin(), list->end(), [](const nlohmann::json& v) {
                        return v.is_string() && v.get_ref<const std::string&>().size() <= 256;
                      });
  if (!shaped)
    throw usage_error(
        "ucx options must be a list of at most 64 KEY=VALUE strings of 256 characters");
  std::vector<std::string> out = list->get<std::vector<std::string>>();
  for (const auto& text : out) (void)split_option(text);
  return out;
}

std::vector<std::string> default_tls(const std::vector<std::string>& given, bool local_run,
                                     const char* environment) {
  if (!given.empty()) return given;
  if (environment != nullptr && *environment != '\0') return {environment};
  if (local_run) return {"tcp", "posix,sysv,cma", ""};
  return {""};
}

transport_cli add_run_options(CLI::App& run) {
  struct values {
    std::vector<std::string> tls, options;
  };
  auto v = std::make_shared<values>();
  CLI::Option* tls = run.add_option(
      "--tls", v->tls,
      "UCX transport set, one case each (repeatable: --tls tcp --tls posix,sysv,cma --tls all); "
      "default: UCX_TLS, or locally tcp, posix,sysv,cma and UCX's default");
  CLI::Option* options = run.add_option(
      "--ucx", v->options,
      "Other UCX option KEY=VALUE for every UCX case (repeatable; names are checked)");
  transport_cli cli;
  cli.options = [v] {
    check_options(v->options);
    return nlohmann::json{{"options", v->options}};
  };
  cli.axis = [v](bool local_run) { return default_tls(v->tls, local_run, std::getenv("UCX_TLS")); };
  cli.given = [tls, options] {
    std::vector<std::string> out;
    for (const CLI::Option* o : {tls, options}) {
      if (o->count() > 0) out.push_back(o->get_name());
    }
    return out;
  };
  return cli;
}

}  // namespace pairperf::ucx
