#include "harness/client_hello.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <thread>

#include "core/interfaces.h"
#include "core/units.h"
#include "harness/client.h"
#include "harness/context.h"

namespace pairperf {
namespace {

std::optional<std::uint64_t> whole(const nlohmann::json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

std::string seconds_text(std::chrono::nanoseconds d) {
  return format_seconds(std::chrono::duration<double>(d).count());
}

}  // namespace

nlohmann::json say_hello(control_channel& channel, const hello_request& request, const timeouts& t,
                         std::optional<std::uint64_t> ticket, std::chrono::nanoseconds queue_wait) {
  nlohmann::json hello{
      {"protocol", control_protocol_version}, {"token", request.token}, {"tool", tool_context()}};
  if (request.budget_s > 0) hello["budget_s"] = request.budget_s;
  if (ticket) hello["ticket"] = *ticket;
  if (request.nccl_budget.count() > 0) {
    hello["want"] = {"nccl"};
    hello["nccl_budget_s"] = std::chrono::duration<double>(request.nccl_budget).count();
  }
  channel.send(msg_type::hello, std::move(hello), "hello", t.handshake);
  const auto in_line = std::max({t.idle, t.handshake, queue_wait});
  const deadline_t give_up = deadline_in(in_line);
  std::chrono::nanoseconds wait = t.handshake + request.nccl_budget;
  for (;;) {
    message m = channel.receive("hello", wait);
    if (m.type == msg_type::hello) return std::move(m.body);
    if (m.type == msg_type::busy) {
      const auto r = m.body.find("retry_after_s");
      const double after = r != m.body.end() && r->is_number() ? r->get<double>() : 5.0;
      const auto said = m.body.find("reason");
      const std::string reason = said != m.body.end() && said->is_string()
                                     ? said->get<std::string>()
                                     : std::string("no reason given");
      throw busy_reply(where{"hello", channel.place().peer, channel.place().iface}, reason,
                       std::clamp(after, 0.1, 300.0), whole(m.body, "ticket"),
                       whole(m.body, "position"));
    }
    if (m.type != msg_type::queued) {
      // expect() turns refused / error into their errors; give it the message back.
      channel.unexpected(std::move(m), msg_type::hello, "hello");
    }
    const auto left = give_up - steady::now();
    if (left <= std::chrono::nanoseconds::zero()) {
      throw step_error(
          error_kind::timeout, channel.place(),
          fmt::format("still queued at position {} after {}; the server is serving "
                      "other clients",
                      m.body.value("position", nlohmann::json()).dump(), seconds_text(in_line)),
          ETIMEDOUT);
    }
    wait = std::chrono::duration_cast<std::chrono::nanoseconds>(left);
  }
}

// A control connection takes any of several attempts (connect_options::attempt_every), so that a
// lossy path's dropped SYNs cost tenths of a second, not the whole connect bound. Half a second:
// beyond any data centre's round trip, so a path that only delays sees one attempt.
constexpr auto control_attempt_every = std::chrono::milliseconds(500);

std::pair<control_channel, nlohmann::json> open_hello(const endpoint& server,
                                                      const std::string& step,
                                                      const hello_request& request,
                                                      const timeouts& t) {
  const auto start = steady::now();
  const deadline_t give_up = start + request.wait_busy;
  std::optional<std::uint64_t> ticket;
  std::mt19937_64 jitter(std::random_device{}());
  bool said = false;
  std::string last;
  for (unsigned attempt = 1;; ++attempt) {
    connect_options o;
    o.timeout = t.connect;
    o.attempt_every = control_attempt_every;
    unique_fd fd = connect_tcp(server, o, where{step, server.to_string(), ""});
    const std::string iface = interface_of_address(local_ip(fd.get()));
    control_channel channel(std::move(fd), where{"", server.to_string(), iface});
    try {
      const auto left =
          std::chrono::duration_cast<std::chrono::nanoseconds>(give_up - steady::now());
      nlohmann::json reply = say_hello(channel, request, t, ticket, left);
      if (said && request.progress != nullptr) {
        fmt::print(request.progress, "pairperf: {}: served after waiting {} ({} tries)\n",
                   server.to_string(), seconds_text(steady::now() - start), attempt);
        std::fflush(request.progress);
      }
      return {std::move(channel), std::move(reply)};
    } catch (const busy_reply& busy) {
      if (busy.ticket) ticket = busy.ticket;
      last = busy.detail();
      const auto now = steady::now();
      if (now >= give_up) {  // --wait-busy 0: at the first busy
        throw server_stayed_busy(
            error_kind::refused, busy.place(),
            fmt::format("the server stayed busy for {} ({} tries; --wait-busy): {}",
                        seconds_text(now - start), attempt, last));
      }
      if (!said && request.progress != nullptr) {
        said = true;
        fmt::print(request.progress,
                   "pairperf: {} is busy ({}): waiting for its turn, place {} in line{}, for "
                   "up to {} (--wait-busy)\n",
                   server.to_string(), busy.reason,
                   busy.position ? std::to_string(*busy.position) : std::string("?"),
                   ticket ? fmt::format(" (ticket {})", *ticket) : std::string(),
                   seconds_text(request.wait_busy));
        std::fflush(request.progress);
      }
      // The server's estimate, +-20%, never past the bound; slept in slices a signal can end.
      std::uniform_real_distribution<double> spread(0.8, 1.2);
      const auto pause = std::min<std::chrono::nanoseconds>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              std::chrono::duration<double>(busy.retry_after_s * spread(jitter))),
          give_up - now);
      const deadline_t wake = now + pause;
      while (steady::now() < wake) {
        if (request.interrupted != nullptr && request.interrupted->load() != 0)
          throw step_error(error_kind::error, busy.place(),
                           "interrupted while waiting for a busy server");
        std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(
            wake - steady::now(), std::chrono::milliseconds(100)));
      }
    }
  }
}

// planned_case_seconds, planned_seconds and hello_of are declared in client.h.
double planned_case_seconds(const run_config& c) {
  // A warm-up and a pilot take about half a measured phase's budget; setup about 0.3 s.
  const double phase = std::chrono::duration<double>(c.duration).count();
  return (c.repeat + 0.5) * phase + 0.3;
}

double planned_seconds(const client_options& options) {
  return planned_case_seconds(options.config) *
         static_cast<double>(std::max<std::size_t>(options.cases.size(), 1));
}

hello_request hello_of(const client_options& options) {
  hello_request h;
  h.token = options.token;
  h.budget_s = planned_seconds(options);
  h.wait_busy = options.wait_busy;
  h.progress = options.busy_progress;
  h.interrupted = options.interrupted;
  h.nccl_budget = options.nccl_budget;
  return h;
}

}  // namespace pairperf
