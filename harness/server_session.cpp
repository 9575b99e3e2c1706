#include "harness/server_session.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <optional>

#include "core/hex.h"
#include "core/interfaces.h"
#include "core/units.h"
#include "harness/case_session.h"
#include "harness/client.h"
#include "harness/context.h"

namespace pairperf {
namespace {

nlohmann::json outcome_json(const pattern_outcome& o) {
  return {{"elapsed_s", static_cast<double>(o.elapsed_ns) * 1e-9},
          {"send_elapsed_s", static_cast<double>(o.send_elapsed_ns) * 1e-9},
          {"recv_span_s", static_cast<double>(o.recv_span_ns) * 1e-9},
          {"recv_span_messages", o.recv_span_messages},
          {"messages_sent", o.messages_sent},
          {"messages_received", o.messages_received}};
}

// Bytes a phase moves through this server (both directions for stream_bi).
std::uint64_t phase_bytes(const test_case& c, std::uint64_t iterations) {
  const std::uint64_t directions = c.pattern == pattern_kind::stream_uni ? 1 : 2;
  return directions * iterations * c.size_bytes;  // each factor bounded by config.h's limits
}

// A `run` request: its phase, count (a timed phase's cap), whether it continues the measurement,
// and a timed phase's budget (zero: a count).
struct run_request {
  std::string phase;
  std::uint64_t n = 0;
  bool continues = false;
  std::chrono::nanoseconds budget{};
};

class client_handler {
 public:
  client_handler(const server_options& options, control_channel& channel, std::string listen_host,
                 int others_waiting, std::chrono::milliseconds nccl_budget)
      : m_options(options),
        m_channel(channel),
        m_listen_host(std::move(listen_host)),
        m_others_waiting(others_waiting),
        m_nccl_budget(nccl_budget) {}

  // Returns when the client says bye, goes away or breaks the protocol.
  void serve();

 private:
  void log(const std::string& text) const {
    if (m_options.log == nullptr) return;
    fmt::print(m_options.log, "pairperf server: {}: {}\n", m_channel.place().peer, text);
    std::fflush(m_options.log);
  }
  void hello_reply();
  void arm_watchdog() const;
  std::chrono::nanoseconds await_request(std::chrono::nanoseconds wait);
  void on_drive(const nlohmann::json& body);
  [[nodiscard]] std::optional<std::string> refuse_drive(const std::string& host) const;
  [[nodiscard]] std::optional<std::string> refuse_transport(const std::string& name) const;
  void on_case(const nlohmann::json& body);
  void on_run(const nlohmann::json& body);
  [[nodiscard]] run_request read_run(const nlohmann::json& body) const;
  pattern_outcome run_phase(std::uint64_t n, const where& place, phase_mode mode,
                            std::chrono::nanoseconds budget);
  void decline(case_status status, const std::string& why);

  const server_options& m_options;
  control_channel& m_channel;
  std::string m_listen_host;
  std::optional<case_session> m_session;
  run_config m_config;  // the client's, with its timeouts capped by the server's
  std::string m_client_address;
  nlohmann::json m_client_regions;
  std::optional<std::pair<case_status, std::string>> m_connect_failure;
  std::string m_label;
  std::uint64_t m_session_bytes = 0;
  int m_others_waiting = -1;
  bool m_others_told = false;
  std::chrono::milliseconds m_nccl_budget{0};
};

void client_handler::hello_reply() {
  // Within what the client granted on top of its wait for this reply.
  if (m_nccl_budget.count() > 0) describe_nccl_in_context(m_nccl_budget);
  m_channel.send(msg_type::hello,
                 {{"protocol", control_protocol_version},
                  {"tool", tool_context()},
                  {"listen", m_listen_host},
                  {"host", host_context()},
                  {"env", relevant_environment()}},
                 "hello", m_options.timeouts.handshake);
}

void client_handler::serve() {
  hello_reply();
  log("connected");
  for (;;) {
    // Within a run the client sends its next message right after the last reply (it only formats
    // a result in between), so a silence longer than its own handshake bound means it is gone.
    const std::chrono::nanoseconds wait =
        m_label.empty() ? m_options.timeouts.idle
                        : m_config.timeouts.handshake + m_config.timeouts.connect;
    const message msg = m_channel.receive("waiting for the next request", await_request(wait));
    switch (msg.type) {
      case msg_type::bye:
        log("done");
        return;
      case msg_type::case_:
        arm_watchdog();
        on_case(msg.body);
        ::alarm(0);
        break;
      case msg_type::run:
        arm_watchdog();
        on_run(msg.body);
        ::alarm(0);
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
      case msg_type::queued:
      case msg_type::busy:
      case msg_type::stop:  // only inside a timed phase (run_phase)
      case msg_type::stopped:
      case msg_type::error: {
        const std::string why = fmt::format("unexpected message '{}'", to_string(msg.type));
        m_channel.send_error(why);
        throw step_error(error_kind::protocol, m_channel.place(), why);
      }
    }
  }
}

// Every wait inside a request is bounded, but a library call may ignore its bound (UCX's blocking
// connect() inside ucp_ep_create): SIGALRM ends this session process then, and the supervisor
// tells the client. The bound covers the longest request, a phase with its reply.
void client_handler::arm_watchdog() const {
  if (!m_options.isolate) return;  // the session runs in the supervisor's own process
  const auto& t = m_options.limits;
  const auto bound = t.max_case + t.max_connect + 2 * m_options.timeouts.handshake;
  ::alarm(static_cast<unsigned>(std::chrono::ceil<std::chrono::seconds>(bound).count()) + 2);
}

// Returns once the client's next request starts to arrive (with the time left to read it), or
// when `wait` is over (receive() then reports the timeout). While others are queued, a client
// silent for longer than the server's handshake bound loses its turn.
std::chrono::nanoseconds client_handler::await_request(std::chrono::nanoseconds wait) {
  const auto start = steady::now();
  for (;;) {
    auto deadline = start + wait;
    if (m_others_told) deadline = std::min(deadline, start + m_options.timeouts.handshake);
    const auto left = deadline - steady::now();
    if (left <= std::chrono::nanoseconds::zero()) {
      if (!m_others_told) return std::chrono::nanoseconds::zero();
      throw step_error(error_kind::timeout, m_channel.place(),
                       "idle between requests while other clients wait; the turn passes on");
    }
    std::array<pollfd, 2> fds{{{m_channel.fd(), POLLIN, 0}, {m_others_waiting, POLLIN, 0}}};
    const nfds_t n = m_others_waiting >= 0 && !m_others_told ? 2 : 1;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
    const int r = ::poll(fds.data(), n, static_cast<int>(std::min<std::int64_t>(ms, 1000)));
    if (r > 0 && fds[0].revents != 0)
      return std::chrono::duration_cast<std::chrono::nanoseconds>(left);
    if (r > 0 && n == 2 && fds[1].revents != 0) m_others_told = true;
  }
}

// Why this server does not serve a case of the transport `name` (its --transport), or nothing.
std::optional<std::string> client_handler::refuse_transport(const std::string& name) const {
  const auto& served = m_options.transports;
  if (served.empty() || std::find(served.begin(), served.end(), name) != served.end())
    return std::nullopt;
  return fmt::format("this server serves only {} (its --transport), not {}", fmt::join(served, ","),
                     name);
}

// Why this server may not measure towards `host` for its peer, or nothing.
std::optional<std::string> client_handler::refuse_drive(const std::string& host) const {
  if (m_options.drive.empty()) {
    return "this server does not drive measurements towards other hosts (start it with --token "
           "and --allow-drive)";
  }
  const auto addresses = name_addresses(host);
  if (addresses.empty()) return fmt::format("target '{}' does not resolve here", host);
  for (const auto& a : addresses) {
    if (!m_options.drive.allows(a)) {
      return fmt::format("target {} ({}) is not in this server's --allow-drive list ({})", host, a,
                         m_options.drive.to_string());
    }
  }
  return std::nullopt;
}

// A mesh driver asks this server to measure towards another server, as its client.
void client_handler::on_drive(const nlohmann::json& body) {
  client_options o;
  collecting_reporter got;
  std::optional<std::string> refusal;
  try {
    o.server = parse_endpoint(body.at("target").get<std::string>(), default_control_port);
    o.config =
        capped(body.at("config").get<run_config>(), m_options.limits, m_options.timeouts.handshake);
    o.cases = body.at("cases").get<std::vector<test_case>>();
    o.token = body.value("token", std::string());
    refusal = refuse_drive(o.server.host);
    for (const auto& c : o.cases) {
      if (!refusal && !c.target.empty()) refusal = refuse_drive(parse_endpoint(c.target, 0).host);
      if (!refusal) refusal = refuse_transport(c.transport);
    }
  } catch (const std::exception& e) {
    refusal = fmt::format("malformed drive message: {}", e.what());
  }
  if (refusal) {
    log("drive refused: " + *refusal);
    m_channel.send(msg_type::error, {{"message", *refusal}}, "drive", m_options.timeouts.handshake);
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
  m_connect_failure.reset();
  test_case c;
  try {
    m_config =
        capped(body.at("config").get<run_config>(), m_options.limits, m_options.timeouts.handshake);
    c = body.at("case").get<test_case>();
    m_client_address = body.at("address").get<std::string>();
    m_client_regions = body.at("regions");
  } catch (const std::exception& e) {
    m_label = "case";
    decline(case_status::error, fmt::format("malformed case message: {}", e.what()));
    return;
  }
  m_label = fmt::format("case {} ({} {})", c.index + 1, c.test, format_size(c.size_bytes));
  if (auto why = refuse_transport(c.transport)) {
    decline(case_status::error, "server refused: " + *why);
    return;
  }
  // The buffers are checked now, before they are allocated; the samples when a phase says how
  // many iterations it runs (the client's max_iterations is only its own plan).
  if (auto why = refuse_case(m_config, c, 0, m_options.limits)) {
    decline(case_status::error, "server refused: " + *why);
    return;
  }
  const transport_params params{c,
                                m_config.transport,
                                side::server,
                                peer_ip(m_channel.fd()),
                                m_listen_host,
                                m_config.timeouts.connect};
  std::vector<std::byte> peer;
  try {
    peer = from_hex(m_client_address);
    m_session.emplace(m_config, params);
    m_session->check_peer_address(peer);
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
  try {
    m_session->connect(peer, m_client_regions);
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

// The run message read and checked against the case and this server's limits; throws
// std::invalid_argument with what the client is told.
run_request client_handler::read_run(const nlohmann::json& body) const {
  run_request r;
  try {
    r.phase = body.at("phase").get<std::string>();
    const auto& count = body.at("iterations");
    if (!count.is_number_unsigned() || count.get<std::uint64_t>() == 0)
      throw std::invalid_argument(fmt::format("bad iteration count {}", count.dump()));
    r.n = count.get<std::uint64_t>();
    r.continues = body.value("continues", false);
    if (body.contains("budget_s")) r.budget = parse_phase_budget(body.at("budget_s"));
  } catch (const std::exception& e) {
    throw std::invalid_argument(fmt::format("malformed run message: {}", e.what()));
  }
  if (r.phase != "warmup" && r.phase != "measure")
    throw std::invalid_argument(fmt::format("unknown phase '{}'", r.phase));
  if (r.budget.count() > 0 && (!m_session->timed() || r.continues))
    throw std::invalid_argument("a time budget for a phase that runs a count");
  if (r.budget > m_config.timeouts.per_case)
    throw std::invalid_argument(
        "server refused: a phase's time budget longer than the case timeout");
  if (r.continues && (r.phase != "measure" || m_session->measured_iterations() == 0))
    throw std::invalid_argument("'continues' names no measurement to continue");
  // A continued measurement keeps the samples before it: the limits apply to all of them.
  for (const std::uint64_t count :
       {r.n, r.continues ? m_session->measured_iterations() + r.n : r.n}) {
    if (auto why = refuse_case(m_config, m_session->test(), count, m_options.limits))
      throw std::invalid_argument("server refused: " + *why);
  }
  if (m_session_bytes + phase_bytes(m_session->test(), r.n) > m_options.limits.max_session_bytes) {
    throw std::invalid_argument(fmt::format(
        "server refused: the session would move more than {} (--max-session-bytes); connect "
        "again for more",
        format_size(m_options.limits.max_session_bytes)));
  }
  return r;
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
  run_request req;
  try {
    req = read_run(body);
  } catch (const std::invalid_argument& e) {
    decline(case_status::error, e.what());
    return;
  }
  const auto& [phase, n, continues, budget] = req;
  m_session_bytes += phase_bytes(m_session->test(), n);
  // The control connection's interface, found once when the session began (listing the
  // interfaces for every phase cost 0.1 ms of each control round trip).
  const where place{m_label + " " + phase, m_channel.place().peer, m_channel.place().iface};
  m_channel.send(msg_type::running, nlohmann::json::object(), place.step,
                 m_options.timeouts.handshake);
  pattern_outcome outcome;
  try {
    outcome = run_phase(n, place,
                        phase == "warmup" ? phase_mode::unmeasured
                        : continues       ? phase_mode::measure_more
                                          : phase_mode::measure,
                        budget);
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
    const provenance described = m_session->describe();
    results["provenance"] = described.server;
    results["path_evidence"] = path_evidence(described);
    results["host_noise"] = m_session->noise().side();
  }
  m_channel.send(msg_type::results, std::move(results), place.step, m_options.timeouts.handshake);
}

// Runs the phase; a timed one ends on the client's `stop` (its count must be the server's), then
// `stopped` and the closing message.
pattern_outcome client_handler::run_phase(std::uint64_t n, const where& place, phase_mode mode,
                                          std::chrono::nanoseconds budget) {
  if (budget.count() <= 0) return m_session->run(n, place, mode);
  std::optional<std::uint64_t> theirs;
  const auto stop_requested = [&] {
    if (!m_channel.readable()) return false;
    const nlohmann::json stop =
        m_channel.expect(msg_type::stop, place.step, m_options.timeouts.handshake);
    const auto& count = stop.at("iterations");
    if (!count.is_number_unsigned())
      throw step_error(error_kind::protocol, place, "a stop without its iteration count");
    theirs = count.get<std::uint64_t>();
    return true;
  };
  const pattern_outcome outcome = m_session->run(n, place, mode, budget, stop_requested);
  const std::uint64_t ours = outcome.messages_received;  // a timed phase is never continued
  if (!theirs || *theirs != ours) {
    throw step_error(error_kind::protocol, place,
                     fmt::format("the client stopped after {} round trips, the server saw {}",
                                 theirs ? fmt::format("{}", *theirs) : "?", ours));
  }
  m_channel.send(msg_type::stopped, nlohmann::json::object(), place.step,
                 m_options.timeouts.handshake);
  m_session->close_timed_phase(place);
  return outcome;
}

}  // namespace

void serve_session(const server_options& options, control_channel& channel,
                   const std::string& listen_host, int others_waiting,
                   std::chrono::milliseconds nccl_budget) {
  client_handler(options, channel, listen_host, others_waiting, nccl_budget).serve();
}

}  // namespace pairperf
