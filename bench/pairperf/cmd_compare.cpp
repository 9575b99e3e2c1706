#include <fmt/format.h>

#include <memory>

#include "analysis/compare.h"
#include "analysis/export.h"
#include "analysis/history.h"
#include "bench/pairperf/commands.h"
#include "core/errors.h"
#include "core/exit_codes.h"
#include "core/output.h"

namespace pairperf::cli {
namespace {

struct compare_args {
  std::vector<std::string> inputs;  // BASE NEW... (or NEW... with --base)
  std::vector<std::string> base;    // --base, repeatable: the baseline as a list of runs
  double threshold = 5;             // percent
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
  // Without --base the first input is the baseline (a folder of runs, or one file).
  const std::size_t first_new = a.base.empty() ? 1 : 0;
  if (a.inputs.size() <= first_new)
    throw usage_error(a.base.empty() ? "give BASE and at least one NEW results file or folder"
                                     : "give at least one NEW results file or folder");
  comparison c;
  try {
    result_set base;
    if (a.base.empty()) {
      base = load_results(a.inputs.front());
    } else {
      for (const auto& b : a.base) base.add(load_results(b));
    }
    result_set next;
    for (std::size_t i = first_new; i < a.inputs.size(); ++i) next.add(load_results(a.inputs[i]));
    c = compare_results(base, next,
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

struct history_args {
  std::vector<std::string> inputs;
  double threshold = 5;
  double tail_threshold = 20;
  double alpha = 0.05;
  double change_alpha = 0.05;
  std::size_t window = 20;
  std::size_t last = 100;
  std::size_t judged = 1;
  std::string json;
  bool all = false;
};

int history_command(const history_args& a) {
  if (a.threshold < 0 || a.threshold > 1000 || a.tail_threshold < 0 || a.tail_threshold > 1000)
    throw usage_error("--threshold and --tail-threshold must be 0 to 1000 (%)");
  if (a.alpha <= 0 || a.alpha >= 1 || a.change_alpha <= 0 || a.change_alpha >= 1)
    throw usage_error("--alpha and --change-alpha must be between 0 and 1");
  if (a.window < 2 || a.window > 1000) throw usage_error("--window must be 2 to 1000 runs");
  if (a.last < 2 || a.last > 1000) throw usage_error("--last must be 2 to 1000 runs");
  if (a.judged < 1 || a.judged > 100) throw usage_error("--new must be 1 to 100 runs");
  history h;
  try {
    result_set runs;
    for (const auto& in : a.inputs) runs.add(load_results(in));
    history_options o;
    o.judge = compare_options{a.threshold / 100, a.tail_threshold / 100, a.alpha};
    o.change.alpha = a.change_alpha;
    o.window = a.window;
    o.last = a.last;
    o.judged = a.judged;
    h = read_history(runs, o);
  } catch (const compare_error& e) {
    fmt::print(stderr, "pairperf history: {}\n", e.what());
    return code(exit_status::usage);
  }
  if (a.json == "-") {
    fmt::print("{}\n", nlohmann::json(h).dump(2));
  } else {
    print_history(stdout, h, a.all);
  }
  if (!a.json.empty() && a.json != "-") write_output(a.json, nlohmann::json(h).dump(2) + "\n");
  return h.exit_code();
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
    for (const auto& in : a.inputs) all.add(load_results(in));
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
      "Compare new runs with a baseline of runs (one results file is one run): regressions "
      "(significant against the baseline runs' spread and beyond the threshold), provenance and "
      "status changes, missing and new cases, and metrics the runs cannot judge (fewer than 2 "
      "baseline runs, runs that vary more than the threshold allows). Exit 0 none, 3 findings, "
      "4 inconclusive, 2 bad input");
  app->add_option("inputs", a->inputs,
                  "BASE NEW...: the baseline (a folder of results files, 5 or more runs, or one "
                  "file) and the new runs (files or folders; several pool as new runs). With "
                  "--base, every input is new")
      ->required();
  app->add_option("--base", a->base,
                  "A baseline run (a results file or folder); repeat it to give the baseline as a "
                  "list of runs")
      ->allow_extra_args(false);
  app->add_option("--threshold", a->threshold, "Relative change that matters, in percent")
      ->capture_default_str();
  app->add_option("--tail-threshold", a->tail_threshold,
                  "Relative change that matters for latency p99, in percent")
      ->capture_default_str();
  app->add_option("--alpha", a->alpha, "Significance level of the run-level test")
      ->capture_default_str();
  app->add_flag("--markdown", a->markdown, "Print a Markdown report (for a CI comment)");
  app->add_option("--json", a->json, "Also write the comparison as JSON ('-': stdout only)");
  app->add_flag("--all", a->all, "Print every comparison, not only the findings");
  return command{app, [a] { return compare_command(*a); }};
}

command add_history(CLI::App& root) {
  auto a = std::make_shared<history_args>();
  CLI::App* app = root.add_subcommand(
      "history",
      "Read a series of runs over time (one results file a run, ordered by the time in its "
      "context): change points of every case's metrics (E-divisive means, permutation test), "
      "and the newest run judged against the runs since the last change point. Exit 0 none, 3 "
      "the newest run regressed (or changed status or lanes), 4 inconclusive, 2 bad input");
  app->add_option("inputs", a->inputs, "Results files or folders of them (one file a run)")
      ->required();
  app->add_option("--threshold", a->threshold, "Relative change that matters, in percent")
      ->capture_default_str();
  app->add_option("--tail-threshold", a->tail_threshold,
                  "Relative change that matters for latency p99, in percent")
      ->capture_default_str();
  app->add_option("--alpha", a->alpha, "Significance of the newest run's verdict")
      ->capture_default_str();
  app->add_option("--change-alpha", a->change_alpha, "Significance of each change point")
      ->capture_default_str();
  app->add_option("--window", a->window,
                  "The most runs of a level the newest run is judged against")
      ->capture_default_str();
  app->add_option("--last", a->last, "Read only the most recent runs")->capture_default_str();
  app->add_option("--new", a->judged,
                  "Judge the newest N runs together (a night's runs) against their level")
      ->capture_default_str();
  app->add_option("--json", a->json, "Also write the history as JSON ('-': stdout only)");
  app->add_flag("--all", a->all, "Print the newest run's every verdict, not only the findings");
  return command{app, [a] { return history_command(*a); }};
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
