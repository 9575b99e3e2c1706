#include "bench/pairperf/commands.h"
#include "core/errors.h"
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

}  // namespace pairperf::cli
