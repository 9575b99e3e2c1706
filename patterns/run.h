#pragma once
// One phase of a case's pattern over a transport of type T: the entry to the measurement loops.
//
// Each transport instantiates it for its own final class in its run_phase() (transport.h), in
// the file that defines its post() and poll(), so that they are direct calls the compiler can
// inline into the timed loop; the harness calls run_phase() once a phase. The loops, their
// timing and what they count stay here, in one place for every transport.
//
// Records into `samples`: round trips on the ping-pong client, the time between arrivals on a
// stream receiver (for get, the initiator).
//
// One-sided variants: put ping-pong writes into the peer's buffer, then sends a sync notification
// that the transport delivers after the put completed at the target. One-sided streams: the client
// keeps `window` puts or gets in flight, then sends a sync "done" (the transport orders it after
// the data) and waits for the target's sync acknowledgement; the target only waits, then (put,
// validating) checks the last message that landed in each of its slots. `checker` (nullptr = no
// validation) fills every sent message and checks every received one. Throws step_error at `place`
// when the transport fails (kind closed when the peer went away) or the deadline passes (kind
// timeout); std::logic_error for a run the loops cannot do (no buffers, a window out of range, a
// time budget for a counted pattern).
#include <stdexcept>

#include "core/clock.h"
#include "patterns/driver.h"
#include "patterns/one_sided.h"
#include "patterns/two_sided.h"

namespace pairperf {

template <loop_transport T>
pattern_outcome run_pattern(T& t, const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker, const where& place) {
  pattern_detail::check_phase(run, buffers);
  if (run.budget_ns < 0 || (run.budget_ns > 0 && !has_time_budget(run.pattern, run.data_op)))
    throw std::logic_error("a time budget for a pattern that runs a count");
  setup_loop_clock();  // once per process (host_context() did, before case workers forked)
  pattern_detail::driver<T> d(t, run, place);
  const bool one_sided = run.data_op == op_kind::put || run.data_op == op_kind::get;
  const bool validate = checker != nullptr;
  const pattern_outcome out =
      one_sided
          ? (validate ? pattern_detail::run_one_sided<true>(d, run, buffers, samples, checker)
                      : pattern_detail::run_one_sided<false>(d, run, buffers, samples, checker))
      : validate ? pattern_detail::run_two_sided<true>(d, run, buffers, samples, checker)
                 : pattern_detail::run_two_sided<false>(d, run, buffers, samples, checker);
  d.flush();  // outside the timed span
  return out;
}

// The end of a timed ping-pong. The server's loop returns having answered every message and
// posted the receive for a next one; once the server said it saw the stop (over the control
// channel, which is not ordered with the data), the client sends one unmeasured message into that
// receive and the server takes it, so nothing stays posted into the next phase. Not timed: the
// harness calls them through the transport interface.
template <loop_transport T>
void send_closing_message(T& t, const pattern_run& run, const pattern_buffers& buffers,
                          const where& place) {
  pattern_detail::driver<T> d(t, run, place);
  d.post(op_kind::send, op_channel::data, buffers.send_slots[0], run.size, 0);
  for (std::size_t pending = 1; pending > 0;) pending -= d.poll().size();
  d.flush();
}

template <loop_transport T>
void receive_closing_message(T& t, const pattern_run& run, const where& place) {
  pattern_detail::driver<T> d(t, run, place);  // the receive was posted by the phase
  // Counted (op::counted): it completes through poll() or the transport's counter, which nothing
  // advanced since the phase (the client sends this only after the server saw the stop).
  d.await(1, d.counted());
}

}  // namespace pairperf
