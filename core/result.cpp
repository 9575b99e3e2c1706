#include "core/result.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/errors.h"

namespace pairperf {
namespace {

template <class T>
void put_optional(nlohmann::json& j, const char* key, const std::optional<T>& value) {
  if (value) j[key] = *value;
}

template <class T>
void get_optional(const nlohmann::json& j, const char* key, std::optional<T>& out) {
  if (j.contains(key) && !j[key].is_null()) out = j[key].get<T>();
}

// A count read back from a results file (compare, report, a peer's results): checked before it
// is converted, as a peer's message is (config.h whole_number), since a float out of the count's
// range must never reach a cast. Absent: 0.
template <class T>
T count_of(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return 0;
  return static_cast<T>(whole_number(*it, key, std::numeric_limits<T>::max()));
}

}  // namespace

const char* to_string(case_status s) noexcept {
  switch (s) {
    case case_status::ok:
      return "ok";
    case case_status::skipped:
      return "skipped";
    case case_status::error:
      return "error";
    case case_status::unreachable:
      return "unreachable";
    case case_status::fail:
      return "fail";
  }
  return "?";
}

case_status parse_case_status(const std::string& text) {
  for (auto s : {case_status::ok, case_status::skipped, case_status::error,
                 case_status::unreachable, case_status::fail}) {
    if (text == to_string(s)) return s;
  }
  throw usage_error(fmt::format("unknown case status '{}'", text));
}

const char* to_string(lane_kind k) noexcept {
  switch (k) {
    case lane_kind::unknown:
      return "unknown";
    case lane_kind::shared_memory:
      return "shared_memory";
    case lane_kind::network:
      return "network";
    case lane_kind::rdma:
      return "rdma";
    case lane_kind::gpu_ipc:
      return "gpu_ipc";
    case lane_kind::staged_copy:
      return "staged_copy";
  }
  return "unknown";
}

lane_kind parse_lane_kind(std::string_view text) noexcept {
  for (auto k : {lane_kind::shared_memory, lane_kind::network, lane_kind::rdma, lane_kind::gpu_ipc,
                 lane_kind::staged_copy}) {
    if (text == to_string(k)) return k;
  }
  return lane_kind::unknown;
}

void to_json(nlohmann::json& j, const lane& l) {
  j = {{"transport", l.transport}, {"device", l.device}, {"kind", to_string(l.kind)}};
}
void from_json(const nlohmann::json& j, lane& l) {
  j.at("transport").get_to(l.transport);
  j.at("device").get_to(l.device);
  const auto kind = j.find("kind");
  l.kind = kind != j.end() && kind->is_string() ? parse_lane_kind(kind->get<std::string>())
                                                : lane_kind::unknown;
}

const std::vector<lane>& payload_lanes(const provenance& p) noexcept {
  return p.bulk.empty() ? p.lanes : p.bulk;
}

nlohmann::json path_evidence(const provenance& p) {
  return {{"bulk_lanes", p.bulk}, {"staged", p.staged}};
}

void add_peer_evidence(provenance& mine, const nlohmann::json& peer) {
  if (!peer.is_object()) return;
  if (mine.staged.empty()) {
    const auto staged = peer.find("staged");
    if (staged != peer.end() && staged->is_string()) mine.staged = staged->get<std::string>();
  }
  const auto bulk = peer.find("bulk_lanes");
  if (bulk == peer.end() || !bulk->is_array()) return;
  for (const auto& item : *bulk) {
    lane l;
    try {
      l = item.get<lane>();
    } catch (const nlohmann::json::exception&) {
      continue;  // the peer's evidence is advisory: a malformed lane is left out
    }
    const bool known = std::any_of(mine.bulk.begin(), mine.bulk.end(), [&](const lane& m) {
      return m.transport == l.transport && m.device == l.device;
    });
    if (l.kind == lane_kind::gpu_ipc && !known) mine.bulk.push_back(l);
  }
}

void to_json(nlohmann::json& j, const bandwidth& b) {
  const auto value = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  j = {{"receiver", value(b.receiver_Bps)}, {"sender", value(b.sender_Bps)}};
}
void from_json(const nlohmann::json& j, bandwidth& b) {
  get_optional(j, "receiver", b.receiver_Bps);
  get_optional(j, "sender", b.sender_Bps);
}

void to_json(nlohmann::json& j, const repetition& r) {
  j = {{"iterations", r.iterations}, {"elapsed_s", r.elapsed_s}};
  put_optional(j, "latency_s", r.latency_s);
  put_optional(j, "bandwidth_Bps", r.bandwidth_Bps);
  put_optional(j, "message_rate_per_s", r.message_rate_per_s);
}

void from_json(const nlohmann::json& j, repetition& r) {
  r = repetition{};
  r.iterations = count_of<std::uint64_t>(j, "iterations");
  r.elapsed_s = j.value("elapsed_s", 0.0);
  get_optional(j, "latency_s", r.latency_s);
  get_optional(j, "bandwidth_Bps", r.bandwidth_Bps);
  get_optional(j, "message_rate_per_s", r.message_rate_per_s);
}

void to_json(nlohmann::json& j, const case_result& r) {
  j = nlohmann::json{{"case", r.test}, {"status", to_string(r.status)}};
  if (!r.message.empty()) j["message"] = r.message;
  if (!r.error_code.empty()) j["error_code"] = r.error_code;
  if (!r.unjudged.is_null()) j["unjudged"] = r.unjudged;
  if (r.wall_s > 0) j["wall_s"] = r.wall_s;
  if (r.worker_case > 0) j["worker_case"] = r.worker_case;
  // Also on a case that failed after its data path came up: what carried it, and that it did.
  if (r.provenance) {
    j["provenance"] = {{"lanes", r.provenance->lanes},   {"bulk_lanes", r.provenance->bulk},
                       {"staged", r.provenance->staged}, {"protocol", r.provenance->protocol},
                       {"client", r.provenance->client}, {"server", r.provenance->server}};
  }
  if (r.status != case_status::ok && r.status != case_status::fail && r.iterations == 0) return;
  j["iterations"] = r.iterations;
  j["warmup_iterations"] = r.warmup_iterations;
  j["window"] = r.window;
  j["elapsed_s"] = r.elapsed_s;
  put_optional(j, "latency_s", r.latency_s);
  put_optional(j, "interval_s", r.interval_s);
  put_optional(j, "bandwidth_Bps", r.bandwidth_Bps);
  if (r.client_to_server_Bps && r.server_to_client_Bps) {
    j["bandwidth_by_direction_Bps"] = {{"client_to_server", *r.client_to_server_Bps},
                                       {"server_to_client", *r.server_to_client_Bps}};
  }
  put_optional(j, "message_rate_per_s", r.message_rate_per_s);
  if (r.validated) {
    j["validation"] = {{"messages_checked", r.validated->messages_checked},
                       {"corrupt_bytes", r.validated->corrupt_bytes}};
  }
  if (!r.repetitions.empty()) j["repetitions"] = r.repetitions;
  if (!r.gpu_path.empty()) j["gpu_path"] = {{"verdict", r.gpu_path}, {"why", r.gpu_path_why}};
  if (!r.verdict.is_null()) j["verdict"] = r.verdict;
  if (!r.host_noise.is_null()) j["host_noise"] = r.host_noise;
}

void from_json(const nlohmann::json& j, case_result& r) {
  r = case_result{};
  j.at("case").get_to(r.test);
  r.status = parse_case_status(j.at("status").get<std::string>());
  r.message = j.value("message", "");
  r.error_code = j.value("error_code", "");
  r.iterations = count_of<std::uint64_t>(j, "iterations");
  r.warmup_iterations = count_of<std::uint64_t>(j, "warmup_iterations");
  r.window = count_of<unsigned>(j, "window");
  r.elapsed_s = j.value("elapsed_s", 0.0);
  r.wall_s = j.value("wall_s", 0.0);
  r.worker_case = count_of<unsigned>(j, "worker_case");
  get_optional(j, "latency_s", r.latency_s);
  get_optional(j, "interval_s", r.interval_s);
  get_optional(j, "bandwidth_Bps", r.bandwidth_Bps);
  if (j.contains("bandwidth_by_direction_Bps")) {
    r.client_to_server_Bps =
        j["bandwidth_by_direction_Bps"].at("client_to_server").get<bandwidth>();
    r.server_to_client_Bps =
        j["bandwidth_by_direction_Bps"].at("server_to_client").get<bandwidth>();
  }
  get_optional(j, "message_rate_per_s", r.message_rate_per_s);
  if (j.contains("validation")) {
    const auto& v = j["validation"];
    r.validated = validation{whole_number(v.at("messages_checked"), "messages_checked",
                                          std::numeric_limits<std::uint64_t>::max()),
                             whole_number(v.at("corrupt_bytes"), "corrupt_bytes",
                                          std::numeric_limits<std::uint64_t>::max())};
  }
  if (j.contains("repetitions")) r.repetitions = j["repetitions"].get<std::vector<repetition>>();
  if (j.contains("gpu_path")) {
    r.gpu_path = j["gpu_path"].value("verdict", "");
    r.gpu_path_why = j["gpu_path"].value("why", "");
  }
  if (j.contains("verdict")) r.verdict = j["verdict"];
  if (j.contains("unjudged")) r.unjudged = j["unjudged"];
  if (j.contains("host_noise")) r.host_noise = j["host_noise"];
  if (j.contains("provenance")) {
    const auto& p = j["provenance"];
    r.provenance = provenance{
        p.at("lanes").get<std::vector<lane>>(),      p.value("protocol", ""),
        p.value("client", nlohmann::json::object()), p.value("server", nlohmann::json::object()),
        p.value("bulk_lanes", std::vector<lane>{}),  p.value("staged", "")};
  }
}

std::optional<double> preferred_Bps(const std::optional<bandwidth>& b) {
  if (!b) return std::nullopt;
  return b->receiver_Bps ? b->receiver_Bps : b->sender_Bps;
}

std::optional<double> headline_of(const std::optional<bandwidth>& b,
                                  const std::optional<sample_stats>& latency, headline which) {
  switch (which) {
    case headline::bandwidth:
      return preferred_Bps(b);
    case headline::latency_p50:
      return latency ? std::optional<double>(latency->p50) : std::nullopt;
    case headline::latency_p99:
      return latency ? std::optional<double>(latency->p99) : std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> headline_of(const case_result& r, headline which) {
  if (r.status != case_status::ok && r.status != case_status::fail) return std::nullopt;
  return headline_of(r.bandwidth_Bps, r.latency_s, which);
}

std::vector<double> repetition_values(const case_result& r, headline which) {
  std::vector<double> out;
  if (r.status != case_status::ok && r.status != case_status::fail) return out;
  if (r.repetitions.empty()) {
    if (auto v = headline_of(r, which)) out.push_back(*v);
    return out;
  }
  for (const auto& rep : r.repetitions) {
    if (auto v = headline_of(rep.bandwidth_Bps, rep.latency_s, which)) out.push_back(*v);
  }
  return out;
}

}  // namespace pairperf
