#include "transports/tcp/tcp_transport.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/interfaces.h"
#include "patterns/run.h"

namespace pairperf {
namespace {

// Sent by the client on each new connection so the server can order them and refuse strays.
constexpr std::array<char, 4> stream_magic{'P', 'P', 'T', 'S'};
constexpr unsigned max_streams = 64;

void set_int(int fd, int level, int name, int value) {
  ::setsockopt(fd, level, name, &value, sizeof(value));
}

void apply_buffers(int fd, const transport_options& o) {
  if (o.send_buffer_bytes > 0)
    set_int(fd, SOL_SOCKET, SO_SNDBUF, static_cast<int>(o.send_buffer_bytes));
  if (o.recv_buffer_bytes > 0)
    set_int(fd, SOL_SOCKET, SO_RCVBUF, static_cast<int>(o.recv_buffer_bytes));
}

int get_int(int fd, int level, int name) {
  int value = 0;
  socklen_t len = sizeof(value);
  ::getsockopt(fd, level, name, &value, &len);
  return value;
}

std::string congestion_control(int fd) {
  std::array<char, 32> name{};
  socklen_t len = name.size();
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), &len) != 0) return "unknown";
  return std::string(name.data(), ::strnlen(name.data(), len));
}

nlohmann::json stream_details(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  nlohmann::json j{{"local", local_endpoint(fd)},
                   {"remote", peer_endpoint(fd)},
                   {"send_buffer_bytes", get_int(fd, SOL_SOCKET, SO_SNDBUF)},
                   {"recv_buffer_bytes", get_int(fd, SOL_SOCKET, SO_RCVBUF)}};
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0) {
    j["rtt_s"] = info.tcpi_rtt * 1e-6;
    j["rttvar_s"] = info.tcpi_rttvar * 1e-6;
    j["retransmits_total"] = info.tcpi_total_retrans;
    j["snd_cwnd_segments"] = info.tcpi_snd_cwnd;
    j["snd_mss_bytes"] = info.tcpi_snd_mss;
    j["pmtu_bytes"] = info.tcpi_pmtu;
  }
  return j;
}

}  // namespace

transport_entry tcp_transport::entry() {
  transport_entry e;
  e.name = "tcp";
  e.description = "TCP sockets (kernel stack), bound to an interface on request";
  e.tests = {
      {"tcp_lat", pattern_kind::pingpong, op_kind::send, "ping-pong latency over TCP"},
      {"tcp_bw", pattern_kind::stream_uni, op_kind::send,
       "client-to-server streaming bandwidth over TCP"},
      {"tcp_bibw", pattern_kind::stream_bi, op_kind::send,
       "bidirectional streaming bandwidth over TCP"},
  };
  e.create = [](const transport_params& p) -> std::unique_ptr<transport> {
    return std::make_unique<tcp_transport>(p);
  };
  e.lane_kind_of = [](std::string_view name) {
    return name == "tcp" ? lane_kind::network : lane_kind::unknown;
  };
  // Doctor: can each interface reach each of the peer's addresses, and how fast.
  e.doctor = doctor_probe{doctor_probe::role::reach, "tcp_bw", "", "", ""};
  return e;
}

tcp_transport::tcp_transport(const transport_params& params) : m_params(params) {
  if (m_params.options.streams == 0 || m_params.options.streams > max_streams) {
    throw std::invalid_argument(fmt::format("tcp: --streams must be 1 to {}", max_streams));
  }
  if (m_params.side == side::server) {
    m_listener = listen_tcp(m_params.listen_host, 0, place("data listen", m_params.listen_host));
    apply_buffers(m_listener.get(), m_params.options);
  }
}

where tcp_transport::place(const std::string& step, const std::string& peer) const {
  return where{step, peer, m_params.side == side::client ? m_params.test.iface : std::string()};
}

capabilities tcp_transport::caps() const {
  return capabilities{true, false, false, {memory_type::host}, true};  // the socket buffers them
}

std::vector<std::byte> tcp_transport::local_address() {
  nlohmann::json j;
  if (m_params.side == side::server) {
    // Advertise the addresses the listener takes: all of them for a wildcard, else only its own.
    const std::string bound = local_ip(m_listener.get());
    const bool wildcard = bound == "::" || bound == "0.0.0.0";
    nlohmann::json addrs = nlohmann::json::array();
    for (const auto& info : usable_interfaces()) {
      for (const auto& a : info.addresses) {
        if (wildcard || a.address == bound)
          addrs.push_back(
              {{"address", a.address}, {"prefix_len", a.prefix_len}, {"iface", info.name}});
      }
    }
    j = {{"port", local_port(m_listener.get())}, {"addresses", addrs}};
  } else {
    j = {{"iface", m_params.test.iface}};
  }
  const std::string text = j.dump();
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}

void tcp_transport::connect(std::span<const std::byte> peer_address) {
  const std::string text(reinterpret_cast<const char*>(peer_address.data()), peer_address.size());
  if (m_params.side == side::client) {
    connect_as_client(text);
  } else {
    accept_as_server();
  }
  for (auto& s : m_streams) {
    set_int(s.fd(), IPPROTO_TCP, TCP_NODELAY, 1);
    set_nonblocking(s.fd(), true);
  }
}

void tcp_transport::connect_as_client(const std::string& peer_json) {
  const nlohmann::json peer = nlohmann::json::parse(peer_json);
  const auto port = peer.at("port").get<std::uint16_t>();
  // With an interface chosen, aim at the server address on that interface's subnet: that is the
  // path the user asked to measure. Without one (or with no such address), use the control peer.
  std::string host = m_params.peer_host;
  m_bind_method = "route";
  if (!m_params.test.iface.empty()) {
    const auto info = find_interface(m_params.test.iface);
    if (!info)
      throw step_error(error_kind::error, place("data connect", host),
                       "no such interface on this host");
    for (const auto& mine : info->addresses) {
      for (const auto& theirs : peer.at("addresses")) {
        const std::string candidate = theirs.at("address").get<std::string>();
        // The server's loopback is only the same host as ours when the control connection is.
        if (is_link_local(candidate) ||
            (is_loopback(candidate) && !is_loopback(m_params.peer_host)))
          continue;
        if (in_subnet(mine, candidate)) host = candidate;
      }
    }
    m_bound_iface = m_params.test.iface;
    m_bind_method = "device";
  }
  if (!m_params.test.target.empty()) host = m_params.test.target;
  connect_options options;
  options.iface = m_bound_iface;
  options.timeout = m_params.connect_timeout;
  for (unsigned i = 0; i < m_params.options.streams; ++i) {
    const where w =
        place(fmt::format("data connect (stream {})", i), endpoint{host, port}.to_string());
    unique_fd fd = connect_tcp(endpoint{host, port}, options, w);
    apply_buffers(fd.get(), m_params.options);
    std::array<char, 8> hello{};
    std::memcpy(hello.data(), stream_magic.data(), stream_magic.size());
    const std::uint32_t index = htonl(i);
    std::memcpy(hello.data() + 4, &index, sizeof(index));
    write_all(fd.get(), hello.data(), hello.size(), deadline_in(m_params.connect_timeout), w);
    m_streams.emplace_back(std::move(fd));
  }
}

void tcp_transport::accept_as_server() {
  const deadline_t deadline = deadline_in(m_params.connect_timeout);
  const unsigned n = m_params.options.streams;
  std::vector<unique_fd> slots(n);
  for (unsigned accepted = 0; accepted < n; ++accepted) {
    const where w =
        place(fmt::format("data accept ({} of {} streams)", accepted, n), m_params.peer_host);
    unique_fd fd = accept_until(m_listener, deadline, w);
    std::array<char, 8> hello{};
    std::size_t got = 0;
    while (got < hello.size()) {
      const std::size_t r =
          read_some(fd.get(), hello.data() + got, hello.size() - got, deadline, w);
      if (r == 0)
        throw step_error(error_kind::closed, w,
                         "peer closed a data connection before its stream header");
      got += r;
    }
    std::uint32_t index = 0;
    std::memcpy(&index, hello.data() + 4, sizeof(index));
    index = ntohl(index);
    if (std::memcmp(hello.data(), stream_magic.data(), stream_magic.size()) != 0 || index >= n ||
        slots[index].valid()) {
      throw step_error(error_kind::protocol, w, "a data connection sent a bad stream header");
    }
    slots[index] = std::move(fd);
  }
  for (auto& fd : slots) m_streams.emplace_back(std::move(fd));
  m_listener.reset();
}

mem_region tcp_transport::register_memory(std::byte* address, std::size_t length,
                                          memory_type /*type*/) {
  return mem_region{address, length, {}};  // sockets copy through the kernel: nothing to register
}

int tcp_transport::post(const op& operation) noexcept {
  if (operation.kind != op_kind::send && operation.kind != op_kind::recv) {
    m_error = "tcp supports send and receive only";
    return -1;
  }
  if (m_streams.empty()) {
    m_error = "tcp: post before connect";
    return -1;
  }
  std::size_t index = 0;
  if (operation.channel == op_channel::data) {
    std::size_t& next = operation.kind == op_kind::send ? m_next_send : m_next_recv;
    index = next;
    next = next + 1 == m_streams.size() ? 0 : next + 1;
  }
  m_streams[index].push(operation.kind,
                        pending_op{operation.local, operation.length, 0, operation.cookie});
  return 0;
}

int tcp_transport::poll(std::span<completion> out) noexcept {
  int n = 0;
  for (std::size_t i = 0; i < m_streams.size(); ++i) {
    n = m_streams[i].progress(out, n, m_error, m_peer_gone);
    if (n < 0) {
      m_error = fmt::format("stream {} ({} -> {}): {}", i, local_endpoint(m_streams[i].fd()),
                            peer_endpoint(m_streams[i].fd()), m_error);
      return -1;
    }
  }
  if (n == 0 && m_params.options.progress == progress_mode::block) wait_blocking();
  return n;
}

// The loops over this class: post() and poll() above are direct calls in them.
pattern_outcome tcp_transport::run_phase(const pattern_run& run, const pattern_buffers& buffers,
                                         sample_recorder& samples, message_check* checker,
                                         const where& place) {
  return run_pattern(*this, run, buffers, samples, checker, place);
}

void tcp_transport::wait_blocking() noexcept {
  std::array<pollfd, max_streams> fds{};
  nfds_t count = 0;
  for (const auto& s : m_streams) {
    if (const short ev = s.wanted_events(); ev != 0) fds[count++] = pollfd{s.fd(), ev, 0};
  }
  if (count > 0) ::poll(fds.data(), count, 10);
}

provenance tcp_transport::describe() const {
  provenance p;
  if (m_streams.empty()) return p;
  const int fd0 = m_streams.front().fd();
  const std::string iface = interface_of_address(local_ip(fd0));
  const auto info = find_interface(iface);
  p.lanes.push_back(lane{"tcp", iface.empty() ? "unknown" : iface, lane_kind::network});
  p.protocol =
      fmt::format("tcp stream, {} connection{}, {} progress, TCP_NODELAY", m_streams.size(),
                  m_streams.size() == 1 ? "" : "s", to_string(m_params.options.progress));
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : m_streams) streams.push_back(stream_details(s.fd()));
  nlohmann::json details{{"iface", iface},
                         {"mtu_bytes", info ? info->mtu : 0U},
                         {"local", local_endpoint(fd0)},
                         {"remote", peer_endpoint(fd0)},
                         {"congestion_control", congestion_control(fd0)},
                         {"streams", streams}};
  if (m_params.side == side::client) details["bind"] = m_bind_method;
  (m_params.side == side::client ? p.client : p.server) = std::move(details);
  return p;
}

}  // namespace pairperf
