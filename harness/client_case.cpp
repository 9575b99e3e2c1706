// The client's side of one case (client_run.h): its session and the server's, the data
// connection, then the phases the server runs with it (warm-up, calibration, measurement).
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "core/hex.h"
#include "core/units.h"
#include "harness/case_worker.h"
#include "harness/client_run.h"
#include "harness/phase_plan.h"
#include "host/noise.h"

namespace pairperf {
namespace {

case_status status_of(error_kind kind) {
  return kind == error_kind::unreachable ? case_status::unreachable : case_status::error;
}

}  // namespace

case_result client_run::ended(case_result r, case_status status, std::string message) {
  r.status = status;
  r.message = std::move(message);
  return r;
}

case_result client_run::failed(case_result r, const step_error& e) {
  r.status = status_of(e.kind());
  r.message = e.what();
  if (e.sys_errno() != 0) r.error_code = errno_name(e.sys_errno());
  return r;
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
  const nlohmann::json reply = ask_server(c, *session, label);
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
  measure_case(c, *session, r);
  return r;
}

nlohmann::json client_run::ask_server(const test_case& c, case_session& s,
                                      const std::string& label) {
  return control([&] {
           m_channel->send(msg_type::case_,
                           {{"case", c},
                            {"config", m_options.config},
                            {"address", to_hex(s.local_address())},
                            {"regions", s.regions()}},
                           label + " setup", t().handshake);
           // The server allocates and registers the case's buffers before it answers (up to a
           // GiB), and may still be connecting the previous case's data path when this arrives.
           return m_channel->receive(label + " setup", t().per_case + t().connect);
         })
      .body;
}

void client_run::measure_case(const test_case& c, case_session& s, case_result& r) {
  try {
    pattern_outcome mine;
    const bool by_time = !m_options.config.iterations.has_value();
    r.warmup_iterations =
        std::max<std::uint64_t>(warmup_iterations(m_options.config, c), by_time ? 2 : 0);
    if (r.warmup_iterations > 0)
      phase(s, "warmup", r.warmup_iterations, mine, phase_mode::unmeasured);
    const std::uint64_t planned =
        by_time ? calibrate(s, r.warmup_iterations, mine) : *m_options.config.iterations;
    const unsigned reps = std::max(1U, m_options.config.repeat);
    std::vector<std::int64_t> pooled;  // round trips of every repetition (ping-pong)
    for (unsigned i = 0; i < reps; ++i) {
      const server_view theirs = measure(s, planned, mine, r.iterations);
      // Both sides' meters add up the measured phases so far: the last judgement covers all.
      r.host_noise =
          judge_noise(s.noise().side(), theirs.body.value("host_noise", nlohmann::json()),
                      m_options.config.noise_threshold);
      compose_result(r, s, mine, theirs);
      if (reps == 1) break;
      r.repetitions.push_back(repetition{r.iterations, r.elapsed_s, r.latency_s, r.bandwidth_Bps,
                                         r.message_rate_per_s});
      if (c.pattern == pattern_kind::pingpong) {
        const auto samples = s.samples().samples();
        pooled.insert(pooled.end(), samples.begin(), samples.end());
      }
      if (r.status == case_status::fail) break;  // corrupt bytes: no point repeating
    }
    if (r.repetitions.size() > 1) merge_repetitions(r, pooled);
  } catch (const step_error& e) {
    r = failed(std::move(r), e);
    // The data path was up: what carried it (for TCP its retransmissions) says why it failed, and
    // that it connected at all (doctor: a link that reaches but loses, not one that does not).
    try {
      r.provenance = s.describe();
      r.provenance->server = nlohmann::json::object();  // the server's side did not answer
    } catch (const std::exception&) {
    }
  }
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

}  // namespace pairperf
