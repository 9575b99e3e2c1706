#pragma once
// The subcommands of the pairperf program. Each registers its options on the root app and
// returns the function that runs it once parsing succeeded; that function returns the exit code
// and throws usage_error for bad values (exit 2) or other exceptions (exit 1).
#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace pairperf::cli {

struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// --token (also $PAIRPERF_TOKEN) and --token-file on `app`; resolve() gives the token to use
// (the file's first line when a file was named), "" for none.
struct token_options {
  std::string token;
  std::string file;
  void add(CLI::App* app, const std::string& what);
  [[nodiscard]] std::string resolve() const;
};

// --wait-busy on a command that talks to servers: how long to wait out a busy one (its queue
// full) before giving up with exit 4. resolve() parses it (usage_error on a bad duration).
struct wait_busy_option {
  std::string text = "2m";
  void add(CLI::App* app);
  [[nodiscard]] std::chrono::nanoseconds resolve() const;
};

command add_run(CLI::App& root, const std::vector<std::string>& argv);
command add_server(CLI::App& root);
command add_info(CLI::App& root);
command add_doctor(CLI::App& root, const std::vector<std::string>& argv);
command add_compare(CLI::App& root);
command add_export(CLI::App& root);
command add_history(CLI::App& root);
command add_report(CLI::App& root);
command add_explain(CLI::App& root, const std::vector<std::string>& argv);
command add_mesh(CLI::App& root, const std::vector<std::string>& argv);

}  // namespace pairperf::cli
