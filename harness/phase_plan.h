#pragma once
// How many iterations each phase of a case runs under a time budget (`--duration`); the client
// (client.cpp) runs the phases. Times are in nanoseconds. The warm-up's few iterations fit inside
// one scheduler slice and miss contention (on a busy host a round trip waits for a CPU: 5 us
// inside a slice, 4 ms across one), so every count is sized from rates measured over longer
// phases, and grows from them by bounded factors: a rate that collapses mid-run costs one phase's
// overrun, not the case timeout. A two-sided ping-pong is timed instead (patterns.h); only its
// cap comes from here.
#include <cstdint>

#include "core/config.h"
#include "patterns/pattern_types.h"

namespace pairperf {

// Nanoseconds a phase took (at least 1) and per iteration of its `n`.
double elapsed_ns(const pattern_outcome& o) noexcept;
double per_iteration(const pattern_outcome& o, std::uint64_t n) noexcept;

// `x` iterations as a phase's count: at least one, at most the run's max_iterations.
std::uint64_t phase_count(double x, const run_config& cfg) noexcept;

// A timed phase's cap from the count its time should hold at the rate known before it: twice
// that, and at least 65,536 (half a megabyte of samples), so that a rate better than the pilot's
// does not end the phase early; at most max_iterations.
std::uint64_t timed_cap(double expected, const run_config& cfg) noexcept;

// The pilot's time: a tenth of the budget, at most half a second.
double pilot_budget_ns(const run_config& cfg) noexcept;

// The next unmeasured pilot phase of a counted pattern, `spent_ns` of `pilot_ns` used, the last
// phase `last` iterations at `per_iter_ns`: what is left at that rate, at most eight times the
// last. 0 (stop) when that is less than the warm-up's `warmed`.
std::uint64_t next_pilot_count(const run_config& cfg, double pilot_ns, double spent_ns,
                               double per_iter_ns, std::uint64_t last, std::uint64_t warmed);

// The measured count at the pilot's rate: the budget's worth, held to half the case timeout,
// within min_iterations and max_iterations.
std::uint64_t planned_count(const run_config& cfg, double per_iter_ns);

// The next phase of a counted measurement that ran `done` iterations in `spent_ns`: what is left of
// the budget at that rate, at most doubling `done`. 0 (stop) when the budget is spent or what is
// left is under a sixteenth of what ran (not worth a phase's round trips); min_iterations is
// always reached.
std::uint64_t next_measure_count(const run_config& cfg, double spent_ns, std::uint64_t done);

}  // namespace pairperf
