#include "harness/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <list>
#include <optional>

#include "core/control.h"
#include "core/interfaces.h"
#include "core/self_probe.h"
#include "core/units.h"
#include "harness/context.h"
#include "harness/server_session.h"
#include "harness/server_tickets.h"
#include "harness/token.h"

namespace pairperf {
namespace {

using namespace std::chrono_literals;

// A connection that has not said a valid hello yet.
struct pending_conn {
  unique_fd fd;
  std::string peer;
  deadline_t deadline;
  frame_decoder decoder;
  std::size_t received = 0;
};

// An authenticated client: waiting in the queue, or being served by a session process.
struct client_conn {
  unique_fd fd;
  std::string peer;
  double budget_s = 0;                  // what its cases should take, from its hello (0: unknown)
  std::optional<std::uint64_t> ticket;  // the one it came back with, if it was turned away before
  std::uint64_t order = 0;  // its place in the line: its ticket, else a number drawn on arrival
  // Its hello asked for NCCL's answer on this host (doctor, mesh), granting this long; 0: not.
  std::chrono::milliseconds nccl_budget{0};
};

// A client that names no budget (an older pairperf) counts as this many seconds in estimates.
constexpr double unknown_budget_s = 5;

struct session_process {
  pid_t pid = -1;
  client_conn client;
  steady::time_point started{};
  unique_fd others_waiting;           // a byte here tells the session that clients are queued
  std::optional<deadline_t> kill_at;  // set once the client hung up or the server stops
};

class supervisor {
 public:
  supervisor(const server_options& options, const std::atomic<bool>& stop)
      : m_options(options),
        m_stop(stop),
        m_listen(listen_address(options)),
        m_tickets(std::max<std::size_t>(64, 8 * options.limits.max_queue)) {
    if (m_options.limits.max_case_memory == 0)
      m_options.limits.max_case_memory = automatic_case_memory();
  }

  int run();

 private:
  void log(const std::string& text) const {
    if (m_options.log == nullptr) return;
    fmt::print(m_options.log, "pairperf server: {}\n", text);
    std::fflush(m_options.log);
  }
  void send_quietly(int fd, msg_type type, nlohmann::json body) const;
  void accept_all();
  bool read_hello(pending_conn& p);  // false: the connection is finished with
  void authenticated(pending_conn& p, std::optional<std::uint64_t> ticket, double budget_s,
                     std::chrono::milliseconds nccl_budget);
  void admit(client_conn c);
  void admit_waiting(client_conn c, std::size_t index);
  [[nodiscard]] double expected_wait_s(std::size_t sessions_to_end) const;
  void start_session();
  void reap();
  void watch_session(short revents);
  void expire_pending();
  void shut_down();
  [[nodiscard]] bool done() const;

  server_options m_options;
  const std::atomic<bool>& m_stop;
  std::string m_listen;
  unique_fd m_listener;
  std::list<pending_conn> m_pending;
  std::deque<client_conn> m_queue;
  ticket_book m_tickets;  // clients turned away, expected back
  std::optional<session_process> m_session;
  std::size_t m_served = 0;
  std::size_t m_turned_away = 0;
  deadline_t m_idle_deadline{};
};

// Replies from the supervisor are small: a full socket buffer means a peer that does not read.
void supervisor::send_quietly(int fd, msg_type type, nlohmann::json body) const {
  body["type"] = to_string(type);
  const std::string frame = encode_frame(body);
  try {
    write_all(fd, frame.data(), frame.size(), deadline_in(m_options.timeouts.handshake),
              where{"reply", "", ""});
  } catch (const step_error&) {  // NOLINT(bugprone-empty-catch): the peer is dropped either way
  }
}

void supervisor::accept_all() {
  for (;;) {
    unique_fd conn = accept_ready(m_listener);
    // EAGAIN: taken them all (or a transient error: poll says when to retry).
    if (!conn.valid()) return;
    if (m_pending.size() >= m_options.limits.max_pending) {
      // Too many hellos in flight: the oldest goes (a real client says hello as soon as it is
      // connected, so it is never the oldest for long; idle sockets are).
      if (m_turned_away++ % 100 == 0) {
        log(
            fmt::format("{}: dropped: {} connections are saying hello (--max-pending), this was "
                        "the oldest",
                        m_pending.front().peer, m_pending.size()));
      }
      m_pending.pop_front();
    }
    pending_conn& p = m_pending.emplace_back();
    p.peer = peer_endpoint(conn.get());
    p.fd = std::move(conn);
    p.deadline = deadline_in(m_options.timeouts.handshake);
  }
}

bool supervisor::read_hello(pending_conn& p) {
  std::array<char, 4096> chunk{};
  for (;;) {
    const ssize_t n = ::recv(p.fd.get(), chunk.data(), chunk.size(), MSG_DONTWAIT);
    if (n == 0) {
      // Closed before its first byte: a probe (a Kubernetes tcpSocket readiness probe, a load
      // balancer's health check), not a client. Logging it would add a line every few seconds.
      if (p.received > 0) {
        log(fmt::format("{}: dropped: closed mid-message before its hello ({})", p.peer,
                        p.decoder.truncation_message()));
      }
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      return false;
    }
    p.received += static_cast<std::size_t>(n);
    p.decoder.feed(std::string_view(chunk.data(), static_cast<std::size_t>(n)));
  }
  auto item = p.decoder.next();
  if (std::holds_alternative<frame_decoder::need_more>(item)) return true;
  if (auto* err = std::get_if<frame_error>(&item)) {
    send_quietly(p.fd.get(), msg_type::error, {{"message", err->reason}});
    log(fmt::format("{}: refused: {}", p.peer, err->reason));
    return false;
  }
  const auto& h = std::get<nlohmann::json>(item);
  // Before the token is checked the peer learns nothing but the protocol version.
  std::string why;
  if (h.value("type", "") != "hello") {
    why = "the first message must be hello";
  } else if (const auto& v = h.value("protocol", nlohmann::json());
             !v.is_number_integer() || v.get<std::int64_t>() != control_protocol_version) {
    why = fmt::format("control protocol version {} is not supported; this server speaks version {}",
                      v.dump(), control_protocol_version);
  } else if (!token_matches(m_options.token, h.value("token", nlohmann::json()))) {
    why = "wrong or missing --token";
  }
  if (!why.empty()) {
    send_quietly(p.fd.get(), msg_type::refused,
                 {{"reason", why}, {"protocol", control_protocol_version}});
    log(fmt::format("{}: refused: {}", p.peer, why));
    return false;
  }
  const hello_extras extras = read_hello_extras(h);
  authenticated(p, extras.ticket, extras.budget_s, extras.nccl_budget);
  return false;
}

// The seconds until `sessions_to_end` sessions have ended: what is left of the running one, then
// the queued clients' planned times in order.
double supervisor::expected_wait_s(std::size_t sessions_to_end) const {
  double wait = 0;
  if (m_session && sessions_to_end > 0) {
    const double budget =
        m_session->client.budget_s > 0 ? m_session->client.budget_s : unknown_budget_s;
    const double ran = std::chrono::duration<double>(steady::now() - m_session->started).count();
    wait += std::max(0.0, budget - ran);
    --sessions_to_end;
  }
  for (std::size_t k = 0; k < sessions_to_end && k < m_queue.size(); ++k)
    wait += m_queue[k].budget_s > 0 ? m_queue[k].budget_s : unknown_budget_s;
  return wait;
}

void supervisor::authenticated(pending_conn& p, std::optional<std::uint64_t> ticket,
                               double budget_s, std::chrono::milliseconds nccl_budget) {
  set_nonblocking(p.fd.get(), false);
  const auto now = steady::now();
  // Clients turned away earlier and still expected back come first: a newcomer, or a client
  // whose ticket expired, is behind all of them.
  const std::size_t ahead = m_tickets.ahead_of(ticket, now);
  const std::size_t max_queue = m_options.limits.max_queue;
  const std::size_t room = max_queue > m_queue.size() ? max_queue - m_queue.size() : 0;
  const bool idle = !m_session && m_queue.empty();
  if ((idle && ahead == 0) || room > ahead) {
    if (ticket) m_tickets.redeem(*ticket);
    admit(client_conn{std::move(p.fd), p.peer, budget_s, ticket,
                      ticket ? *ticket : m_tickets.draw(), nccl_budget});
    return;
  }
  // Busy: come back when enough sessions should have ended to leave room for this client.
  const double retry = std::clamp(std::ceil(expected_wait_s(ahead + 1 - room)), 1.0, 60.0);
  const std::optional<std::uint64_t> id = m_tickets.turn_away(ticket, retry, now);
  const std::size_t position = m_queue.size() + ahead + 1;
  nlohmann::json body{
      {"reason", fmt::format("{} client(s) are waiting (--max-queue), {} ahead of this one",
                             m_queue.size(), position - 1)},
      {"retry_after_s", retry},
      {"position", position}};
  if (id) body["ticket"] = *id;
  send_quietly(p.fd.get(), msg_type::busy, std::move(body));
  log(fmt::format("{}: busy: {} client(s) waiting; ticket {}, place {} in line, retry after {} s",
                  p.peer, m_queue.size(), id ? std::to_string(*id) : std::string("none"), position,
                  retry));
}

// Into the line by its order: a client that comes back with its ticket goes ahead of the ones
// that arrived after it was first turned away.
void supervisor::admit(client_conn c) {
  const auto at =
      std::upper_bound(m_queue.begin(), m_queue.end(), c.order,
                       [](std::uint64_t o, const client_conn& q) { return o < q.order; });
  const auto index = static_cast<std::size_t>(std::distance(m_queue.begin(), at));
  if (!m_session && index == 0 && !m_tickets.earlier_due(c.order, steady::now())) {
    m_queue.push_front(std::move(c));
    start_session();
    return;
  }
  admit_waiting(std::move(c), index);  // behind the session, or an earlier client due back
}

void supervisor::admit_waiting(client_conn c, std::size_t index) {
  const auto at = m_queue.begin() + static_cast<std::ptrdiff_t>(index);
  log(fmt::format("{}: queued at position {}{}", c.peer, index + 1,
                  c.ticket ? fmt::format(" (ticket {})", *c.ticket) : std::string()));
  m_queue.insert(at, std::move(c));
  for (std::size_t i = index; i < m_queue.size(); ++i)
    send_quietly(m_queue[i].fd.get(), msg_type::queued, {{"position", i + 1}});
  if (m_session) {
    const char byte = 1;
    [[maybe_unused]] const auto n = ::write(m_session->others_waiting.get(), &byte, 1);
  }
}

// Serves the queue's first client in a child process. The supervisor is single-threaded and
// never loads a transport library, so the child starts from a clean state.
void supervisor::start_session() {
  client_conn next = std::move(m_queue.front());
  m_queue.pop_front();
  if (!m_options.isolate) {
    const std::string iface = interface_of_address(local_ip(next.fd.get()));
    control_channel channel(std::move(next.fd), where{"", next.peer, iface});
    try {
      serve_session(m_options, channel, m_listen, -1, next.nccl_budget);
    } catch (const std::exception& e) {
      log(fmt::format("{}: client dropped: {}", next.peer, e.what()));
    }
    ++m_served;
    m_idle_deadline = deadline_in(m_options.timeouts.idle);
    return;
  }
  std::array<int, 2> pipe_fds{};
  if (::pipe2(pipe_fds.data(), O_CLOEXEC | O_NONBLOCK) != 0) pipe_fds = {-1, -1};
  unique_fd waiting_read(pipe_fds[0]);
  unique_fd waiting_write(pipe_fds[1]);
  if (!m_queue.empty()) {
    const char byte = 1;
    [[maybe_unused]] const auto n = ::write(waiting_write.get(), &byte, 1);
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    send_quietly(next.fd.get(), msg_type::refused,
                 {{"reason", fmt::format("server cannot fork: {}", std::strerror(errno))}});
    return;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    m_listener.reset();
    m_pending.clear();
    m_queue.clear();
    waiting_write.reset();
    int code = 0;
    const std::string iface = interface_of_address(local_ip(next.fd.get()));
    control_channel channel(std::move(next.fd), where{"", next.peer, iface});
    try {
      serve_session(m_options, channel, m_listen, waiting_read.get(), next.nccl_budget);
    } catch (const std::exception& e) {
      log(fmt::format("{}: client dropped: {}", next.peer, e.what()));
      code = 1;
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  log(fmt::format("{}: session started{}", next.peer,
                  next.ticket ? fmt::format(" (ticket {})", *next.ticket) : std::string()));
  m_session =
      session_process{pid, std::move(next), steady::now(), std::move(waiting_write), std::nullopt};
  for (std::size_t i = 0; i < m_queue.size(); ++i)
    send_quietly(m_queue[i].fd.get(), msg_type::queued, {{"position", i + 1}});
}

void supervisor::reap() {
  if (!m_session) return;
  int status = 0;
  const pid_t r = ::waitpid(m_session->pid, &status, WNOHANG);
  if (r == 0) {
    if (m_session->kill_at && steady::now() >= *m_session->kill_at) {
      ::kill(m_session->pid, SIGKILL);
      m_session->kill_at = steady::now() + 1s;
    }
    return;
  }
  const bool clean = r == m_session->pid && WIFEXITED(status) && WEXITSTATUS(status) <= 1;
  if (!clean && !m_stop.load()) {
    const std::string how = r == m_session->pid ? describe_wait_status(status) : "lost";
    log(fmt::format("{}: session ended by {}; the server goes on", m_session->client.peer, how));
    const bool overran = r == m_session->pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
    send_quietly(
        m_session->client.fd.get(), msg_type::error,
        {{"message", overran ? std::string("the server ended its session: a request outlived the "
                                           "server's bounds (a library call that ignores its "
                                           "timeouts)")
                             : fmt::format("the server's session process ended by {} (a transport "
                                           "library failed; see the server's log)",
                                           how)}});
  }
  if (m_stop.load()) {
    send_quietly(m_session->client.fd.get(), msg_type::error,
                 {{"message", "the server is shutting down"}});
  }
  m_session.reset();
  ++m_served;
  m_idle_deadline = deadline_in(m_options.timeouts.idle);
}

// The client hung up: its session gets a second to notice, then ends.
void supervisor::watch_session(short revents) {
  if (!m_session || m_session->kill_at) return;
  if ((revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) m_session->kill_at = steady::now() + 1s;
}

void supervisor::expire_pending() {
  const auto now = steady::now();
  for (auto it = m_pending.begin(); it != m_pending.end();) {
    if (now < it->deadline) {
      ++it;
      continue;
    }
    if (it->received > 0) {
      send_quietly(it->fd.get(), msg_type::refused,
                   {{"reason", "no complete hello within --timeout-handshake"}});
    }
    log(fmt::format("{}: dropped: no hello within --timeout-handshake", it->peer));
    it = m_pending.erase(it);
  }
}

bool supervisor::done() const {
  if (m_stop.load()) return true;
  if (!m_options.once) return false;
  if (m_served > 0) return !m_session;
  if (m_session || !m_queue.empty() || !m_pending.empty()) return false;
  return steady::now() >= m_idle_deadline;
}

void supervisor::shut_down() {
  for (auto& q : m_queue)
    send_quietly(q.fd.get(), msg_type::refused, {{"reason", "the server is shutting down"}});
  m_queue.clear();
  if (!m_session) return;
  ::kill(m_session->pid, SIGTERM);  // a session inside a library call may not hear it
  const auto hard = steady::now() + 500ms;
  while (m_session) {
    if (steady::now() >= hard && !m_session->kill_at) {
      ::kill(m_session->pid, SIGKILL);
      m_session->kill_at = steady::now() + 1s;
    }
    reap();
    if (m_session) ::poll(nullptr, 0, 10);
  }
}

int supervisor::run() {
  const int backlog =
      static_cast<int>(std::min<std::size_t>(4096, 4 * m_options.limits.max_pending + 64));
  m_listener = listen_tcp(m_listen, m_options.port, where{"control listen", m_listen, ""}, backlog);
  set_nonblocking(m_listener.get(), true);
  const std::uint16_t port = local_port(m_listener.get());
  log(fmt::format("listening on {} (control protocol {}{})",
                  endpoint{m_listen.empty() ? "*" : m_listen, port}.to_string(),
                  control_protocol_version,
                  m_options.token.empty() ? ", no token" : ", token required"));
  const server_limits& l = m_options.limits;
  log(
      fmt::format("limits per case: memory {}, {} iterations a phase, {} a phase, {} to connect; "
                  "{} a session",
                  format_size(l.max_case_memory), l.max_iterations,
                  format_seconds(std::chrono::duration<double>(l.max_case).count()),
                  format_seconds(std::chrono::duration<double>(l.max_connect).count()),
                  format_size(l.max_session_bytes)));
  if (m_options.token.empty() && !is_loopback(m_listen))
    log("warning: no --token, so anyone who reaches this port can run cases on this host");
  if (m_options.ready_fd) {
    const std::string line = fmt::format("{}\n", port);
    [[maybe_unused]] const auto written = ::write(*m_options.ready_fd, line.data(), line.size());
    ::close(*m_options.ready_fd);
  }
  // Learnt once here, inherited by every session (a client's hello waits in the backlog).
  prepare_context(m_options.transports);
  m_idle_deadline = deadline_in(m_options.timeouts.idle);
  while (!done()) {
    reap();
    // The queue's first waits for a client turned away before it that is still due back.
    if (!m_session && !m_queue.empty() &&
        !m_tickets.earlier_due(m_queue.front().order, steady::now()))
      start_session();
    // Order: the listener, the session's client, the queue, then the pending hellos (which may
    // start a session or grow the queue, so they come last).
    std::vector<pollfd> fds{{m_listener.get(), POLLIN, 0}};
    if (m_session) fds.push_back({m_session->client.fd.get(), POLLRDHUP, 0});
    for (const auto& q : m_queue) fds.push_back({q.fd.get(), POLLRDHUP, 0});
    for (const auto& p : m_pending) fds.push_back({p.fd.get(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 50) < 0 && errno != EINTR)
      throw step_error(error_kind::error, where{"control poll", m_listen, ""},
                       std::strerror(errno));
    std::size_t k = 1;
    if (m_session) watch_session(fds[k++].revents);
    for (auto it = m_queue.begin(); it != m_queue.end(); ++k) {
      if ((fds[k].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {  // it hung up
        log(fmt::format("{}: left the queue", it->peer));
        it = m_queue.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = m_pending.begin(); it != m_pending.end(); ++k) {
      const bool keep = fds[k].revents == 0 || read_hello(*it);
      it = keep ? std::next(it) : m_pending.erase(it);
    }
    if ((fds[0].revents & POLLIN) != 0) accept_all();
    expire_pending();
  }
  if (m_options.once && m_served == 0 && !m_stop.load())
    log("no client came within --timeout-idle; exiting");
  shut_down();
  return 0;
}

}  // namespace

std::string listen_address(const server_options& options) {
  if (!options.listen_host.empty()) return options.listen_host;
  return options.token.empty() ? "127.0.0.1" : "";
}

int run_server(const server_options& options, const std::atomic<bool>& stop) {
  return supervisor(options, stop).run();
}

}  // namespace pairperf
