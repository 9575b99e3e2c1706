#include "harness/case_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/hex.h"
#include "patterns/run.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

// Validation needs a buffer per message in flight; keep that below this many bytes by shrinking
// the window.
constexpr std::uint64_t validate_memory_cap = std::uint64_t{512} << 20;

bool supports(const capabilities& caps, op_kind kind) {
  switch (kind) {
    case op_kind::send:
    case op_kind::recv:
      return caps.send_recv;
    case op_kind::put:
      return caps.put;
    case op_kind::get:
      return caps.get;
  }
  return false;
}

// Which one-sided shapes the patterns implement.
bool pattern_has_variant(pattern_kind p, op_kind op) {
  switch (op) {
    case op_kind::send:
    case op_kind::recv:
      return true;
    case op_kind::put:
      return true;
    case op_kind::get:
      return p != pattern_kind::stream_bi;
  }
  return false;
}

}  // namespace

case_session::case_session(const run_config& config, const transport_params& params)
    : m_config(config), m_params(params) {
  const test_case& c = params.test;
  const auto& registry = transport_registry::instance();
  const transport_entry* entry = registry.find(c.transport);
  if (entry == nullptr) {
    throw case_skipped(fmt::format("this pairperf has no transport '{}' (it has: {})", c.transport,
                                   fmt::join(registry.names(), ", ")));
  }
  const test_spec* spec = registry.find_test(c.transport, c.test);
  if (spec == nullptr)
    throw case_skipped(fmt::format("transport '{}' has no test '{}'", c.transport, c.test));
  m_data_op = spec->data_op;
  if (!pattern_has_variant(c.pattern, m_data_op))
    throw case_skipped(fmt::format(
        "test '{}' pairs a pattern and an operation pairperf does not run together", c.test));

  const memory_type mine = params.side == side::client ? c.client_memory : c.server_memory;
  std::string why_not;
  allocator* alloc = find_allocator(mine, why_not);
  if (alloc == nullptr) throw case_skipped(fmt::format("{} memory: {}", to_string(mine), why_not));

  try {
    m_transport = entry->create(params);
  } catch (const transport_unsupported& e) {
    throw case_skipped(e.what());
  }
  const capabilities caps = m_transport->caps();
  m_receive_after_send = caps.keeps_early_arrivals;
  if (std::find(caps.memory.begin(), caps.memory.end(), mine) == caps.memory.end()) {
    throw case_skipped(
        fmt::format("transport '{}' cannot move {} memory", c.transport, to_string(mine)));
  }
  if (!supports(caps, m_data_op))
    throw case_skipped(
        fmt::format("transport '{}' lacks the operation test '{}' needs", c.transport, c.test));

  m_window = c.pattern == pattern_kind::pingpong ? 1U : std::min(config.window, max_window);
  std::size_t slots = 1;
  if (config.validate) {
    slots = static_cast<std::size_t>(std::clamp<std::uint64_t>(
        validate_memory_cap / std::max<std::uint64_t>(c.size_bytes, 1), 1, m_window));
    m_window = static_cast<unsigned>(slots);
  }
  allocate(*alloc, slots);
  if (config.validate) m_checker.emplace(*alloc, *alloc, c.size_bytes);
  // A get target cannot write per message: its slot j holds the pattern of message j throughout.
  if (config.validate && m_data_op == op_kind::get) {
    for (std::size_t j = 0; j < m_send_slots.size(); ++j) m_checker->fill(m_send_slots[j], j);
  }
}

void case_session::allocate(allocator& alloc, std::size_t slots) {
  const test_case& c = m_params.test;
  // Data flows client -> server, except for get, where the client pulls from the server.
  const bool client = m_params.side == side::client;
  const bool uni = c.pattern == pattern_kind::stream_uni;
  const bool source = !uni || (m_data_op == op_kind::get ? !client : client);
  const bool sink = !uni || (m_data_op == op_kind::get ? client : !client);
  m_buffers.reserve(2 * slots + 2);
  for (std::size_t i = 0; sink && i < slots; ++i)
    m_recv_slots.push_back(m_buffers.emplace_back(alloc, c.size_bytes).data());
  for (std::size_t i = 0; source && i < slots; ++i)
    m_send_slots.push_back(m_buffers.emplace_back(alloc, c.size_bytes).data());
  const memory_type type = alloc.type();
  for (auto* p : m_recv_slots)
    m_recv_regions.push_back(m_transport->register_memory(p, c.size_bytes, type));
  for (auto* p : m_send_slots)
    m_send_regions.push_back(m_transport->register_memory(p, c.size_bytes, type));
  // Acknowledgements are small and always in host memory, which every transport can move.
  std::string unused;
  allocator* host = find_allocator(memory_type::host, unused);
  m_sync_send = m_buffers.emplace_back(*host, sync_message_bytes).data();
  m_sync_recv = m_buffers.emplace_back(*host, sync_message_bytes).data();
  m_transport->register_memory(m_sync_send, sync_message_bytes, memory_type::host);
  m_transport->register_memory(m_sync_recv, sync_message_bytes, memory_type::host);
}

nlohmann::json case_session::regions() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto* list : {&m_recv_regions, &m_send_regions}) {
    for (const auto& r : *list) {
      out.push_back({{"address", reinterpret_cast<std::uintptr_t>(r.address)},
                     {"length_bytes", r.length},
                     {"key", to_hex(r.packed_key)}});
    }
  }
  return {
      {"recv_slots", m_recv_regions.size()}, {"send_slots", m_send_regions.size()}, {"list", out}};
}

peer_regions parse_peer_regions(const nlohmann::json& j) {
  const auto whole = [](const nlohmann::json& v, const char* field, std::uint64_t max) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
      throw std::invalid_argument(fmt::format("peer's regions: {} is not a whole number", field));
    const auto x = v.get<std::uint64_t>();
    if (x > max) throw std::invalid_argument(fmt::format("peer's regions: {} is too large", field));
    return x;
  };
  if (!j.is_object()) throw std::invalid_argument("peer's regions: not an object");
  peer_regions out;
  out.recv_slots = whole(j.at("recv_slots"), "recv_slots", max_window_limit);
  out.send_slots = whole(j.at("send_slots"), "send_slots", max_window_limit);
  const auto& list = j.at("list");
  if (!list.is_array() || list.size() != out.recv_slots + out.send_slots)
    throw std::invalid_argument("peer's region list does not match its slot counts");
  for (const auto& r : list) {
    const auto& key = r.at("key").get_ref<const std::string&>();
    if (key.size() > 2 * max_peer_address_bytes)
      throw std::invalid_argument("peer's regions: a key is larger than 64 KiB");
    out.list.push_back(
        {whole(r.at("address"), "address", std::numeric_limits<std::uint64_t>::max()),
         static_cast<std::size_t>(whole(r.at("length_bytes"), "length_bytes", max_size_bytes)),
         from_hex(key)});
  }
  return out;
}

void case_session::connect(std::span<const std::byte> peer, const nlohmann::json& peer_regions) {
  // Checked before the transport connects: a bad list fails the case, not a library call.
  auto regions = parse_peer_regions(peer_regions);
  m_transport->connect(peer);
  m_peer_recv_slots = regions.recv_slots;
  m_peer_send_slots = regions.send_slots;
  m_transport->set_remote_regions(regions.list);
}

pattern_run case_session::phase_run(std::uint64_t iterations) const {
  pattern_run run;
  run.pattern = m_params.test.pattern;
  run.data_op = m_data_op;
  run.role = m_params.side;
  run.iterations = iterations;
  run.window = m_window;
  run.size = m_params.test.size_bytes;
  run.deadline = deadline_in(m_config.timeouts.per_case);
  run.receive_after_send = m_receive_after_send;
  run.at_least = std::min(m_config.min_iterations, iterations);
  if (m_params.options.progress == progress_mode::block) run.idle_polls_per_check = 1;
  return run;
}

pattern_buffers case_session::buffers() const {
  return {m_send_slots, m_recv_slots,      m_sync_send,
          m_sync_recv,  m_peer_recv_slots, m_peer_send_slots};
}

pattern_outcome case_session::run(std::uint64_t iterations, const where& place, phase_mode mode,
                                  std::chrono::nanoseconds budget,
                                  std::function<bool()> stop_requested) {
  const bool measured = mode != phase_mode::unmeasured;
  if (mode == phase_mode::measure_more && m_measured_iterations == 0)
    throw std::logic_error("a phase continues a measurement that was not started");
  if (mode == phase_mode::measure_more) {
    m_samples.extend(static_cast<std::size_t>(iterations));
  } else {
    m_samples.reset(static_cast<std::size_t>(iterations));
    m_measured = {};
    m_measured_iterations = 0;
  }
  if (mode == phase_mode::measure) m_transport->probe_next_operation();
  pattern_run run = phase_run(iterations);
  run.budget_ns = budget.count();
  run.stop_requested = std::move(stop_requested);
  const bool one_sided = m_data_op == op_kind::put || m_data_op == op_kind::get;
  const std::size_t peer_slots = m_data_op == op_kind::get ? m_peer_send_slots : m_peer_recv_slots;
  if (one_sided && m_params.side == side::client && peer_slots == 0) {
    throw step_error(error_kind::protocol, place,
                     "the peer registered no buffers for one-sided operations");
  }
  // The measured phases are watched for host noise.
  if (measured) m_noise.begin();
  const pattern_outcome out =
      m_transport->run_phase(run, buffers(), m_samples, m_checker ? &*m_checker : nullptr, place);
  if (!measured) return out;
  m_noise.end();
  // Described now, as each measured phase ends: the client does it while the server does its
  // own, instead of after the server's results arrive.
  m_described = m_transport->describe();
  m_measured += out;
  // A timed phase ran what it had time for (ping-pong: as many messages each way).
  m_measured_iterations += budget.count() > 0 ? out.messages_sent : iterations;
  return m_measured;
}

void case_session::close_timed_phase(const where& place) {
  const pattern_run run = phase_run(1);
  if (m_params.side == side::client) {
    send_closing_message(*m_transport, run, buffers(), place);
  } else {
    receive_closing_message(*m_transport, run, place);
  }
}

std::optional<validation> case_session::validated() const {
  if (!m_checker) return std::nullopt;
  return validation{m_checker->messages_checked(), m_checker->corrupt_bytes()};
}

}  // namespace pairperf
