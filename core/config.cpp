#include "core/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace pairperf {
namespace {

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }
// A peer's message is untrusted: every number is checked before it is converted, so a float
// where a count belongs, a negative count or 1e300 seconds is refused with its field's name
// (nlohmann's get<> would wrap, truncate or cast out of range).
constexpr double max_seconds = 7 * 24 * 3600.0;

template <class T>
void get_whole(const nlohmann::json& j, const char* field, T& out,
               std::uint64_t max = std::numeric_limits<T>::max()) {
  out = static_cast<T>(whole_number(j.at(field), field, max));
}

std::chrono::nanoseconds from_seconds(const nlohmann::json& v, const char* field) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
      v.get<double>() > max_seconds)
    throw usage_error(fmt::format("{} must be a number of seconds in [0, {}], not {}", field,
                                  max_seconds, v.dump()));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(v.get<double>() * 1e9));
}

}  // namespace

std::uint64_t whole_number(const nlohmann::json& v, const char* field, std::uint64_t max) {
  const bool whole =
      v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
  if (!whole)
    throw usage_error(fmt::format("{} must be a whole number >= 0, not {}", field, v.dump()));
  const auto x = v.get<std::uint64_t>();
  if (x > max) throw usage_error(fmt::format("{} = {} is above its limit {}", field, x, max));
  return x;
}

const char* to_string(pattern_kind p) noexcept {
  switch (p) {
    case pattern_kind::pingpong:
      return "pingpong";
    case pattern_kind::stream_uni:
      return "stream_uni";
    case pattern_kind::stream_bi:
      return "stream_bi";
  }
  return "?";
}

const char* to_string(memory_type m) noexcept {
  switch (m) {
    case memory_type::host:
      return "host";
    case memory_type::cuda:
      return "cuda";
  }
  return "?";
}

const char* to_string(progress_mode p) noexcept {
  switch (p) {
    case progress_mode::busy:
      return "busy";
    case progress_mode::block:
      return "block";
  }
  return "?";
}

pattern_kind parse_pattern(const std::string& text) {
  for (auto p : {pattern_kind::pingpong, pattern_kind::stream_uni, pattern_kind::stream_bi}) {
    if (text == to_string(p)) return p;
  }
  throw usage_error(fmt::format("unknown pattern '{}' (pingpong, stream_uni, stream_bi)", text));
}

memory_type parse_memory_type(const std::string& text) {
  for (auto m : {memory_type::host, memory_type::cuda}) {
    if (text == to_string(m)) return m;
  }
  throw usage_error(fmt::format("unknown memory type '{}' (host, cuda)", text));
}

progress_mode parse_progress(const std::string& text) {
  for (auto p : {progress_mode::busy, progress_mode::block}) {
    if (text == to_string(p)) return p;
  }
  if (text == "event") return progress_mode::block;  // verbs' name: completion events
  throw usage_error(fmt::format("unknown progress mode '{}' (busy, block or event)", text));
}

void to_json(nlohmann::json& j, const run_config& c) {
  j = nlohmann::json{
      {"iterations", c.iterations ? nlohmann::json(*c.iterations) : nlohmann::json(nullptr)},
      {"duration_s", seconds(c.duration)},
      {"min_iterations", c.min_iterations},
      {"max_iterations", c.max_iterations},
      {"warmup_iterations", c.warmup ? nlohmann::json(*c.warmup) : nlohmann::json(nullptr)},
      {"window", c.window},
      {"repeat", c.repeat},
      {"validate", c.validate},
      {"noise_threshold_share", c.noise_threshold},
      {"progress", to_string(c.transport.progress)},
      {"streams", c.transport.streams},
      {"send_buffer_bytes", c.transport.send_buffer_bytes},
      {"recv_buffer_bytes", c.transport.recv_buffer_bytes},
      {"transports", c.transport.own},
      {"timeouts_s",
       {{"connect", seconds(c.timeouts.connect)},
        {"handshake", seconds(c.timeouts.handshake)},
        {"case", seconds(c.timeouts.per_case)},
        {"idle", seconds(c.timeouts.idle)}}},
  };
}

void from_json(const nlohmann::json& j, run_config& c) {
  c = run_config{};
  if (!j.at("iterations").is_null())
    c.iterations = whole_number(j.at("iterations"), "iterations", max_iterations_limit);
  c.duration = from_seconds(j.at("duration_s"), "duration_s");
  get_whole(j, "min_iterations", c.min_iterations, max_iterations_limit);
  get_whole(j, "max_iterations", c.max_iterations, max_iterations_limit);
  if (!j.at("warmup_iterations").is_null())
    c.warmup = whole_number(j.at("warmup_iterations"), "warmup_iterations", max_iterations_limit);
  get_whole(j, "window", c.window, max_window_limit);
  c.repeat = j.contains("repeat")
                 ? static_cast<unsigned>(whole_number(j.at("repeat"), "repeat", 1000))
                 : 1U;
  j.at("validate").get_to(c.validate);
  c.noise_threshold = j.value("noise_threshold_share", c.noise_threshold);
  c.transport.progress = parse_progress(j.at("progress").get<std::string>());
  get_whole(j, "streams", c.transport.streams, 64);
  get_whole(j, "send_buffer_bytes", c.transport.send_buffer_bytes, std::uint64_t{1} << 31);
  get_whole(j, "recv_buffer_bytes", c.transport.recv_buffer_bytes, std::uint64_t{1} << 31);
  if (const auto own = j.find("transports"); own != j.end()) {
    const bool objects =
        own->is_object() &&
        std::all_of(own->begin(), own->end(), [](const auto& v) { return v.is_object(); });
    if (!objects)
      throw usage_error("transports must be an object holding one object per transport");
    c.transport.own = *own;
  }
  const auto& t = j.at("timeouts_s");
  c.timeouts.connect = from_seconds(t.at("connect"), "timeouts_s.connect");
  c.timeouts.handshake = from_seconds(t.at("handshake"), "timeouts_s.handshake");
  c.timeouts.per_case = from_seconds(t.at("case"), "timeouts_s.case");
  c.timeouts.idle = from_seconds(t.at("idle"), "timeouts_s.idle");
  if (c.window == 0 || c.transport.streams == 0)
    throw usage_error("window and streams must be at least 1");
}

const nlohmann::json& own_options(const transport_options& options, const std::string& transport) {
  static const nlohmann::json none = nlohmann::json::object();
  if (!options.own.is_object()) return none;
  const auto it = options.own.find(transport);
  return it != options.own.end() && it->is_object() ? *it : none;
}

void to_json(nlohmann::json& j, const test_case& c) {
  j = nlohmann::json{{"index", c.index},
                     {"transport", c.transport},
                     {"test", c.test},
                     {"pattern", to_string(c.pattern)},
                     {"tls", c.tls},
                     {"iface", c.iface},
                     {"memory", {to_string(c.client_memory), to_string(c.server_memory)}},
                     {"size_bytes", c.size_bytes}};
  if (!c.target.empty()) j["target"] = c.target;
}

void from_json(const nlohmann::json& j, test_case& c) {
  j.at("transport").get_to(c.transport);
  j.at("test").get_to(c.test);
  c.pattern = parse_pattern(j.at("pattern").get<std::string>());
  c.tls = j.value("tls", "");
  j.at("iface").get_to(c.iface);
  c.target = j.value("target", "");
  const auto& mem = j.at("memory");
  if (!mem.is_array() || mem.size() != 2) throw usage_error("case memory must be [client, server]");
  c.client_memory = parse_memory_type(mem[0].get<std::string>());
  c.server_memory = parse_memory_type(mem[1].get<std::string>());
  get_whole(j, "index", c.index, std::uint64_t{1} << 32);
  c.size_bytes = whole_number(j.at("size_bytes"), "size_bytes", max_size_bytes);
  if (c.size_bytes == 0) throw usage_error("size_bytes must be at least 1");
}

std::uint64_t warmup_iterations(const run_config& config, const test_case& c) {
  if (config.warmup) return *config.warmup;
  constexpr std::uint64_t byte_cap = std::uint64_t{256} << 20;
  const std::uint64_t wanted = std::max<std::uint64_t>(16, 2ULL * config.window);
  const std::uint64_t by_bytes =
      std::max<std::uint64_t>(1, byte_cap / std::max<std::uint64_t>(1, c.size_bytes));
  return std::min(wanted, by_bytes);
}

}  // namespace pairperf
