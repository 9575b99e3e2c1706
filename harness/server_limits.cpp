#include "harness/server_limits.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>

#include "core/errors.h"
#include "core/interfaces.h"
#include "core/units.h"
#include "host/memory_room.h"

namespace pairperf {
namespace {

constexpr std::uint64_t sample_bytes = sizeof(std::int64_t);
// Matches case_session.cpp: validation keeps a buffer per message in flight, up to this many bytes.
constexpr std::uint64_t validate_memory_cap = std::uint64_t{512} << 20;

}  // namespace

std::uint64_t automatic_case_memory() {
  const std::optional<std::uint64_t> room = memory_room();
  return room ? *room / 4 : std::uint64_t{1} << 30;
}

run_config capped(run_config config, const server_limits& limits,
                  std::chrono::nanoseconds handshake) {
  auto& t = config.timeouts;
  t.connect = std::min(t.connect, limits.max_connect);
  t.per_case = std::min(t.per_case, limits.max_case);
  t.handshake = std::min(t.handshake, handshake);
  return config;
}

std::uint64_t case_memory(const run_config& config, const test_case& c, std::uint64_t iterations) {
  const std::uint64_t size = std::max<std::uint64_t>(c.size_bytes, 1);
  std::uint64_t slots = 1;
  if (config.validate) {
    const std::uint64_t window = c.pattern == pattern_kind::pingpong ? 1 : config.window;
    slots = std::clamp<std::uint64_t>(validate_memory_cap / size, 1,
                                      std::max<std::uint64_t>(window, 1));
  }
  // Each factor is bounded (size and iterations by config.h's limits), so this cannot overflow.
  return 2 * slots * size + iterations * sample_bytes;
}

std::optional<std::string> refuse_case(const run_config& config, const test_case& c,
                                       std::uint64_t iterations, const server_limits& limits) {
  if (c.size_bytes == 0) return "size_bytes must be at least 1";
  if (iterations > limits.max_iterations) {
    return fmt::format("{} iterations are more than this server allows (--max-iterations {})",
                       iterations, limits.max_iterations);
  }
  const std::uint64_t need = case_memory(config, c, iterations);
  if (need > limits.max_case_memory) {
    return fmt::format(
        "the case needs {} of memory on the server (buffers and samples), more than it allows "
        "(--max-case-memory {})",
        format_size(need), format_size(limits.max_case_memory));
  }
  return std::nullopt;
}

std::chrono::nanoseconds parse_phase_budget(const nlohmann::json& v) {
  if (!v.is_number() || !(v.get<double>() > 0) || !(v.get<double>() < 1e6))
    throw std::invalid_argument(fmt::format("bad time budget {}", v.dump()));
  return std::chrono::nanoseconds(static_cast<std::int64_t>(v.get<double>() * 1e9));
}

drive_allowlist::drive_allowlist(const std::string& list) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) throw usage_error(fmt::format("--allow-drive '{}': an empty entry", list));
    if (const auto slash = item.find('/'); slash != std::string::npos) {
      const std::string bits = item.substr(slash + 1);
      if (bits.empty() || bits.size() > 3 ||
          !std::all_of(bits.begin(), bits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) ||
          std::stoul(bits) > 128)
        throw usage_error(fmt::format("--allow-drive '{}': bad prefix length in '{}'", list, item));
    }
    m_entries.push_back(item);
  }
  if (m_entries.empty()) throw usage_error("--allow-drive needs at least one entry");
}

bool drive_allowlist::allows(const std::string& ip) const {
  for (const auto& e : m_entries) {
    if (e == "*") return true;
    if (const auto slash = e.find('/'); slash != std::string::npos) {
      const iface_address net{0, e.substr(0, slash),
                              static_cast<unsigned>(std::stoul(e.substr(slash + 1)))};
      if (in_subnet(net, ip)) return true;
      continue;
    }
    if (e == ip) return true;
    const auto named = name_addresses(e);  // a name (or an address in another spelling)
    if (std::find(named.begin(), named.end(), ip) != named.end()) return true;
  }
  return false;
}

std::string drive_allowlist::to_string() const {
  return fmt::format("{}", fmt::join(m_entries, ","));
}

hello_extras read_hello_extras(const nlohmann::json& h) {
  hello_extras x;
  if (const auto t = h.find("ticket"); t != h.end() && t->is_number_unsigned())
    x.ticket = t->get<std::uint64_t>();
  if (const auto b = h.find("budget_s"); b != h.end() && b->is_number())
    x.budget_s = std::clamp(b->get<double>(), 0.0, 86400.0);
  const auto want = h.find("want");
  if (want == h.end() || !want->is_array()) return x;
  for (const auto& w : *want) {
    if (!w.is_string() || w.get<std::string>() != "nccl") continue;
    const auto b = h.find("nccl_budget_s");
    const double seconds = b != h.end() && b->is_number() ? b->get<double>() : 3.0;
    x.nccl_budget = std::chrono::milliseconds(
        static_cast<std::int64_t>(std::clamp(seconds, 0.1, 30.0) * 1000.0));
  }
  return x;
}

}  // namespace pairperf
