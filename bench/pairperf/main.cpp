// pairperf: latency and bandwidth between two endpoints through pluggable transports.
#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <string_view>

#include "bench/pairperf/commands.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/exit_codes.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed peer is an error return, never a signal
  CLI::App app{
      "pairperf: latency and bandwidth between two endpoints, with provenance of the path the "
      "bytes took"};
  app.name("pairperf");
  app.set_version_flag("--version", std::string("pairperf ") + PAIRPERF_VERSION);
  app.require_subcommand(1);
  const std::vector<std::string> args(argv, argv + argc);
  std::vector<pairperf::cli::command> commands{
      pairperf::cli::add_run(app, args), pairperf::cli::add_server(app),
      pairperf::cli::add_info(app),      pairperf::cli::add_doctor(app, args),
      pairperf::cli::add_compare(app),   pairperf::cli::add_export(app),
      pairperf::cli::add_history(app),   pairperf::cli::add_report(app),
      pairperf::cli::add_explain(app, args)};
  commands.push_back(pairperf::cli::add_mesh(app, args));
  app.footer(pairperf::exit_code_help);
  for (const auto& c : commands) c.app->footer(pairperf::exit_code_help);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : pairperf::code(pairperf::exit_status::usage);
  }
  // PAIRPERF_PARSE_ONLY=1: stop once the command line parsed (exit 0), running nothing. The
  // documentation test parses every command that docs/ shows this way.
  if (const char* parse_only = std::getenv("PAIRPERF_PARSE_ONLY");
      parse_only != nullptr && std::string_view(parse_only) == "1") {
    return 0;
  }
  try {
    pairperf::check_clock_variable();
    for (const auto& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    return 2;
  } catch (const pairperf::usage_error& e) {
    fmt::print(stderr, "pairperf: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "pairperf: error: {}\n", e.what());
    return 1;
  }
}
