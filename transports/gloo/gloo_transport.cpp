#include "transports/gloo/gloo_transport.h"

#include <fmt/format.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/interfaces.h"
#include "patterns/blocking.h"

namespace pairperf {
namespace {

constexpr const char* name = "gloo";
// Every operation's slot. gloo's own algorithms build theirs from a prefix in the top byte
// (gloo/common/utils.h Slot::build, prefixes 0x01..0x0f), so this one never meets theirs.
constexpr std::uint64_t op_slot = 0x7070'0000'0000'0001ULL;
// The bound of a wait outside a phase (poll() before any phase; gloo's collectives over
// collective_context()). gloo closes every pair when a wait times out, so this is only the
// backstop for a peer that stalls without closing: a phase's own deadline bounds its waits.
constexpr std::chrono::milliseconds wait_bound = std::chrono::minutes(10);
// gloo's message for a wait that ran out of time (unbound_buffer.cc: "Timed out waiting Nms for
// recv operation to complete"), and the one every other pair gets then ("Application timeout
// caused pair closure").
bool says_timed_out(const std::string& what) {
  return what.find("Timed out waiting") != std::string::npos ||
         what.find("Application timeout") != std::string::npos;
}
constexpr std::size_t max_devices = 64;
constexpr std::size_t max_address_bytes = 192;  // gloo::transport::Address::kMaxByteSize

std::string to_hex(const std::vector<char>& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return out;
}

std::vector<char> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0 || hex.size() > 2 * max_address_bytes)
    throw std::invalid_argument("a gloo pair address is not hex of at most 192 bytes");
  std::vector<char> out;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    std::size_t used = 0;
    const unsigned long v = std::stoul(hex.substr(i, 2), &used, 16);
    if (used != 2) throw std::invalid_argument("a gloo pair address is not hex");
    out.push_back(static_cast<char>(v));
  }
  return out;
}

// "[10.0.0.1]:4242" (gloo's Address::str) -> "10.0.0.1".
std::string host_of(const std::string& address) {
  const auto open = address.find('[');
  const auto close = address.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return address;
  return address.substr(open + 1, close - open - 1);
}

nlohmann::json parse_peer(std::span<const std::byte> peer) {
  const std::string text(reinterpret_cast<const char*>(peer.data()), peer.size());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("devices") || !j.at("devices").is_array() ||
      j.at("devices").empty() || j.at("devices").size() > max_devices)
    throw std::invalid_argument("the peer's gloo address is not a list of 1 to 64 devices");
  for (const auto& d : j.at("devices")) {
    if (!d.is_object() || !d.contains("bytes") || !d.at("bytes").is_string() ||
        !d.contains("address") || !d.at("address").is_string())
      throw std::invalid_argument("a device of the peer's gloo address lacks its bytes");
    (void)from_hex(d.at("bytes").get<std::string>());
  }
  if (!j.contains("source") || !j.at("source").is_string())
    throw std::invalid_argument("the peer's gloo address does not say how it chose its devices");
  return j;
}

// gloo's message for a peer that closed or reset the connection (pair.cc: "Connection closed by
// peer", read/write errors with strerror's "Connection reset by peer" / "Broken pipe").
bool says_peer_gone(const std::string& what) {
  return what.find("closed by peer") != std::string::npos ||
         what.find("reset by peer") != std::string::npos ||
         what.find("Broken pipe") != std::string::npos;
}

// gloo's collective context over a transport context connected elsewhere: gloo::Context keeps
// its device and transport context as protected members for such subclasses.
class connected_context final : public gloo::Context {
 public:
  connected_context(int rank, std::shared_ptr<gloo::transport::Device> device,
                    std::shared_ptr<gloo::transport::Context> context)
      : gloo::Context(rank, 2) {
    device_ = std::move(device);
    transportContext_ = std::move(context);
  }
};

}  // namespace

transport_entry gloo_transport::entry() {
  transport_entry e;
  e.name = name;
  e.description =
      "gloo's TCP pairs (libgloo, as torch.distributed's gloo backend): devices from "
      "GLOO_SOCKET_IFNAME or the hostname, as torch makes them";
  e.tests = {
      {"gloo_lat", pattern_kind::pingpong, op_kind::send, "ping-pong latency over a gloo pair"},
      {"gloo_bw", pattern_kind::stream_uni, op_kind::send,
       "client-to-server streaming bandwidth over a gloo pair"},
      {"gloo_bibw", pattern_kind::stream_bi, op_kind::send,
       "bidirectional streaming bandwidth over a gloo pair"},
  };
  e.create = [](const transport_params& p) -> std::unique_ptr<transport> {
    return std::make_unique<gloo_transport>(p);
  };
  e.describe_library = [] {
    return nlohmann::json{
        {"library", "libgloo"},
        {"version",
         fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH)},
        {"transports", {"tcp"}},
        // This process's devices, as a torch.distributed process here would make them.
        {"devices", gloo_env::describe(gloo_env::choose_from_environment(""))}};
  };
  e.lane_kind_of = [](std::string_view lane) {
    return lane == "tcp" ? lane_kind::network : lane_kind::unknown;
  };
  e.env_prefixes = {"GLOO_"};
  // Doctor: does gloo's own connection work between the two sides, each with its environment.
  e.doctor =
      doctor_probe{doctor_probe::role::application, "", "gloo_lat", "", "GLOO_SOCKET_IFNAME"};
  return e;
}

gloo_transport::gloo_transport(const transport_params& params) : m_params(params) {
  const bool client = m_params.side == side::client;
  const memory_type mine = client ? params.test.client_memory : params.test.server_memory;
  if (mine != memory_type::host)
    throw transport_unsupported("gloo's tcp transport moves host memory only");
  m_rank = client ? 0 : 1;
  m_retired.reserve(4);  // wait() keeps at most three: it never allocates
  m_choice = gloo_env::choose_from_environment(client ? params.test.iface : std::string());
  for (std::size_t i = 0; i < m_choice.devices.size(); ++i) {
    const auto& spec = m_choice.devices[i];
    try {
      auto device = gloo_env::make_device(spec);
      auto context = device->createContext(m_rank, 2);
      // gloo waits five times its timeout for a pair's first connection (tcp/pair.h waitUntil):
      // a fifth of ours, so the listening side ends within the case's connect bound with gloo's
      // own "Connect timeout" rather than being ended by the harness (and keeping its server busy).
      context->setTimeout(std::max(
          std::chrono::duration_cast<std::chrono::milliseconds>(params.connect_timeout / 5),
          std::chrono::milliseconds(100)));
      m_self.push_back(context->createPair(1 - m_rank)->address().str());
      m_devices.push_back(std::move(device));
      m_contexts.push_back(std::move(context));
    } catch (const std::exception& e) {
      throw step_error(
          error_kind::error,
          place(fmt::format("gloo device {} ({})", i,
                            spec.iface.empty() ? spec.hostname : spec.iface),
                m_params.peer_host),
          fmt::format("gloo could not make a device from {}: {}", m_choice.source, e.what()));
    }
  }
}

gloo_transport::~gloo_transport() {
  // The operations' buffers first (gloo's pending operations hold only weak pointers to them),
  // then the pairs and contexts, then the devices (their destructors stop gloo's event loop).
  m_retired.clear();
  m_sends.clear();
  m_recvs.clear();
  m_contexts.clear();
  m_devices.clear();
}

where gloo_transport::place(const std::string& step, const std::string& peer) const {
  return where{step, peer, m_params.side == side::client ? m_params.test.iface : std::string()};
}

capabilities gloo_transport::caps() const {
  // A send that beats its receive waits (gloo's NOTIFY_SEND_READY) until the receive is posted.
  // Waits block inside gloo, so a ping-pong's time budget is the harness's (counted phases).
  return capabilities{true, false, false, {memory_type::host}, true, false};
}

std::vector<std::byte> gloo_transport::local_address() {
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t i = 0; i < m_contexts.size(); ++i) {
    const auto& pair = m_contexts[i]->getPair(1 - m_rank);
    devices.push_back({{"address", m_self[i]}, {"bytes", to_hex(pair->address().bytes())}});
  }
  const std::string text = nlohmann::json{{"devices", devices}, {"source", m_choice.source}}.dump();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

void gloo_transport::check_peer_address(std::span<const std::byte> peer_address) {
  transport::check_peer_address(peer_address);
  (void)parse_peer(peer_address);
}

void gloo_transport::connect(std::span<const std::byte> peer_address) {
  const nlohmann::json peer = parse_peer(peer_address);
  const auto& devices = peer.at("devices");
  const std::string peer_source = peer.at("source").get<std::string>();
  if (devices.size() != m_contexts.size()) {
    const bool client = m_params.side == side::client;
    throw step_error(
        error_kind::error, place("gloo connect", m_params.peer_host),
        fmt::format("this side makes {} gloo device(s) ({}), the peer {} ({}): torch.distributed "
                    "connects one context per device, and the contexts the other side lacks wait "
                    "until their timeout",
                    m_contexts.size(), m_choice.source, devices.size(), peer_source,
                    client ? "client" : "server"));
  }
  for (std::size_t i = 0; i < m_contexts.size(); ++i) {
    const std::string address = devices[i].at("address").get<std::string>();
    m_peer.push_back(address);
    const std::string step =
        fmt::format("gloo connect, device {} of {} ({} -> {}; this side {}, the peer {})", i + 1,
                    m_contexts.size(), m_self[i], address, m_choice.source, peer_source);
    try {
      m_contexts[i]->getPair(1 - m_rank)->connect(from_hex(devices[i].at("bytes")));
    } catch (const std::exception& e) {
      throw step_error(error_kind::unreachable, place(step, address), e.what());
    }
  }
  m_connected = true;
}

mem_region gloo_transport::register_memory(std::byte* address, std::size_t length,
                                           memory_type type) {
  if (type != memory_type::host)
    throw transport_unsupported("gloo's tcp transport moves host memory only");
  m_regions.push_back(region{address, length});
  return mem_region{address, length, {}};
}

int gloo_transport::post(const op& operation) noexcept {
  if (m_failed) return -1;
  if (operation.kind != op_kind::send && operation.kind != op_kind::recv) {
    fail("gloo supports send and receive only", false);
    return -1;
  }
  if (!m_connected) {
    fail("gloo: post before connect", false);
    return -1;
  }
  const auto inside = [&](const region& r) {
    return operation.local >= r.base && operation.local + operation.length <= r.base + r.length;
  };
  if (std::none_of(m_regions.begin(), m_regions.end(), inside)) {
    fail("gloo: an operation's buffer was not registered", false);
    return -1;
  }
  try {
    pending p{m_contexts.front()->createUnboundBuffer(static_cast<void*>(operation.local),
                                                      operation.length),
              completion{operation.cookie, operation.kind}, m_posted++};
    if (operation.kind == op_kind::send) {
      p.buffer->send(1 - m_rank, op_slot, 0, operation.length);
      m_sends.push_back(std::move(p));
    } else {
      p.buffer->recv(1 - m_rank, op_slot, 0, operation.length);
      m_recvs.push_back(std::move(p));
    }
  } catch (const std::exception& e) {
    fail(e.what(), says_peer_gone(e.what()));
    return -1;
  } catch (...) {
    fail("gloo: an unknown exception while posting", false);
    return -1;
  }
  return 0;
}

int gloo_transport::wait(op_kind kind, deadline_t deadline, completion& done) noexcept {
  if (m_failed) return wait_failed;
  auto& queue = kind == op_kind::send ? m_sends : m_recvs;
  if (queue.empty()) {
    fail(kind == op_kind::send ? "gloo: a wait for a send with none posted"
                               : "gloo: a wait for a receive with none posted",
         false);
    return wait_failed;
  }
  // gloo's wait takes a timeout in milliseconds; at least one, so a deadline that is near still
  // gets its wait (a completion already there returns at once).
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - steady::now());
  const auto timeout = std::max(left, std::chrono::milliseconds(1));
  // Earlier operations' buffers go while this one is in flight (see below), all but the two
  // newest (a send's and a receive's when both directions alternate), which gloo's loop thread
  // may still hold: their destructors then cost no time between a completion and the post behind
  // it.
  if (m_retired.size() > 2) m_retired.erase(m_retired.begin(), m_retired.end() - 2);
  pending& p = queue.front();
  try {
    const bool completed = kind == op_kind::send ? p.buffer->waitSend(nullptr, timeout)
                                                 : p.buffer->waitRecv(nullptr, timeout);
    if (!completed) {  // only an abort returns false, and nothing here aborts
      fail("gloo: a wait was aborted", false);
      return wait_failed;
    }
  } catch (const std::exception& e) {
    const bool late = says_timed_out(e.what()) && steady::now() >= deadline;
    fail(e.what(), !late && says_peer_gone(e.what()));
    return late ? wait_deadline : wait_failed;
  } catch (...) {
    fail("gloo: an unknown exception while waiting", false);
    return wait_failed;
  }
  done = p.done;
  // The buffer outlives its wait, as the buffers of torch's work objects and of
  // pairperf_gloo_loop do. Its destructor (gloo/common/memory.h ShareableNonOwningPtr) spins with
  // yield() until gloo's event loop thread lets go of the operation, which it still holds for a
  // moment after waking this thread; destroyed here, that spin would come between each completion
  // and the repost that follows it (1 MiB streams at 0.77 of the loop's bandwidth).
  m_retired.push_back(std::move(p.buffer));
  queue.pop_front();
  return 0;
}

int gloo_transport::poll(std::span<completion> out) noexcept {
  if (m_failed) return -1;
  if (out.empty() || (m_sends.empty() && m_recvs.empty())) return 0;
  const bool send_first =
      !m_sends.empty() && (m_recvs.empty() || m_sends.front().seq < m_recvs.front().seq);
  const deadline_t until = m_deadline > steady::now() ? m_deadline : steady::now() + wait_bound;
  return wait(send_first ? op_kind::send : op_kind::recv, until, out[0]) == 0 ? 1 : -1;
}

// The loops over this class: post() and wait() above are direct calls in them.
pattern_outcome gloo_transport::run_phase(const pattern_run& run, const pattern_buffers& buffers,
                                          sample_recorder& samples, message_check* checker,
                                          const where& place) {
  m_deadline = run.deadline;
  return run_waiting_pattern(*this, run, buffers, samples, checker, place);
}

std::string gloo_transport::last_error() const { return m_error; }

void gloo_transport::fail(const std::string& why, bool peer_gone) noexcept {
  try {
    if (m_error.empty()) m_error = why;
  } catch (...) {
  }
  if (peer_gone) m_peer_gone.store(true);
  m_failed = true;
}

provenance gloo_transport::describe() const {
  provenance p;
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t i = 0; i < m_self.size(); ++i) {
    const std::string host = host_of(m_self[i]);
    const std::string iface = interface_of_address(host);
    const auto& spec = m_choice.devices[i];
    if (i == 0) p.lanes.push_back(lane{"tcp", iface.empty() ? host : iface, lane_kind::network});
    nlohmann::json d{
        {"address", m_self[i]},
        {"iface", iface},
        {"from", spec.iface.empty() ? "hostname " + spec.hostname : "interface " + spec.iface}};
    if (i < m_peer.size()) d["peer"] = m_peer[i];
    devices.push_back(std::move(d));
  }
  p.protocol = fmt::format(
      "gloo tcp pair (libgloo {}.{}.{}), an unbound buffer per operation, waited for "
      "in gloo (as torch's ProcessGroupGloo); {} device(s) from {}{}",
      GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH, m_self.size(), m_choice.source,
      m_self.size() > 1 ? ", operations on the first" : "");
  nlohmann::json details{{"devices", devices}, {"source", m_choice.source}};
  if (!m_choice.ignored_ifname.empty())
    details["ignored_GLOO_SOCKET_IFNAME"] = m_choice.ignored_ifname;
  (m_params.side == side::client ? p.client : p.server) = std::move(details);
  return p;
}

std::shared_ptr<gloo::Context> gloo_transport::collective_context() const {
  if (m_contexts.empty() || m_peer.empty())
    throw std::logic_error("gloo: collective_context() before connect()");
  auto c = std::make_shared<connected_context>(m_rank, m_devices.front(), m_contexts.front());
  c->setTimeout(wait_bound);
  return c;
}

}  // namespace pairperf
