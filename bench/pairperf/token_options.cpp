#include "bench/pairperf/commands.h"
#include <fmt/format.h>

#include "core/errors.h"
#include "core/units.h"
#include "harness/token.h"

namespace pairperf::cli {

void token_options::add(CLI::App* app, const std::string& what) {
  auto* t = app->add_option("--token", token,
                            what +
                                " (better: $PAIRPERF_TOKEN or --token-file, "
                                "which keep it out of the process list)")
                ->envname("PAIRPERF_TOKEN");
  app->add_option("--token-file", file, "Read the token from the first line of this file")
      ->excludes(t);
}

std::string token_options::resolve() const {
  if (!file.empty()) return read_token_file(file);
  return token;
}

void wait_busy_option::add(CLI::App* app) {
  app->add_option("--wait-busy", text,
                  "How long to wait for a busy server (its queue full): it says when to come "
                  "back and keeps this client's place in line; 0 = give up at once. A server busy "
                  "past it ends the run with exit 4 (inconclusive: nothing was measured)")
      ->capture_default_str();
}

std::chrono::nanoseconds wait_busy_option::resolve() const {
  if (text == "0" || text == "0s") return std::chrono::nanoseconds::zero();
  std::chrono::nanoseconds d{};
  try {
    d = parse_duration(text);
  } catch (const usage_error& e) {
    throw usage_error(fmt::format("--wait-busy {}: {} (0 gives up at once)", text, e.what()));
  }
  if (d > std::chrono::hours(24))
    throw usage_error(fmt::format("--wait-busy {}: at most 24h", text));
  return d;
}

}  // namespace pairperf::cli
