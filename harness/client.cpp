#include "harness/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <thread>

#include "core/control.h"
#include "core/interfaces.h"
#include "core/units.h"
#include "harness/case_session.h"
#include "harness/case_worker.h"
#include "harness/client_hello.h"
#include "harness/client_results.h"
#include "harness/client_run.h"
#include "harness/context.h"
#include "harness/token.h"
#include "host/pair.h"

namespace pairperf {

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

namespace {

// Each transport of this run whose two sides' libraries cannot be trusted together (context.h:
// library_mismatches), said before the first case and kept in the context. Returns, per
// transport, the note its failed cases carry.
std::map<std::string, std::string> note_library_mismatches(const std::vector<test_case>& cases,
                                                           nlohmann::json& ctx) {
  std::map<std::string, std::string> notes;
  for (const auto& m : library_mismatches(ctx)) {
    const bool used = std::any_of(cases.begin(), cases.end(),
                                  [&](const test_case& c) { return c.transport == m.transport; });
    if (!used) continue;
    fmt::print(stderr, "pairperf: warning: {}: {}; {}\n", m.transport, m.problem, m.fix);
    ctx["library_mismatch"][m.transport] = {{"problem", m.problem}, {"fix", m.fix}};
    notes[m.transport] = fmt::format(
        "; the client's {} library is version {} and the server's {}: two versions that may not "
        "work together (context: library_mismatch)",
        m.transport, m.client_version, m.server_version);
  }
  return notes;
}

}  // namespace

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
  m_mismatch_notes = note_library_mismatches(m_options.cases, ctx);
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
  if (r.status != case_status::ok && r.status != case_status::skipped) {
    if (const auto note = m_mismatch_notes.find(r.test.transport); note != m_mismatch_notes.end())
      r.message += note->second;
  }
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

run_summary run_client(const client_options& options, reporter& out) {
  client_run run(options, out);
  return run.run();
}

}  // namespace pairperf
