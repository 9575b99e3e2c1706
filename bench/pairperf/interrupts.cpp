#include "bench/pairperf/interrupts.h"

#include <signal.h>

namespace pairperf::cli {
namespace {

// The only global, as signals require.
std::atomic<int> g_interrupted{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_interrupt(int sig) { g_interrupted.store(sig); }

}  // namespace

void catch_interrupts() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (const int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

const std::atomic<int>& interrupt_signal() { return g_interrupted; }

}  // namespace pairperf::cli
