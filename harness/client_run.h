#pragma once
// One run of the client (client.h's run_client), internal to the harness: the run itself, its
// control channel, hello, reconnections and case workers (client.cpp), and the client's side of
// each case, its setup and its phases (client_case.cpp).
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/control.h"
#include "core/errors.h"
#include "core/socket.h"
#include "harness/case_session.h"
#include "harness/client.h"
#include "harness/client_results.h"
#include "harness/expect.h"
#include "harness/reporter.h"

namespace pairperf {

class client_run {
 public:
  client_run(const client_options& options, reporter& out)
      : m_options(options), m_out(out), m_tally(options.expectations.size()) {}

  run_summary run();

 private:
  // A failure of the control channel itself: the server's state is unknown, the run stops.
  class control_lost : public std::runtime_error {
   public:
    using std::runtime_error::runtime_error;
  };
  // A case that ended before (or instead of) measuring.
  static case_result ended(case_result r, case_status status, std::string message);
  // A case that ended on a step_error: its kind decides the status, its errno the error code.
  static case_result failed(case_result r, const step_error& e);

  void hello();
  nlohmann::json open_channel();
  bool come_back(std::size_t next, std::string& not_run);
  [[nodiscard]] nlohmann::json own_context() const;
  case_result run_case(const test_case& c);
  // The server's half of a case's setup: the case with this side's address and regions, then
  // its reply (`ready` with its own, or `error`).
  nlohmann::json ask_server(const test_case& c, case_session& s, const std::string& label);
  // The measured part of a case whose data path is up: warm-up, calibration, each repetition
  // composed into r.
  void measure_case(const test_case& c, case_session& s, case_result& r);
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
  // Per transport whose two sides' libraries may not work together: what its failures add.
  std::map<std::string, std::string> m_mismatch_notes;
  nlohmann::json m_reconnects = nlohmann::json::array();  // each time the server came back
  run_summary m_sum;
  expectation_tally m_tally;
  overhead_meter m_overhead;
  steady::time_point m_case_start{};
  [[nodiscard]] const timeouts& t() const { return m_options.config.timeouts; }
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

}  // namespace pairperf
