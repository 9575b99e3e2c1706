#include "harness/console_reporter.h"

#include <fmt/format.h>

#include <algorithm>

namespace pairperf {
namespace {

constexpr const char* row_format =
    "{:>4} {:<6} {:<9} {:<14} {:<8} {:<9} {:>6} {:<11} {:>10} {:>10} {:>14} {:>10}  {}";

std::string lanes_text(const case_result& r) {
  if (!r.provenance || r.provenance->lanes.empty()) return "-";
  std::string out;
  for (const auto& l : r.provenance->lanes)
    out += (out.empty() ? "" : ",") + l.transport + "/" + l.device;
  return out;
}

}  // namespace

std::string console_reporter::header() {
  return fmt::format(row_format, "#", "xport", "test", "tls", "iface", "memory", "size", "status",
                     "lat p50", "lat p99", "bandwidth", "msg rate", "path");
}

std::string console_reporter::format_row(const case_result& r) const {
  const test_case& c = r.test;
  const std::string lat50 = r.latency_s ? format_seconds(r.latency_s->p50) : "-";
  const std::string lat99 = r.latency_s ? format_seconds(r.latency_s->p99) : "-";
  // The receiver's figure where it exists (the definition), else the sender's (one-sided put).
  std::string bw = "-";
  if (r.bandwidth_Bps) {
    const auto& b = *r.bandwidth_Bps;
    bw = b.receiver_Bps ? format_rate(*b.receiver_Bps, m_unit)
                        : (b.sender_Bps ? format_rate(*b.sender_Bps, m_unit) + "*" : "-");
  }
  const std::string rate = r.message_rate_per_s ? format_message_rate(*r.message_rate_per_s) : "-";
  const std::string memory =
      fmt::format("{},{}", to_string(c.client_memory), to_string(c.server_memory));
  return fmt::format(row_format, c.index + 1, c.transport, c.test, c.tls.empty() ? "-" : c.tls,
                     c.iface.empty() ? "(route)" : c.iface, memory, format_size(c.size_bytes),
                     to_string(r.status), lat50, lat99, bw, rate, lanes_text(r));
}

void console_reporter::report_context(const nlohmann::json& context) {
  // A context without the server's block: the server was never reached, no table follows.
  if (!context.contains("server")) return;
  if (context.contains("client")) {
    fmt::print(m_out, "pairperf {}: {} -> {} ({})\n", context["tool"].value("version", "?"),
               context["client"].value("hostname", "?"), context["server"].value("hostname", "?"),
               context.value("server_address", "?"));
  }
  fmt::print(m_out, "{}\n", header());
  std::fflush(m_out);
}

void console_reporter::report_result(const case_result& r) {
  fmt::print(m_out, "{}\n", format_row(r));
  m_sender_only = m_sender_only || (r.bandwidth_Bps && !r.bandwidth_Bps->receiver_Bps);
  if (r.status != case_status::ok && !r.message.empty())
    fmt::print(m_out, "     ^ {}\n", r.message);
  if (r.unjudged.is_object())
    fmt::print(m_out, "     ^ --expect {} not judged\n",
               fmt::join(r.unjudged.value("expect", std::vector<std::string>{}), ", "));
  // Measured on an H200 (results/gpu-check): cuda_ipc tag_bw 16 MiB, 1076 GB/s, 3.1 GB/s with
  // --validate. A figure that low must not read as the path's.
  if (r.validated && r.bandwidth_Bps &&
      (r.test.client_memory == memory_type::cuda || r.test.server_memory == memory_type::cuda))
    fmt::print(m_out,
               "     ^ validated: each GPU message is copied to host memory and checked inside the "
               "timed span, so the bandwidth is the checker's; measure it without --validate\n");
  if (r.host_noise.is_object() && r.host_noise.value("noisy", false)) {
    ++m_noisy;
    fmt::print(m_out, "     ^ noisy: {}\n", r.host_noise.value("why", std::string()));
  } else if (r.host_noise.is_object() && r.host_noise.value("contention", "") == "self") {
    // Not noise: the run's own threads (the measuring loops, the library's event loop) waited
    // for each other; the full account is the result's host_noise.self_why.
    std::vector<std::string> waited;
    for (const char* side : {"client", "server"}) {
      const auto it = r.host_noise.find(side);
      if (it == r.host_noise.end() || !it->is_object()) continue;
      const double share = it->value("descheduled_share", 0.0);
      if (share > r.host_noise.value("threshold_share", 0.0))
        waited.push_back(fmt::format("the {} {:.0f}%", side, share * 100));
    }
    fmt::print(m_out,
               "     ^ own contention, not noise: {} of the time waiting for a CPU that this run's "
               "own threads held (other processes idle)\n",
               fmt::join(waited, ", "));
  }
  switch (r.status) {
    case case_status::ok:
      ++m_ok;
      break;
    case case_status::skipped:
      ++m_skipped;
      break;
    case case_status::error:
    case case_status::unreachable:
    case case_status::fail:
      ++m_failed;
      break;
  }
  std::fflush(m_out);
}

void console_reporter::finalize() {
  std::string verdict;
  if (m_outcome.is_object())
    verdict = fmt::format(": exit {} ({})", m_outcome.value("exit_code", -1),
                          m_outcome.value("verdict", std::string("?")));
  fmt::print(m_out, "{} ok, {} skipped, {} not ok{}{}\n", m_ok, m_skipped, m_failed,
             m_noisy > 0 ? fmt::format(", {} noisy", m_noisy) : std::string(), verdict);
  if (m_sender_only)
    fmt::print(m_out, "* sender-side bandwidth: the target of a one-sided put sees no arrivals\n");
  std::fflush(m_out);
}

double estimate_left_s(std::size_t done, std::size_t left, double elapsed_s, double per_case_s) {
  if (per_case_s <= 0) return -1;
  const double planned_done = static_cast<double>(done) * per_case_s;
  const double pace = done == 0 ? 1.0 : std::clamp(elapsed_s / planned_done, 0.2, 5.0);
  return static_cast<double>(left) * per_case_s * pace;
}

namespace {

std::string clock_text(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds) + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

std::string progress_text(const test_case& c, std::size_t total, double elapsed_s, double left_s) {
  const auto percent = total == 0 ? 0 : c.index * 100 / total;
  std::string text = fmt::format("[{}/{} {}%] {} {} {}{}  {} elapsed", c.index + 1, total, percent,
                                 c.transport, c.test, format_size(c.size_bytes),
                                 c.iface.empty() ? "" : " " + c.iface, clock_text(elapsed_s));
  if (left_s >= 0) text += fmt::format(", ~{} left", clock_text(left_s));
  return text;
}

void progress_reporter::case_started(const test_case& c, std::size_t total) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  const std::size_t left = total > m_done ? total - m_done : 0;
  fmt::print(
      m_out, "\r\033[K{}",
      progress_text(c, total, elapsed, estimate_left_s(m_done, left, elapsed, m_per_case_s)));
  std::fflush(m_out);
}

void progress_reporter::finalize() {
  fmt::print(m_out, "\r\033[K");
  std::fflush(m_out);
}

}  // namespace pairperf
