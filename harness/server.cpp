#include "harness/server.h"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include "harness/case_session.h"
#include "harness/client.h"
#include "harness/context.h"
#include "harness/control.h"
#include "harness/hex.h"
#include "harness/interfaces.h"
#include "harness/units.h"

namespace pairperf {
namespace {

void server_log(const server_options& o, const std::string& text) {
  if (o.log == nullptr) return;
  fmt::print(o.log, "pairperf server: {}\n", text);
  std::fflush(o.log);
}

nlohmann::json outcome_json(const pattern_outcome& o) {
  return {{"elapsed_s", static_cast<double>(o.elapsed_ns) * 1e-9},
          {"send_elapsed_s", static_cast<double>(o.send_elapsed_ns) * 1e-9},
          {"recv_span_s", static_cast<double>(o.recv_span_ns) * 1e-9},
          {"recv_span_messages", o.recv_span_messages},
          {"messages_sent", o.messages_sent},
          {"messages_received", o.messages_received}};
}

class client_handler {
 public:
  client_handler(const server_options& options, control_channel& channel, std::string listen_host)
      : m_options(options), m_channel(channel), m_listen_host(std::move(listen_host)) {}

  // Returns when the client says bye, goes away or breaks the protocol.
  void serve();

 private:
  void log(const std::string& text) const {
    server_log(m_options, fmt::format("{}: {}", m_channel.place().peer, text));
  }
  bool hello();
  void on_drive(const nlohmann::json& body);
  void on_case(const nlohmann::json& body);
  void on_run(const nlohmann::json& body);
  void decline(case_status status, const std::string& why);

  const server_options& m_options;
  control_channel& m_channel;
  std::string m_listen_host;
  std::optional<case_session> m_session;
  run_config m_config;
  std::string m_client_address;
  nlohmann::json m_client_regions;
  std::optional<std::pair<case_status, std::string>> m_connect_failure;
  std::string m_label;
};

bool client_handler::hello() {
  nlohmann::json h;
  try {
    h = m_channel.expect(msg_type::hello, "hello", m_options.timeouts.handshake);
  } catch (const step_error& e) {
    // Closed before its first byte: a probe (a Kubernetes tcpSocket readiness probe, a load
    // balancer's health check), not a client. Logging it would add a line every few seconds.
    if (e.kind() == error_kind::closed && !m_channel.received_anything()) return false;
    throw;
  }
  const int version = h.value("protocol", -1);
  if (version != control_protocol_version) {
    const std::string why = fmt::format(
        "control protocol version {} is not supported; this server speaks version {} (pairperf {})",
        version, control_protocol_version, PAIRPERF_VERSION);
    m_channel.send(msg_type::refused, {{"reason", why}}, "hello", m_options.timeouts.handshake);
    log("refused: " + why);
    return false;
  }
  if (!m_options.token.empty() && h.value("token", "") != m_options.token) {
    m_channel.send(msg_type::refused, {{"reason", "wrong or missing --token"}}, "hello",
                   m_options.timeouts.handshake);
    log("refused: wrong token");
    return false;
  }
  m_channel.send(msg_type::hello,
                 {{"protocol", control_protocol_version},
                  {"tool", tool_context()},
                  {"listen", m_listen_host},
                  {"host", host_context()},
                  {"env", relevant_environment()}},
                 "hello", m_options.timeouts.handshake);
  return true;
}

void client_handler::serve() {
  if (!hello()) return;
  log("connected");
  for (;;) {
    // Within a run the client sends its next message right after the last reply (it only formats
    // a result in between), so a silence longer than its own handshake bound means it is gone.
    const std::chrono::nanoseconds wait =
        m_label.empty() ? m_options.timeouts.idle
                        : m_config.timeouts.handshake + m_config.timeouts.connect;
    const message msg = m_channel.receive("waiting for the next request", wait);
    switch (msg.type) {
      case msg_type::bye:
        log("done");
        return;
      case msg_type::case_:
        on_case(msg.body);
        break;
      case msg_type::run:
        on_run(msg.body);
        break;
      case msg_type::drive:
        on_drive(msg.body);
        break;
      case msg_type::hello:
      case msg_type::ready:
      case msg_type::running:
      case msg_type::results:
      case msg_type::refused:
      case msg_type::driven:
      case msg_type::error: {
        const std::string why = fmt::format("unexpected message '{}'", to_string(msg.type));
        m_channel.send_error(why);
        throw step_error(error_kind::protocol, m_channel.place(), why);
      }
    }
  }
}

// A mesh driver asks this server to measure towards another server, as its client.
void client_handler::on_drive(const nlohmann::json& body) {
  client_options o;
  collecting_reporter got;
  try {
    o.server = parse_endpoint(body.at("target").get<std::string>(), default_control_port);
    o.config = body.at("config").get<run_config>();
    o.cases = body.at("cases").get<std::vector<test_case>>();
    o.token = body.value("token", std::string());
  } catch (const std::exception& e) {
    m_channel.send(msg_type::error,
                   {{"message", fmt::format("malformed drive message: {}", e.what())}}, "drive",
                   m_options.timeouts.handshake);
    return;
  }
  log(fmt::format("driving {} case(s) towards {}", o.cases.size(), o.server.to_string()));
  nlohmann::json reply{{"target", o.server.to_string()}};
  try {
    run_client(o, got);
    reply["results"] = got.results;
  } catch (const step_error& e) {
    reply["results"] = nlohmann::json::array();
    reply["error"] = e.what();
    if (e.sys_errno() != 0) reply["error_code"] = errno_name(e.sys_errno());
  }
  m_channel.send(msg_type::driven, std::move(reply), "drive", m_options.timeouts.handshake);
}

void client_handler::decline(case_status status, const std::string& why) {
  log(fmt::format("{}: {}: {}", m_label, to_string(status), why));
  m_session.reset();
  m_channel.send(msg_type::error, {{"status", to_string(status)}, {"message", why}}, m_label,
                 m_options.timeouts.handshake);
}

void client_handler::on_case(const nlohmann::json& body) {
  m_session.reset();  // a new case ends the previous one, finished or not
  test_case c;
  try {
    m_config = body.at("config").get<run_config>();
    c = body.at("case").get<test_case>();
    m_client_address = body.at("address").get<std::string>();
    m_client_regions = body.at("regions");
  } catch (const std::exception& e) {
    m_label = "case";
    decline(case_status::error, fmt::format("malformed case message: {}", e.what()));
    return;
  }
  m_label = fmt::format("case {} ({} {})", c.index + 1, c.test, format_size(c.size_bytes));
  const transport_params params{c,
                                m_config.transport,
                                side::server,
                                peer_ip(m_channel.fd()),
                                m_listen_host,
                                m_config.timeouts.connect};
  try {
    m_session.emplace(m_config, params);
  } catch (const case_skipped& e) {
    decline(case_status::skipped, e.what());
    return;
  } catch (const std::exception& e) {
    decline(case_status::error, e.what());
    return;
  }
  m_channel.send(
      msg_type::ready,
      {{"address", to_hex(m_session->local_address())}, {"regions", m_session->regions()}}, m_label,
      m_options.timeouts.handshake);
  // Both sides connect now, at the same time (a transport may need both to make progress). A
  // failure is not reported here: the client saw its own, and a `run` gets this one.
  m_connect_failure.reset();
  try {
    m_session->connect(from_hex(m_client_address), m_client_regions);
  } catch (const step_error& e) {
    m_connect_failure = {
        e.kind() == error_kind::unreachable ? case_status::unreachable : case_status::error,
        e.what()};
  } catch (const std::exception& e) {
    m_connect_failure = {case_status::error, e.what()};
  }
  if (m_connect_failure) {
    log(fmt::format("{}: data connection failed: {}", m_label, m_connect_failure->second));
    m_session.reset();
  }
}

void client_handler::on_run(const nlohmann::json& body) {
  if (!m_session) {
    if (m_connect_failure) {
      decline(m_connect_failure->first, "server side: " + m_connect_failure->second);
    } else {
      decline(case_status::error, "'run' without a case");
    }
    return;
  }
  const std::string phase = body.value("phase", "?");
  const auto n = body.value("iterations", std::uint64_t{0});
  if (n == 0 || n > m_config.max_iterations + 1'000'000) {
    decline(case_status::error, fmt::format("bad iteration count {}", n));
    return;
  }
  const where place{m_label + " " + phase, m_channel.place().peer,
                    interface_of_address(local_ip(m_channel.fd()))};
  m_channel.send(msg_type::running, nlohmann::json::object(), place.step,
                 m_options.timeouts.handshake);
  pattern_outcome outcome;
  try {
    outcome = m_session->run(n, place, phase == "measure");
  } catch (const step_error& e) {
    const bool gone = e.kind() == error_kind::closed;
    decline(case_status::error, e.what());
    if (gone) throw;  // the client went away: stop serving it
    return;
  }
  nlohmann::json results{{"outcome", outcome_json(outcome)}};
  if (auto samples = m_session->samples().samples();
      !samples.empty() && m_session->test().pattern != pattern_kind::pingpong) {
    results["interval_s"] = summarize(samples, 1e-9);
  }
  const auto v = m_session->validated().value_or(validation{});
  results["validation"] = {{"messages_checked", v.messages_checked},
                           {"corrupt_bytes", v.corrupt_bytes}};
  if (phase == "measure") {
    results["provenance"] = m_session->describe().server;
    results["host_noise"] = m_session->noise().side();
  }
  m_channel.send(msg_type::results, std::move(results), place.step, m_options.timeouts.handshake);
}

// Waits for a client until one arrives, stop is set or (for a --once server) the idle timeout
// passes; returns an invalid fd then.
unique_fd next_client(const unique_fd& listener, const std::atomic<bool>& stop,
                      std::optional<deadline_t> give_up) {
  while (!stop.load() && (!give_up || steady::now() < *give_up)) {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      try {
        return accept_until(listener, deadline_in(std::chrono::milliseconds(200)),
                            where{"control accept", "", ""});
      } catch (const step_error&) {  // the client went away before we took it: keep waiting
        continue;
      }
    }
  }
  return unique_fd{};
}

}  // namespace

int run_server(const server_options& options, const std::atomic<bool>& stop) {
  const unique_fd listener = listen_tcp(options.listen_host, options.port,
                                        where{"control listen", options.listen_host, ""});
  const std::uint16_t port = local_port(listener.get());
  server_log(
      options,
      fmt::format(
          "listening on {} (control protocol {})",
          endpoint{options.listen_host.empty() ? "*" : options.listen_host, port}.to_string(),
          control_protocol_version));
  if (options.ready_fd) {
    const std::string line = fmt::format("{}\n", port);
    [[maybe_unused]] const auto written = ::write(*options.ready_fd, line.data(), line.size());
    ::close(*options.ready_fd);
  }
  while (true) {
    // A --once server exists for one client: it must not wait forever for one that never comes.
    unique_fd fd = next_client(
        listener, stop,
        options.once ? std::optional(deadline_in(options.timeouts.idle)) : std::nullopt);
    if (!fd.valid()) {
      if (!stop.load()) server_log(options, "no client came within --timeout-idle; exiting");
      break;
    }
    const std::string peer = peer_endpoint(fd.get());
    const std::string iface = interface_of_address(local_ip(fd.get()));
    control_channel channel(std::move(fd), where{"", peer, iface});
    try {
      client_handler(options, channel, options.listen_host).serve();
    } catch (const std::exception& e) {
      server_log(options, fmt::format("{}: client dropped: {}", peer, e.what()));
    }
    if (options.once) break;
  }
  return 0;
}

}  // namespace pairperf
