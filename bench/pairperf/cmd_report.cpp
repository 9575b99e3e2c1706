#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "bench/pairperf/commands.h"

namespace pairperf::cli {
namespace {

struct report_args {
  std::vector<std::string> inputs;
  std::string out;
};

// scripts/report: $PAIRPERF_SCRIPTS, else the source tree this binary was built from, else
// beside the binary (an installed or copied tree).
std::string find_script() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("PAIRPERF_SCRIPTS"); env != nullptr && *env != '\0')
    candidates.emplace_back(fs::path(env) / "report");
  candidates.emplace_back(fs::path(PAIRPERF_SOURCE_DIR) / "scripts" / "report");
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(self.parent_path() / ".." / "scripts" / "report");
    candidates.push_back(self.parent_path() / "scripts" / "report");
  }
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return c.string();
  }
  return {};
}

int report_command(const report_args& a) {
  const std::string script = find_script();
  if (script.empty()) {
    fmt::print(stderr,
               "pairperf report: scripts/report not found (set PAIRPERF_SCRIPTS to the folder "
               "holding it)\n");
    return 2;
  }
  // Debian's interpreter has python3-matplotlib (scripts/setup installs it); another python3 on
  // PATH may not.
  const std::string python =
      ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> args{python, script};
  args.insert(args.end(), a.inputs.begin(), a.inputs.end());
  args.emplace_back("--out");
  args.push_back(a.out);
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execvp(argv[0], argv.data());
  fmt::print(stderr, "pairperf report: cannot run {}: {}\n", python, std::strerror(errno));
  return 2;
}

}  // namespace

command add_report(CLI::App& root) {
  auto a = std::make_shared<report_args>();
  CLI::App* app = root.add_subcommand(
      "report",
      "Pictures (PNG, SVG) and an index.html from results, compare and peer-curve JSON files: "
      "bandwidth and latency vs size, before/after bars (matplotlib, scripts/report)");
  app->add_option("inputs", a->inputs, "JSON files or folders of them")->required();
  app->add_option("-o,--out", a->out, "Folder for the pictures")->required();
  return command{app, [a] { return report_command(*a); }};
}

}  // namespace pairperf::cli
