#pragma once
// SIGINT and SIGTERM for the commands that write what they measured (run, doctor, mesh): the
// first one is noted, the command stops at its next safe point and writes what finished, exiting
// 128 + the signal (130, 143); a second one ends the process at once (SA_RESETHAND).
#include <atomic>

namespace pairperf::cli {

// Installs the handler. A signal that the parent set to be ignored (a shell's `cmd &`) stays
// ignored, as POSIX shells expect of programs that catch SIGINT.
void catch_interrupts();

// The signal that asked the command to stop, 0 for none; pass its address down to the loops.
const std::atomic<int>& interrupt_signal();

}  // namespace pairperf::cli
