#include "harness/case_session.h"

#include <algorithm>

#include <fmt/format.h>

#include "transports/registry.h"

namespace pairperf {
namespace {

// Validation needs a buffer per message in flight; keep that below this many bytes by shrinking
// the window.
constexpr std::uint64_t validate_memory_cap = std::uint64_t{512} << 20;

bool supports(const capabilities& caps, op_kind kind) {
  switch (kind) {
    case op_kind::send:
    case op_kind::recv: return caps.send_recv;
    case op_kind::put: return caps.put;
    case op_kind::get: return caps.get;
  }
  return false;
}

}  // namespace

case_session::case_session(const run_config& config, const transport_params& params) : m_config(config), m_params(params) {
  const test_case& c = params.test;
  const auto& registry = transport_registry::instance();
  const transport_entry* entry = registry.find(c.transport);
  if (entry == nullptr) {
    throw case_skipped(fmt::format("this pairperf has no transport '{}' (it has: {})", c.transport, fmt::join(registry.names(), ", ")));
  }
  const test_spec* spec = registry.find_test(c.transport, c.test);
  if (spec == nullptr) throw case_skipped(fmt::format("transport '{}' has no test '{}'", c.transport, c.test));

  const memory_type mine = params.side == side::client ? c.client_memory : c.server_memory;
  std::string why_not;
  allocator* alloc = find_allocator(mine, why_not);
  if (alloc == nullptr) throw case_skipped(fmt::format("{} memory: {}", to_string(mine), why_not));

  m_transport = entry->create(params);
  const capabilities caps = m_transport->caps();
  if (std::find(caps.memory.begin(), caps.memory.end(), mine) == caps.memory.end()) {
    throw case_skipped(fmt::format("transport '{}' cannot move {} memory", c.transport, to_string(mine)));
  }
  if (!supports(caps, spec->data_op)) throw case_skipped(fmt::format("transport '{}' lacks the operation test '{}' needs", c.transport, c.test));

  const std::size_t size = c.size_bytes;
  m_window = c.pattern == pattern_kind::pingpong ? 1U : std::min(config.window, max_window);
  std::size_t slots = 1;
  if (config.validate) {
    slots = static_cast<std::size_t>(std::clamp<std::uint64_t>(validate_memory_cap / size, 1, m_window));
    m_window = static_cast<unsigned>(slots);
  }
  const bool sends = c.pattern != pattern_kind::stream_uni || params.side == side::client;
  const bool recvs = c.pattern != pattern_kind::stream_uni || params.side == side::server;
  m_buffers.reserve(2 * slots + 2);
  for (std::size_t i = 0; sends && i < slots; ++i) m_send_slots.push_back(m_buffers.emplace_back(*alloc, size).data());
  for (std::size_t i = 0; recvs && i < slots; ++i) m_recv_slots.push_back(m_buffers.emplace_back(*alloc, size).data());
  // Acknowledgements are small and always in host memory, which every transport can move.
  std::string unused;
  allocator* host = find_allocator(memory_type::host, unused);
  m_sync_send = m_buffers.emplace_back(*host, sync_message_bytes).data();
  m_sync_recv = m_buffers.emplace_back(*host, sync_message_bytes).data();
  for (const auto& b : m_buffers) m_regions.push_back(m_transport->register_memory(b.data(), b.size()));
  if (config.validate) m_checker.emplace(*alloc, *alloc, size);
}

void case_session::connect(std::span<const std::byte> peer) {
  m_transport->connect(peer);
  m_connected = true;
}

pattern_outcome case_session::run(std::uint64_t iterations, const where& place) {
  m_samples.reset(static_cast<std::size_t>(iterations));
  pattern_run run;
  run.pattern = m_params.test.pattern;
  run.role = m_params.side;
  run.iterations = iterations;
  run.window = m_window;
  run.size = m_params.test.size_bytes;
  run.deadline = deadline_in(m_config.timeouts.per_case);
  const pattern_buffers buffers{m_send_slots, m_recv_slots, m_sync_send, m_sync_recv};
  return run_pattern(*m_transport, run, buffers, m_samples, m_checker ? &*m_checker : nullptr, place);
}

std::optional<validation> case_session::validated() const {
  if (!m_checker) return std::nullopt;
  return validation{m_checker->messages_checked(), m_checker->corrupt_bytes()};
}

}  // namespace pairperf
