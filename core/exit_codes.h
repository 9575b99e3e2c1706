#pragma once
// The one exit-code contract of every pairperf subcommand (docs/exit-codes.md):
//   0 held          every check ran and held
//   1 failed        a measurement failed (unreachable, error, the run stopped)
//   2 usage         bad command-line input or an unreadable input file; nothing was measured
//   3 missed        a check ran and missed (an expectation, a finding, a regression)
//   4 inconclusive  a check could not be judged (every case skipped, an expectation that judged
//                   no case, too few repetitions, noise too wide, nothing in common)
// When several apply, the worst wins: failed, then missed, then inconclusive. A run stopped by
// SIGINT or SIGTERM exits 128 + the signal (130, 143) after writing what finished.
#include <string>
#include <vector>

namespace pairperf {

enum class exit_status : int { held = 0, failed = 1, usage = 2, missed = 3, inconclusive = 4 };

// The worse of two outcomes (usage never combines: it ends a command before anything runs).
[[nodiscard]] constexpr exit_status worse(exit_status a, exit_status b) noexcept {
  const auto rank = [](exit_status s) {
    switch (s) {
      case exit_status::held:
        return 0;
      case exit_status::inconclusive:
        return 1;
      case exit_status::missed:
        return 2;
      case exit_status::failed:
        return 3;
      case exit_status::usage:
        return 4;
    }
    return 4;
  };
  return rank(a) >= rank(b) ? a : b;
}

[[nodiscard]] constexpr int code(exit_status s) noexcept { return static_cast<int>(s); }

// "held", "failed", "usage", "missed", "inconclusive": the word the JSON outputs carry.
[[nodiscard]] constexpr const char* to_string(exit_status s) noexcept {
  switch (s) {
    case exit_status::held:
      return "held";
    case exit_status::failed:
      return "failed";
    case exit_status::usage:
      return "usage";
    case exit_status::missed:
      return "missed";
    case exit_status::inconclusive:
      return "inconclusive";
  }
  return "?";
}

// An outcome with the reasons behind it (empty for held).
struct verdict_outcome {
  exit_status status = exit_status::held;
  std::vector<std::string> reasons;
  void add(exit_status s, std::string why) {
    status = worse(status, s);
    reasons.push_back(std::move(why));
  }
};

// The contract as text, for every subcommand's --help footer.
inline constexpr const char* exit_code_help =
    "Exit codes: 0 every check ran and held; 1 a measurement failed; 2 usage or input error; "
    "3 a check ran and missed; 4 inconclusive (nothing could be judged); 130/143 a run "
    "stopped by SIGINT/SIGTERM (what finished is written).";

}  // namespace pairperf
