#include "harness/client_results.h"

#include <fmt/format.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/self_probe.h"
#include "core/stats.h"
#include "core/units.h"
#include "harness/client.h"
#include "host/gpus.h"
#include "host/noise.h"

namespace pairperf {
namespace {

double per_second(double count, std::int64_t ns) {
  return ns > 0 ? count * 1e9 / static_cast<double>(ns) : 0;
}

// The receiver's figure (none if it saw nothing arrive).
std::optional<double> receiver_rate(std::uint64_t messages, std::int64_t span_ns, double size) {
  if (messages == 0 || span_ns <= 0) return std::nullopt;
  return per_second(static_cast<double>(messages) * size, span_ns);
}

}  // namespace

case_result unfinished_case(const test_case& c, const worker_outcome& w, const std::string& server,
                            const std::string& iface) {
  case_result r;
  r.test = c;
  r.status = case_status::error;
  std::string words = w.last_words;
  while (!words.empty() && (words.back() == '\n' || words.back() == ' ')) words.pop_back();
  if (words.size() > 600) {
    const auto cut = words.rfind('\n', words.size() - 600);
    words = "..." + words.substr(cut == std::string::npos ? words.size() - 600 : cut + 1);
  }
  const std::string tail =
      words.empty() ? std::string("(it wrote nothing to stderr)") : "its last words: " + words;
  const auto at = [&](const std::string& step) { return where{step, server, iface}; };
  switch (w.how) {
    case worker_outcome::end::finished:
      break;
    case worker_outcome::end::interrupted:
      r.message = fmt::format("interrupted during {}", w.stage.empty() ? "setup" : w.stage);
      break;
    case worker_outcome::end::overran:
      r.message = format_where(
          at(w.stage),
          fmt::format("did not end within its bound ({} and a grace period; a library call that "
                      "ignores the timeouts, such as a blocking connect()): the case was ended; {}",
                      format_seconds(std::chrono::duration<double>(w.stage_bound).count()), tail));
      r.error_code = "ETIMEDOUT";
      break;
    case worker_outcome::end::died:
      r.message = format_where(
          at(w.stage.empty() ? "case setup" : w.stage),
          fmt::format("the case's process ended by {} (the transport library failed; the sweep "
                      "goes on); {}",
                      w.died_how, tail));
      break;
  }
  return r;
}

bool shares_worker(const test_case& a, const case_result& a_result, const test_case& b) {
  return a.transport == b.transport &&
         (a_result.status == case_status::ok || a_result.status == case_status::skipped);
}

void overhead_meter::add(const case_result& r) {
  if (r.wall_s <= 0 || (r.status != case_status::ok && r.status != case_status::fail)) return;
  m_measured_s += r.elapsed_s;
  m_per_case_s.push_back(std::max(0.0, r.wall_s - r.elapsed_s));
}

nlohmann::json overhead_meter::summary(double run_wall_s) const {
  nlohmann::json j{{"setup_s", m_setup_s},
                   {"run_wall_s", run_wall_s},
                   {"measured_s", m_measured_s},
                   {"cases", m_per_case_s.size()}};
  if (m_per_case_s.empty()) return j;
  const auto [lo, hi] = std::minmax_element(m_per_case_s.begin(), m_per_case_s.end());
  const double total = std::accumulate(m_per_case_s.begin(), m_per_case_s.end(), 0.0);
  j["per_case_s"] = {{"median", median_of(m_per_case_s)},
                     {"mean", total / static_cast<double>(m_per_case_s.size())},
                     {"min", *lo},
                     {"max", *hi}};
  j["share_of_wall"] = run_wall_s > 0 ? (total + m_setup_s) / run_wall_s : 0.0;
  return j;
}

void merge_repetitions(case_result& r, std::vector<std::int64_t>& pooled_round_trips) {
  if (!pooled_round_trips.empty()) r.latency_s = summarize(pooled_round_trips, 0.5e-9);
  std::vector<double> receiver, sender, rate;
  double elapsed = 0;
  for (const auto& rep : r.repetitions) {
    elapsed += rep.elapsed_s;
    if (rep.message_rate_per_s) rate.push_back(*rep.message_rate_per_s);
    if (!rep.bandwidth_Bps) continue;
    if (rep.bandwidth_Bps->receiver_Bps) receiver.push_back(*rep.bandwidth_Bps->receiver_Bps);
    if (rep.bandwidth_Bps->sender_Bps) sender.push_back(*rep.bandwidth_Bps->sender_Bps);
  }
  r.elapsed_s = elapsed;
  if (!rate.empty()) r.message_rate_per_s = median_of(rate);
  if (r.bandwidth_Bps) {
    r.bandwidth_Bps->receiver_Bps =
        receiver.empty() ? std::nullopt : std::optional<double>(median_of(receiver));
    r.bandwidth_Bps->sender_Bps =
        sender.empty() ? std::nullopt : std::optional<double>(median_of(sender));
  }
}

namespace {

std::int64_t to_ns(double seconds) {
  return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

// A one-way stream's figures: the receiver's, the sender's where the receiver sees nothing
// arrive (puts), the client's where it is the receiver (gets).
void stream_figures(case_result& r, case_session& s, const pattern_outcome& mine,
                    const server_view& theirs) {
  const auto size = static_cast<double>(s.test().size_bytes);
  const auto n = static_cast<double>(r.iterations);
  if (s.data_op() == op_kind::put) {  // the target sees nothing arrive: the sender's figure
    r.bandwidth_Bps = bandwidth{std::nullopt, per_second(n * size, mine.send_elapsed_ns)};
    r.message_rate_per_s = per_second(n, mine.send_elapsed_ns);
  } else if (s.data_op() == op_kind::get) {  // the client is the receiver; the target posts nothing
    r.bandwidth_Bps =
        bandwidth{receiver_rate(mine.recv_span_messages, mine.recv_span_ns, size), std::nullopt};
    r.message_rate_per_s =
        per_second(static_cast<double>(mine.recv_span_messages), mine.recv_span_ns);
    r.interval_s = summarize(s.samples().samples(), 1e-9);
  } else {
    const std::int64_t span = to_ns(theirs.seconds("recv_span_s"));
    const auto counted = theirs.body.at("outcome").at("recv_span_messages").get<std::uint64_t>();
    r.bandwidth_Bps =
        bandwidth{receiver_rate(counted, span, size), per_second(n * size, mine.send_elapsed_ns)};
    r.message_rate_per_s = per_second(static_cast<double>(counted), span);
    r.interval_s = theirs.body.at("interval_s").get<sample_stats>();
  }
}

// A bidirectional stream's figures: each direction's, and their sums.
void bidirectional_figures(case_result& r, case_session& s, const pattern_outcome& mine,
                           const server_view& theirs) {
  const auto size = static_cast<double>(s.test().size_bytes);
  const auto n = static_cast<double>(r.iterations);
  const std::int64_t their_span = to_ns(theirs.seconds("recv_span_s"));
  const auto their_counted =
      theirs.body.at("outcome").at("recv_span_messages").get<std::uint64_t>();
  r.client_to_server_Bps = bandwidth{receiver_rate(their_counted, their_span, size),
                                     per_second(n * size, mine.send_elapsed_ns)};
  r.server_to_client_Bps =
      bandwidth{receiver_rate(mine.recv_span_messages, mine.recv_span_ns, size),
                per_second(n * size, to_ns(theirs.seconds("send_elapsed_s")))};
  const auto sum = [](const std::optional<double>& a,
                      const std::optional<double>& b) -> std::optional<double> {
    if (!a || !b) return std::nullopt;
    return *a + *b;
  };
  r.bandwidth_Bps =
      bandwidth{sum(r.client_to_server_Bps->receiver_Bps, r.server_to_client_Bps->receiver_Bps),
                sum(r.client_to_server_Bps->sender_Bps, r.server_to_client_Bps->sender_Bps)};
  // Puts: neither target sees arrivals, so the rate is that of the senders.
  r.message_rate_per_s =
      s.data_op() == op_kind::put
          ? per_second(n, mine.send_elapsed_ns) +
                per_second(n, to_ns(theirs.seconds("send_elapsed_s")))
          : per_second(static_cast<double>(their_counted), their_span) +
                per_second(static_cast<double>(mine.recv_span_messages), mine.recv_span_ns);
  r.interval_s = summarize(s.samples().samples(), 1e-9);
}

// --validate: both sides' checked messages and corrupt bytes; any corrupt byte fails the case.
void add_validation(case_result& r, case_session& s, const server_view& theirs) {
  auto v = s.validated();
  if (!v) return;
  v->messages_checked += theirs.body.at("validation").at("messages_checked").get<std::uint64_t>();
  v->corrupt_bytes += theirs.body.at("validation").at("corrupt_bytes").get<std::uint64_t>();
  r.validated = v;
  if (v->corrupt_bytes > 0) {
    r.status = case_status::fail;
    r.message = fmt::format("--validate: {} corrupt bytes in {} messages checked", v->corrupt_bytes,
                            v->messages_checked);
  }
}

}  // namespace

void compose_result(case_result& r, case_session& s, const pattern_outcome& mine,
                    const server_view& theirs) {
  r.window = s.window();
  r.elapsed_s = static_cast<double>(mine.elapsed_ns) * 1e-9;
  switch (s.test().pattern) {
    case pattern_kind::pingpong:
      r.latency_s = summarize(s.samples().samples(), 0.5e-9);
      r.message_rate_per_s = per_second(static_cast<double>(r.iterations), mine.elapsed_ns);
      break;
    case pattern_kind::stream_uni:
      stream_figures(r, s, mine, theirs);
      break;
    case pattern_kind::stream_bi:
      bidirectional_figures(r, s, mine, theirs);
      break;
  }
  provenance p = s.describe();
  p.server = theirs.body.value("provenance", nlohmann::json::object());
  add_peer_evidence(p, theirs.body.value("path_evidence", nlohmann::json::object()));
  r.provenance = std::move(p);
  if (const gpu_path_verdict g = classify_gpu_path(r); !g.verdict.empty()) {
    r.gpu_path = g.verdict;
    r.gpu_path_why = g.why;
  }
  add_validation(r, s, theirs);
}

verdict_outcome run_summary::outcome() const {
  verdict_outcome o;
  if (!fatal.empty()) o.add(exit_status::failed, fatal);
  // Nothing measured because the server was busy the whole time: no verdict on the network.
  if (!busy.empty()) o.add(exit_status::inconclusive, busy);
  if (interrupted != 0) {
    o.add(exit_status::failed,
          fmt::format("interrupted by {} after {} of {} case(s)", signal_name(interrupted),
                      ok + skipped + error + unreachable + fail, planned));
  }
  if (aborted) o.add(exit_status::failed, "the control connection to the server was lost");
  for (const auto& lost : lost_output) o.add(exit_status::failed, lost);
  if (error + unreachable > 0)
    o.add(exit_status::failed,
          fmt::format("{} case(s) errored, {} unreachable", error, unreachable));
  if (fail > 0) o.add(exit_status::missed, fmt::format("{} case(s) failed a check", fail));
  for (const auto& u : unjudged) o.add(exit_status::inconclusive, u);
  if (fatal.empty() && busy.empty() && interrupted == 0 && !aborted &&
      error + unreachable + ok + fail == 0)
    o.add(exit_status::inconclusive,
          skipped > 0 ? fmt::format("nothing was measured: all {} case(s) were skipped", skipped)
                      : std::string("nothing was measured: no case ran"));
  return o;
}

void run_summary::count(const case_result& r) {
  if (is_noisy(r.host_noise)) ++noisy;
  switch (r.status) {
    case case_status::ok:
      ++ok;
      break;
    case case_status::skipped:
      ++skipped;
      break;
    case case_status::error:
      ++error;
      break;
    case case_status::unreachable:
      ++unreachable;
      break;
    case case_status::fail:
      ++fail;
      break;
  }
}

int run_summary::exit_code() const {
  return interrupted != 0 ? 128 + interrupted : code(outcome().status);
}

nlohmann::json to_json(const run_summary& s) {
  const verdict_outcome o = s.outcome();
  return {{"exit_code", s.exit_code()},
          {"verdict", to_string(o.status)},
          {"reasons", o.reasons},
          {"counts",
           {{"ok", s.ok},
            {"skipped", s.skipped},
            {"error", s.error},
            {"unreachable", s.unreachable},
            {"fail", s.fail},
            {"noisy", s.noisy}}}};
}

}  // namespace pairperf
