#include <fmt/format.h>

#include <memory>

#include "analysis/compare.h"
#include "analysis/export.h"
#include "bench/pairperf/commands.h"
#include "core/errors.h"
#include "core/exit_codes.h"
#include "core/output.h"

namespace pairperf::cli {
namespace {

struct compare_args {
  std::string base, next;
  double threshold = 5;  // percent
  double tail_threshold = 20;
  double alpha = 0.05;
  bool markdown = false;
  std::string json;
  bool all = false;
};

int compare_command(const compare_args& a) {
  if (a.threshold < 0 || a.threshold > 1000 || a.tail_threshold < 0 || a.tail_threshold > 1000)
    throw usage_error("--threshold and --tail-threshold must be 0 to 1000 (%)");
  if (a.alpha <= 0 || a.alpha >= 1) throw usage_error("--alpha must be between 0 and 1");
  comparison c;
  try {
    c = compare_results(load_results(a.base), load_results(a.next),
                        compare_options{a.threshold / 100, a.tail_threshold / 100, a.alpha});
  } catch (const compare_error& e) {
    fmt::print(stderr, "pairperf compare: {}\n", e.what());
    return code(exit_status::usage);
  }
  if (a.json == "-") {
    fmt::print("{}\n", nlohmann::json(c).dump(2));
  } else if (a.markdown) {
    fmt::print("{}", markdown(c));
  } else {
    print_comparison(stdout, c, a.all);
  }
  if (!a.json.empty() && a.json != "-") write_output(a.json, nlohmann::json(c).dump(2) + "\n");
  return c.exit_code();
}

struct export_args {
  std::vector<std::string> inputs;
  std::string bmf, bigger, smaller;
};

int export_command(const export_args& a) {
  if (a.bmf.empty() && a.bigger.empty() && a.smaller.empty())
    throw usage_error("give at least one of --bmf, --gab-bigger, --gab-smaller");
  if ((a.bmf == "-") + (a.bigger == "-") + (a.smaller == "-") > 1)
    throw usage_error("only one of --bmf, --gab-bigger, --gab-smaller can be '-' (stdout)");
  result_set all;
  try {
    for (const auto& in : a.inputs) {
      result_set one = load_results(in);
      all.files.insert(all.files.end(), one.files.begin(), one.files.end());
      all.results.insert(all.results.end(), one.results.begin(), one.results.end());
    }
  } catch (const compare_error& e) {
    fmt::print(stderr, "pairperf export: {}\n", e.what());
    return code(exit_status::usage);
  }
  const nlohmann::json bencher = to_bencher(all);
  if (bencher.empty()) {
    fmt::print(stderr, "pairperf export: inconclusive: no measured (ok) case in {}\n",
               fmt::join(a.inputs, ", "));
    return code(exit_status::inconclusive);
  }
  if (!a.bmf.empty()) write_output(a.bmf, bencher.dump(2) + "\n");
  if (!a.bigger.empty()) write_output(a.bigger, to_gab_bigger_is_better(all).dump(2) + "\n");
  if (!a.smaller.empty()) write_output(a.smaller, to_gab_smaller_is_better(all).dump(2) + "\n");
  return 0;
}

}  // namespace

command add_compare(CLI::App& root) {
  auto a = std::make_shared<compare_args>();
  CLI::App* app = root.add_subcommand(
      "compare",
      "Compare two results files or folders: regressions (significant and beyond the threshold), "
      "provenance and status changes, missing and new cases, and metrics the data cannot judge "
      "(one value a side, noise wider than the threshold). Exit 0 none, 3 findings, 4 "
      "inconclusive, 2 bad input");
  app->add_option("base", a->base, "Baseline results file or folder")->required();
  app->add_option("new", a->next, "New results file or folder")->required();
  app->add_option("--threshold", a->threshold, "Relative change that matters, in percent")
      ->capture_default_str();
  app->add_option("--tail-threshold", a->tail_threshold,
                  "Relative change that matters for latency p99, in percent")
      ->capture_default_str();
  app->add_option("--alpha", a->alpha, "Significance level of the Mann-Whitney U test")
      ->capture_default_str();
  app->add_flag("--markdown", a->markdown, "Print a Markdown report (for a CI comment)");
  app->add_option("--json", a->json, "Also write the comparison as JSON ('-': stdout only)");
  app->add_flag("--all", a->all, "Print every comparison, not only the findings");
  return command{app, [a] { return compare_command(*a); }};
}

command add_export(CLI::App& root) {
  auto a = std::make_shared<export_args>();
  CLI::App* app = root.add_subcommand(
      "export", "Write results for CI trackers: Bencher Metric Format, github-action-benchmark");
  app->add_option("inputs", a->inputs,
                  "Results files or folders; a case in several of them pools its repetitions")
      ->required();
  app->add_option("--bmf", a->bmf, "Bencher Metric Format JSON file ('-': stdout)");
  app->add_option(
      "--gab-bigger", a->bigger,
      "github-action-benchmark customBiggerIsBetter JSON file (bandwidth; '-': stdout)");
  app->add_option("--gab-smaller", a->smaller,
                  "github-action-benchmark customSmallerIsBetter JSON file (latency; '-': stdout)");
  return command{app, [a] { return export_command(*a); }};
}

}  // namespace pairperf::cli
