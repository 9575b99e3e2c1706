#include "harness/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/control.h"
#include "core/hex.h"
#include "core/interfaces.h"
#include "core/stats.h"
#include "core/units.h"
#include "harness/case_session.h"
#include "harness/case_worker.h"
#include "harness/client_hello.h"
#include "harness/client_results.h"
#include "harness/context.h"
#include "harness/phase_plan.h"
#include "harness/token.h"
#include "host/gpus.h"
#include "host/noise.h"
#include "host/pair.h"

namespace pairperf {
namespace {

// A failure of the control channel itself: the server's state is unknown, the run stops.
class control_lost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

case_status status_of(error_kind kind) {
  return kind == error_kind::unreachable ? case_status::unreachable : case_status::error;
}

// A case that ended before (or instead of) measuring.
case_result ended(case_result r, case_status status, std::string message) {
  r.status = status;
  r.message = std::move(message);
  return r;
}

// A case that ended on a step_error: its kind decides the status, its errno the error code.
case_result failed(case_result r, const step_error& e) {
  r.status = status_of(e.kind());
  r.message = e.what();
  if (e.sys_errno() != 0) r.error_code = errno_name(e.sys_errno());
  return r;
}

class client_run {
 public:
  client_run(const client_options& options, reporter& out)
      : m_options(options), m_out(out), m_tally(options.expectations.size()) {}

  run_summary run();

 private:
  void hello();
  nlohmann::json open_channel();
  bool come_back(std::size_t next, std::string& not_run);
  [[nodiscard]] nlohmann::json own_context() const;
  case_result run_case(const test_case& c);
  std::size_t run_supervised(std::size_t first);
  // A case begins: at `at` where its worker said when (steady_clock is CLOCK_MONOTONIC, one
  // clock for every process of the host), else now.
  void begin(const test_case& c, steady::time_point at = steady::now());
  void finish(case_result& r);
  server_view phase(case_session& s, const char* name, std::uint64_t n, pattern_outcome& mine,
                    phase_mode mode, std::chrono::nanoseconds budget = {});
  std::uint64_t calibrate(case_session& s, std::uint64_t warmed, pattern_outcome& mine);
  double pilot_rate(case_session& s, std::uint64_t warmed, pattern_outcome& mine, double pilot);
  server_view measure(case_session& s, std::uint64_t planned, pattern_outcome& mine,
                      std::uint64_t& done);
  template <class F>
  auto control(F&& f) -> decltype(f());
  [[nodiscard]] where at(const std::string& step) const {
    return where{step, m_options.server.to_string(), m_iface};
  }

  const client_options& m_options;
  reporter& m_out;
  std::optional<control_channel> m_channel;
  std::string m_iface;    // local interface of the control connection
  std::string m_peer_ip;  // numeric server address as seen on the control connection
  std::optional<expectation_hint> m_hint;  // why shared memory is impossible for this pair
  bool m_reconnect = false;   // a case worker died mid-case: the channel's state is unknown
  std::string m_server_host;  // the server's hostname from the first hello
  nlohmann::json m_reconnects = nlohmann::json::array();  // each time the server came back
  run_summary m_sum;
  expectation_tally m_tally;
  overhead_meter m_overhead;
  steady::time_point m_case_start{};
  const timeouts& t() const { return m_options.config.timeouts; }
};

// Runs a control-channel operation; any failure there ends the run.
template <class F>
auto client_run::control(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const step_error& e) {
    if (e.kind() == error_kind::refused || e.kind() == error_kind::error)
      throw;  // the peer answered
    throw control_lost(e.what());
  }
}

// What this side knows before the server answers: enough for a valid results file when the
// server is never reached.
nlohmann::json client_run::own_context() const {
  return {{"tool", tool_context()},
          {"argv", redact_argv(m_options.argv)},
          {"time_utc", utc_timestamp()},
          {"server_address", m_options.server.to_string()},
          {"config", m_options.config},
          {"client", host_context()},
          {"env", {{"client", relevant_environment()}}}};
}

// Connects the control channel and says hello (waiting out a busy server); returns the server's
// hello.
nlohmann::json client_run::open_channel() {
  auto opened = open_hello(m_options.server, "control connect", hello_of(m_options), t());
  m_iface = opened.first.place().iface;
  m_peer_ip = peer_ip(opened.first.fd());
  m_channel.emplace(std::move(opened.first));
  return std::move(opened.second);
}

void client_run::hello() {
  const nlohmann::json reply = open_channel();
  nlohmann::json ctx = own_context();
  const nlohmann::json server_host = reply.value("host", nlohmann::json::object());
  if (const auto blocked = shared_memory_blocked(compare_hosts(ctx.at("client"), server_host)))
    m_hint = expectation_hint{blocked->cause, blocked->fix};
  ctx["server_ip"] = m_peer_ip;
  ctx["server_listen"] = reply.value("listen", std::string());
  ctx["control_iface"] = m_iface;
  ctx["server"] = server_host;
  m_server_host = server_host.value("hostname", std::string());
  ctx["server_tool"] = reply.value("tool", nlohmann::json::object());
  ctx["env"]["server"] = reply.value("env", nlohmann::json::object());
  m_out.report_context(ctx);
}

// The control connection was lost before case `next`: a server that died or was restarted may
// answer again. Tries every quarter second within options.reconnect (a signal ends it); the same
// host must answer. False, with why in `not_run`, when it does not.
bool client_run::come_back(std::size_t next, std::string& not_run) {
  const auto bound = m_options.reconnect;
  if (bound <= std::chrono::nanoseconds(0)) return false;
  const auto start = steady::now();
  fmt::print(stderr,
             "pairperf: the server went away before case {}; trying to reach it again for "
             "up to {}\n",
             next + 1, format_seconds(std::chrono::duration<double>(bound).count()));
  std::string last = "no attempt";
  while (steady::now() - start < bound) {
    if (m_options.interrupted != nullptr && m_options.interrupted->load() != 0) return false;
    try {
      m_channel.reset();
      const nlohmann::json reply = open_channel();
      const std::string host =
          reply.value("host", nlohmann::json::object()).value("hostname", std::string());
      if (!m_server_host.empty() && host != m_server_host) {
        m_channel.reset();
        not_run = fmt::format("not run: {} answered in place of {}, whose cases these are",
                              host.empty() ? "another server" : host, m_server_host);
        return false;
      }
      const double waited = seconds_since(start);
      m_reconnects.push_back({{"before_case", next}, {"waited_s", waited}});
      fmt::print(stderr, "pairperf: the server answered again after {}\n", format_seconds(waited));
      ++m_sum.reconnects;
      return true;
    } catch (const server_stayed_busy& e) {
      last = e.what();
    } catch (const step_error& e) {
      last = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  m_channel.reset();
  not_run = fmt::format("not run: the server did not answer again within {}: {}",
                        format_seconds(std::chrono::duration<double>(bound).count()), last);
  return false;
}

void client_run::begin(const test_case& c, steady::time_point at) {
  m_out.case_started(c, m_options.cases.size());
  m_case_start = at;
}

// A case's result, from whichever process ran it: its wall time since begin(), the expectations,
// the counts, the fixed-cost figure, the reporter.
void client_run::finish(case_result& r) {
  r.wall_s = seconds_since(m_case_start);
  m_overhead.add(r);
  apply_expectations(m_options.expectations, r, m_hint, &m_tally);
  m_sum.count(r);
  m_out.report_result(r);
}

run_summary client_run::run() {
  const auto run_start = steady::now();
  const auto interrupted = [&] {
    return m_options.interrupted != nullptr ? m_options.interrupted->load() : 0;
  };
  const std::vector<test_case>& cases = m_options.cases;
  m_sum.planned = cases.size();
  if ((m_sum.interrupted = interrupted()) != 0) {
    // Stopped before the server was asked anything: a results file with this side's context.
    m_out.report_context(own_context());
    return m_sum;
  }
  try {
    hello();
  } catch (...) {
    m_out.report_context(own_context());
    throw;
  }
  m_overhead.setup_done(seconds_since(run_start));
  std::string not_run;              // why the remaining cases cannot run
  bool tried_to_come_back = false;  // for the current loss of the control connection
  for (std::size_t i = 0; i < cases.size();) {
    if ((m_sum.interrupted = interrupted()) != 0) break;  // the cases not run are left out
    if (m_sum.aborted && !tried_to_come_back) {
      tried_to_come_back = true;
      if (come_back(i, not_run)) {
        m_sum.aborted = false;
        m_reconnect = false;
        tried_to_come_back = false;
        continue;
      }
    }
    if (!m_sum.aborted && m_reconnect) {
      // The last case's worker was ended mid-case: start over on a fresh control connection.
      m_reconnect = false;
      m_channel.reset();
      try {
        (void)control([&] { return open_channel(); });
      } catch (const std::exception& e) {
        m_sum.aborted = true;
        not_run = fmt::format("not run: reconnecting after the last case failed: {}", e.what());
      }
    }
    if (!m_sum.aborted && m_options.isolate) {
      i = run_supervised(i);
      continue;
    }
    const test_case& c = cases[i++];
    begin(c);
    case_result r;
    r.test = c;
    if (m_sum.aborted) {
      r.status = case_status::error;
      r.message = not_run.empty() ? "not run: the control connection to the server was lost earlier"
                                  : std::exchange(not_run, {});
    } else {
      try {
        r = run_case(c);
      } catch (const control_lost& e) {
        m_sum.aborted = true;
        r = ended(std::move(r), case_status::error, e.what());
      }
    }
    finish(r);
  }
  if (m_sum.interrupted == 0) m_sum.interrupted = interrupted();
  if (!m_sum.aborted && m_sum.interrupted == 0 && !m_reconnect)
    control(
        [&] { m_channel->send(msg_type::bye, nlohmann::json::object(), "bye", t().handshake); });
  m_sum.unjudged = m_tally.unjudged(m_options.expectations);
  m_out.amend_context("overhead", m_overhead.summary(seconds_since(run_start)));
  if (!m_reconnects.empty()) m_out.amend_context("reconnects", m_reconnects);
  return m_sum;
}

// Runs cases from `first` on in one supervised child (case_worker.h) for as long as they may share
// it: a transport library is loaded and initialised once per worker, not once per case
// (libfabric: 0.3 s). The child shares the control connection and leaves it between two messages
// when it ends; it reports each case's start and result as it goes. A worker that dies or is
// ended leaves the connection in an unknown state, so the next case starts on a new one. Returns
// the index of the first case not run.
std::size_t client_run::run_supervised(std::size_t first) {
  const std::vector<test_case>& cases = m_options.cases;
  std::size_t next = first;  // the first case whose result has not been reported here
  bool running = true;       // cases[next] has begun (the first one's wall time holds the fork)
  begin(cases[first]);
  const worker_outcome w = run_in_worker(
      [&] {
        for (std::size_t i = first; i < cases.size(); ++i) {
          // When it starts, by the worker's clock: this process may read the line late (both
          // CPUs busy with the case), and the case's wall time must still hold its measurement.
          const auto at = std::chrono::duration_cast<std::chrono::nanoseconds>(
              steady::now().time_since_epoch());
          report_message(nlohmann::json{{"start", i}, {"at_ns", at.count()}}.dump());
          nlohmann::json out;
          case_result r;
          try {
            r = run_case(cases[i]);
            r.worker_case = static_cast<unsigned>(i - first + 1);
            out["result"] = r;
          } catch (const control_lost& e) {
            out["control_lost"] = e.what();
          }
          report_message(out.dump());
          if (out.contains("control_lost")) break;
          if (i + 1 < cases.size() && !shares_worker(cases[i], r, cases[i + 1])) break;
        }
        return std::string();
      },
      m_options.interrupted, std::chrono::seconds(2),
      [&](const std::string& line) {
        const auto j = nlohmann::json::parse(line);
        if (j.contains("start")) {
          if (j.at("start").get<std::size_t>() != next || (running && next != first))
            throw std::logic_error("a case worker reported its cases out of order");
          if (!running) {
            const std::chrono::nanoseconds at{j.value("at_ns", std::int64_t{0})};
            begin(cases[next],
                  at.count() > 0
                      ? steady::time_point(std::chrono::duration_cast<steady::duration>(at))
                      : steady::now());
          }
          running = true;
          return;
        }
        case_result r;
        if (j.contains("control_lost")) {
          m_sum.aborted = true;
          r.test = cases[next];
          r = ended(std::move(r), case_status::error, j.at("control_lost").get<std::string>());
        } else {
          r = j.at("result").get<case_result>();
        }
        running = false;
        ++next;
        finish(r);
      });
  if (w.how == worker_outcome::end::finished) return next;
  m_reconnect = true;
  if (!running) return next;  // it ended between two cases
  case_result r = unfinished_case(cases[next], w, m_options.server.to_string(), m_iface);
  r.worker_case = static_cast<unsigned>(next - first + 1);
  finish(r);
  return next + 1;
}

case_result client_run::run_case(const test_case& c) {
  case_result r;
  r.test = c;
  const std::string label =
      fmt::format("case {} ({} {} {})", c.index + 1, c.test, format_size(c.size_bytes),
                  c.iface.empty() ? "routed" : c.iface);
  transport_params params{c, m_options.config.transport, side::client, m_peer_ip, "", t().connect};
  std::optional<case_session> session;
  report_stage(label + " setup", t().per_case + t().connect);
  try {
    session.emplace(m_options.config, params);
  } catch (const case_skipped& e) {
    return ended(std::move(r), case_status::skipped, e.what());
  } catch (const step_error& e) {
    return failed(std::move(r), e);
  } catch (const std::exception& e) {
    return ended(std::move(r), case_status::error, format_where(at(label + " setup"), e.what()));
  }
  const nlohmann::json reply =
      control([&] {
        m_channel->send(msg_type::case_,
                        {{"case", c},
                         {"config", m_options.config},
                         {"address", to_hex(session->local_address())},
                         {"regions", session->regions()}},
                        label + " setup", t().handshake);
        // The server allocates and registers the case's buffers before it answers (up to a GiB),
        // and may still be connecting the previous case's data path when this arrives.
        return m_channel->receive(label + " setup", t().per_case + t().connect);
      }).body;
  if (reply.at("type") == "error") {
    return ended(std::move(r), parse_case_status(reply.value("status", "error")),
                 "server: " + reply.value("message", "no reason given"));
  }
  if (reply.at("type") != "ready")
    throw control_lost(
        format_where(at(label + " setup"), "unexpected reply " + reply.at("type").dump()));
  report_stage(label + " data connect", t().connect + t().handshake);
  try {
    session->connect(from_hex(reply.at("address").get<std::string>()), reply.at("regions"));
  } catch (const step_error& e) {
    return failed(std::move(r), e);
  } catch (const std::exception& e) {
    return ended(std::move(r), case_status::error,
                 format_where(at(label + " data connect"), e.what()));
  }
  try {
    pattern_outcome mine;
    const bool by_time = !m_options.config.iterations.has_value();
    r.warmup_iterations =
        std::max<std::uint64_t>(warmup_iterations(m_options.config, c), by_time ? 2 : 0);
    if (r.warmup_iterations > 0)
      phase(*session, "warmup", r.warmup_iterations, mine, phase_mode::unmeasured);
    const std::uint64_t planned =
        by_time ? calibrate(*session, r.warmup_iterations, mine) : *m_options.config.iterations;
    const unsigned reps = std::max(1U, m_options.config.repeat);
    std::vector<std::int64_t> pooled;  // round trips of every repetition (ping-pong)
    for (unsigned i = 0; i < reps; ++i) {
      const server_view theirs = measure(*session, planned, mine, r.iterations);
      // Both sides' meters add up the measured phases so far: the last judgement covers all.
      r.host_noise =
          judge_noise(session->noise().side(), theirs.body.value("host_noise", nlohmann::json()),
                      m_options.config.noise_threshold);
      compose_result(r, *session, mine, theirs);
      if (reps == 1) break;
      r.repetitions.push_back(repetition{r.iterations, r.elapsed_s, r.latency_s, r.bandwidth_Bps,
                                         r.message_rate_per_s});
      if (c.pattern == pattern_kind::pingpong) {
        const auto s = session->samples().samples();
        pooled.insert(pooled.end(), s.begin(), s.end());
      }
      if (r.status == case_status::fail) break;  // corrupt bytes: no point repeating
    }
    if (r.repetitions.size() > 1) merge_repetitions(r, pooled);
  } catch (const step_error& e) {
    r = failed(std::move(r), e);
    // The data path was up: what carried it (for TCP its retransmissions) says why it failed, and
    // that it connected at all (doctor: a link that reaches but loses, not one that does not).
    try {
      r.provenance = session->describe();
      r.provenance->server = nlohmann::json::object();  // the server's side did not answer
    } catch (const std::exception&) {
    }
  }
  return r;
}

// The measured iteration count under a time budget (a ping-pong's timed phases take it as their
// cap, twice over): unmeasured pilot phases re-derive the rate the warm-up missed (phase_plan.h).
std::uint64_t client_run::calibrate(case_session& s, std::uint64_t warmed, pattern_outcome& mine) {
  const run_config& cfg = m_options.config;
  return planned_count(cfg, pilot_rate(s, warmed, mine, pilot_budget_ns(cfg)));
}

// The rate (ns per iteration) of unmeasured phases over `pilot` ns after the warm-up. A timed
// ping-pong runs one phase for that long; other patterns run growing counts (next_pilot_count).
double client_run::pilot_rate(case_session& s, std::uint64_t warmed, pattern_outcome& mine,
                              double pilot) {
  const run_config& cfg = m_options.config;
  const double warm_rate = per_iteration(mine, warmed);
  if (s.timed()) {
    phase(s, "warmup", timed_cap(pilot / warm_rate, cfg), mine, phase_mode::unmeasured,
          std::chrono::nanoseconds(static_cast<std::int64_t>(pilot)));
    return per_iteration(mine, mine.messages_sent);
  }
  double spent = elapsed_ns(mine), per_iter = warm_rate, pilot_spent = 0;
  std::uint64_t last = warmed, piloted = 0;
  while (const std::uint64_t n = next_pilot_count(cfg, pilot, spent, per_iter, last, warmed)) {
    phase(s, "warmup", n, mine, phase_mode::unmeasured);
    spent += elapsed_ns(mine);
    pilot_spent += elapsed_ns(mine);
    piloted += n;
    last = n;
    per_iter = pilot_spent / static_cast<double>(piloted);  // the pilot's rate, not the warm-up's
  }
  return per_iter;
}

// One measurement of `planned` iterations (a fixed count: one phase). Under a time budget a
// timed ping-pong runs one phase for the budget, capped at twice the count; other patterns run
// phases the server adds up (samples, counts, host noise): the first half the budget at the
// calibrated rate, then next_measure_count's.
server_view client_run::measure(case_session& s, std::uint64_t planned, pattern_outcome& mine,
                                std::uint64_t& done) {
  const run_config& cfg = m_options.config;
  if (cfg.iterations) {
    done = planned;
    return phase(s, "measure", planned, mine, phase_mode::measure);
  }
  if (s.timed()) {
    server_view theirs =
        phase(s, "measure", timed_cap(static_cast<double>(planned), cfg), mine, phase_mode::measure,
              std::min<std::chrono::nanoseconds>(cfg.duration, t().per_case / 2));
    done = mine.messages_sent;
    return theirs;
  }
  done = std::max<std::uint64_t>(planned / 2, 1);
  server_view theirs = phase(s, "measure", done, mine, phase_mode::measure);
  while (const std::uint64_t next = next_measure_count(cfg, elapsed_ns(mine), done)) {
    theirs = phase(s, "measure", next, mine, phase_mode::measure_more);
    done += next;
  }
  return theirs;
}

server_view client_run::phase(case_session& s, const char* name, std::uint64_t n,
                              pattern_outcome& mine, phase_mode mode,
                              std::chrono::nanoseconds budget) {
  const test_case& c = s.test();
  const std::string step = fmt::format("case {} {}", c.index + 1, name);
  // The request, the run and the results, each under its own bound, told to the supervisor as
  // it begins: a library call that never returns (seen under load: libfabric shm once its peer
  // was killed) is ended a grace period after the run's own deadline, not after all three bounds.
  report_stage(step, t().handshake + t().per_case + t().connect);
  control([&] {
    nlohmann::json body{{"phase", name}, {"iterations", n}};
    if (mode == phase_mode::measure_more) body["continues"] = true;
    if (budget.count() > 0) body["budget_s"] = std::chrono::duration<double>(budget).count();
    m_channel->send(msg_type::run, std::move(body), step, t().handshake);
    return m_channel->expect(msg_type::running, step, t().per_case + t().connect);
  });
  std::optional<step_error> failed;
  try {
    report_stage(step, t().per_case);  // the run's deadline (case_session::phase_run)
    mine = s.run(n, at(step), mode, budget);
    if (budget.count() > 0) {  // the timed phase's end (control.h)
      report_stage(step, 2 * t().handshake + 2 * t().per_case);  // stop, stopped, closing message
      control([&] {
        m_channel->send(msg_type::stop, {{"iterations", mine.messages_sent}}, step, t().handshake);
        return m_channel->expect(msg_type::stopped, step, t().per_case + t().handshake);
      });
      s.close_timed_phase(at(step));
    }
  } catch (const step_error& e) {
    failed = e;
  }
  // The server answers with its results or its own failure; if it cannot answer, the run ends.
  std::optional<message> answer;
  report_stage(step, t().per_case + t().handshake);
  try {
    answer = control(
        [&] { return m_channel->receive(step + " results", t().per_case + t().handshake); });
  } catch (const control_lost& lost) {
    if (failed) throw control_lost(fmt::format("{}; then {}", failed->what(), lost.what()));
    throw;
  }
  if (failed) throw *failed;
  const message& reply = *answer;
  if (reply.type == msg_type::error) {
    throw step_error(error_kind::error, at(step),
                     "server: " + reply.body.value("message", "no reason given"));
  }
  if (reply.type != msg_type::results)
    throw control_lost(
        format_where(at(step), fmt::format("unexpected reply '{}'", to_string(reply.type))));
  return server_view{reply.body};
}

}  // namespace

run_summary run_client(const client_options& options, reporter& out) {
  client_run run(options, out);
  return run.run();
}

}  // namespace pairperf
