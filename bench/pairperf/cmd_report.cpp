#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/private_files.h"

namespace pairperf::cli {
namespace {

struct report_args {
  std::vector<std::string> inputs;
  std::string out;
};

int report_command(const report_args& a) {
  // $PAIRPERF_SCRIPTS first: a source checkout's scripts/ (scripts/gpu-bundle sets it).
  const char* scripts = std::getenv("PAIRPERF_SCRIPTS");
  const std::string also = scripts != nullptr ? scripts : "";
  const std::string script = find_private_file("report", also);
  if (script.empty()) {
    fmt::print(stderr,
               "pairperf report: its script 'report' is not installed (looked in {}); set "
               "PAIRPERF_LIBEXEC_DIR to the folder holding it\n",
               fmt::join(private_file_folders(also), ", "));
    return 1;
  }
  // Debian's interpreter has python3-matplotlib (scripts/setup installs it); another python3 on
  // PATH may not.
  const std::string python =
      ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> args{python, script};
  args.insert(args.end(), a.inputs.begin(), a.inputs.end());
  args.emplace_back("--out");
  args.push_back(a.out);
  exec_program(std::move(args));
  fmt::print(stderr, "pairperf report: cannot run {}: {}\n", python, std::strerror(errno));
  return 1;
}

}  // namespace

command add_report(CLI::App& root) {
  auto a = std::make_shared<report_args>();
  CLI::App* app = root.add_subcommand(
      "report",
      "Pictures (PNG, SVG) and an index.html that stands alone, from results, compare, history, "
      "mesh, doctor and peer-curve JSON files: bandwidth and latency vs size, before/after bars, "
      "series with their change points, mesh heatmaps (matplotlib, scripts/report); the page adds "
      "the outcome, both hosts side by side, a sortable table of every case with its lanes, noise "
      "and verdict, and the findings");
  app->add_option("inputs", a->inputs, "JSON files or folders of them")->required();
  app->add_option("-o,--out", a->out, "Folder for the pictures")->required();
  return command{app, [a] { return report_command(*a); }};
}

}  // namespace pairperf::cli
