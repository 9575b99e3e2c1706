#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "bench/pairperf/commands.h"
#include "bench/pairperf/interrupts.h"
#include "bench/pairperf/local_server.h"
#include "core/control.h"
#include "core/errors.h"
#include "core/units.h"
#include "harness/client.h"
#include "harness/console_reporter.h"
#include "harness/context.h"
#include "harness/json_reporter.h"
#include "harness/matrix.h"
#include "host/noise.h"
#include "patterns/pattern_types.h"
#include "transports/memory/gpu_select.h"
#include "transports/registry.h"

namespace pairperf::cli {
namespace {

struct run_args {
  std::string peer;
  std::vector<std::string> transports, tests, ifaces, memory, expect;
  // Each transport's own options and axis, as it registered them.
  std::vector<std::pair<const transport_entry*, transport_cli>> transport_clis;
  std::string sizes = "8,64,1K,8K,64K,1M";
  std::uint64_t iterations = 0;
  std::string duration = "0.2s";
  std::uint64_t min_iterations = 10;
  std::uint64_t warmup = 0;
  unsigned window = 32;
  unsigned repeat = 1;
  bool validate = false;
  unsigned streams = 1;
  std::string sndbuf, rcvbuf;
  std::string progress = "busy";
  std::string json, jsonl;
  bool no_json = false;
  std::string units = "GB";
  std::string t_connect = "3s", t_handshake = "5s", t_case = "20s";
  std::string reconnect = "10s";
  token_options token;
  wait_busy_option wait_busy;
  bool quiet = false;
  std::string gpu;
  std::string cpu;
  double noise_threshold = default_noise_threshold * 100;  // percent
};

void register_options(CLI::App* app, run_args& a) {
  app->add_option("peer", a.peer,
                  "Server address host[:port]; none = start a local server on 127.0.0.1");
  app->add_option("-t,--transport", a.transports,
                  "Transport (repeatable or comma-separated; default: every built-in one)")
      ->delimiter(',');
  app->add_option(
         "--test", a.tests,
         "Test from a transport's table, e.g. tcp_lat,tag_bw (repeatable or comma-separated)")
      ->delimiter(',');
  for (const auto& e : transport_registry::instance().all()) {
    if (e.add_run_options) a.transport_clis.emplace_back(&e, e.add_run_options(*app));
  }
  app->add_option("-s,--sizes", a.sizes,
                  "Message sizes: list and doubling ranges, e.g. 1,64,4K,8:4M")
      ->capture_default_str();
  app->add_option("-i,--iface", a.ifaces,
                  "Client interface to bind (repeatable; 'all' = every usable one)");
  app->add_option("-m,--mem", a.memory, "Memory types client,server, e.g. host,host (repeatable)");
  app->add_option("-n,--iterations", a.iterations,
                  "Fixed iterations per case (default: a time budget)");
  app->add_option("-d,--duration", a.duration, "Time budget per case when -n is not given")
      ->capture_default_str();
  app->add_option("--min-iterations", a.min_iterations, "Least iterations under a time budget")
      ->capture_default_str();
  app->add_option("--warmup", a.warmup, "Warm-up iterations (default: 2 windows, at most 256 MiB)");
  app->add_option("-r,--repeat", a.repeat,
                  "Measured phases per case, each kept in the results (their spread is what "
                  "`pairperf compare` tests)")
      ->capture_default_str();
  app->add_option("-w,--window", a.window, "Outstanding operations in stream tests")
      ->capture_default_str();
  app->add_flag("--validate", a.validate,
                "Fill payloads with a pattern and check every received byte");
  app->add_option("--streams", a.streams, "Parallel connections (TCP)")->capture_default_str();
  app->add_option("--sndbuf", a.sndbuf, "Socket send buffer size, e.g. 4M (default: the kernel's)");
  app->add_option("--rcvbuf", a.rcvbuf, "Socket receive buffer size");
  app->add_option(
         "--progress", a.progress,
         "busy (spin) or block (sleep in the kernel; 'event' is the same: completion events)")
      ->capture_default_str();
  app->add_option(
      "--gpu", a.gpu,
      "GPU for cuda buffers: CLIENT[,SERVER], each an index (CUDA_VISIBLE_DEVICES applies), a "
      "UUID (GPU-4650fca3-...) or a PCI bus id; SERVER applies to the local server");
  app->add_option("--cpu", a.cpu,
                  "Pin the client to CPU CLIENT and a local server to SERVER (CLIENT[,SERVER], "
                  "as ucx_perftest -c and iperf3 -A); each side's CPUs are recorded per case");
  app->add_option("--noise-threshold", a.noise_threshold,
                  "Mark a case noisy when a side's measuring thread waited for a CPU longer "
                  "than this share of the measured time, in percent")
      ->capture_default_str();
  app->add_option("--expect", a.expect,
                  "Check each case, e.g. transport=cma, transport!=tcp, bw>=8GB/s@1M, lat<=5us@8 "
                  "(repeatable); a miss is "
                  "status fail, exit code 3");
  app->add_option("--json", a.json,
                  "Results file (default: results/runs/<time>-<host>.json; '-': stdout, the "
                  "table then goes to stderr)");
  app->add_option("--jsonl", a.jsonl,
                  "Also write one JSON line per finished case, as it goes ('-': stdout)");
  app->add_flag("--no-json", a.no_json, "Write no results file");
  app->add_option("--units", a.units, "Bandwidth display: GB (1e9 B/s) or GiB")
      ->capture_default_str();
  app->add_option("--reconnect", a.reconnect,
                  "When the server goes away mid-sweep (it died or was restarted), try to reach "
                  "it again for this long before the remaining cases are not run (0: at once); "
                  "the case it took with it stays an error")
      ->capture_default_str();
  app->add_option("--timeout-connect", a.t_connect, "Bound on each connection attempt")
      ->capture_default_str();
  app->add_option("--timeout-handshake", a.t_handshake, "Bound on each control reply")
      ->capture_default_str();
  app->add_option("--timeout-case", a.t_case, "Bound on each phase of a case")
      ->capture_default_str();
  a.token.add(app, "Token the server requires");
  a.wait_busy.add(app);
  app->add_flag("-q,--quiet", a.quiet, "No table and no progress line");
}

run_config make_config(const run_args& a, const CLI::App& app) {
  run_config c;
  if (app.count("--iterations") > 0) {
    if (a.iterations < 2) throw usage_error("-n/--iterations must be at least 2");
    c.iterations = a.iterations;
    c.max_iterations = std::max(c.max_iterations, a.iterations);
  }
  c.duration = parse_duration(a.duration);
  if (a.min_iterations < 2) throw usage_error("--min-iterations must be at least 2");
  c.min_iterations = a.min_iterations;
  if (app.count("--warmup") > 0) c.warmup = a.warmup;
  if (a.window < 1 || a.window > max_window)
    throw usage_error(fmt::format("--window must be 1 to {}", max_window));
  c.window = a.window;
  if (a.repeat < 1 || a.repeat > 1000) throw usage_error("--repeat must be 1 to 1000");
  c.repeat = a.repeat;
  c.validate = a.validate;
  if (a.streams < 1 || a.streams > 64) throw usage_error("--streams must be 1 to 64");
  c.transport.streams = a.streams;
  c.transport.progress = parse_progress(a.progress);
  if (!a.sndbuf.empty()) c.transport.send_buffer_bytes = parse_size(a.sndbuf);
  if (!a.rcvbuf.empty()) c.transport.recv_buffer_bytes = parse_size(a.rcvbuf);
  c.timeouts.connect = parse_duration(a.t_connect);
  c.timeouts.handshake = parse_duration(a.t_handshake);
  c.timeouts.per_case = parse_duration(a.t_case);
  if (!(a.noise_threshold > 0 && a.noise_threshold <= 100))
    throw usage_error("--noise-threshold must be above 0 and at most 100 (%)");
  c.noise_threshold = a.noise_threshold / 100;
  return c;
}

// --transport as given; with --test, the transports that have those tests; else every built-in
// transport this host can run (one without its hardware, such as verbs with no RDMA device,
// stays out of the default sweep and is named on stderr).
std::vector<std::string> default_transports(const std::vector<std::string>& given,
                                            const std::vector<std::string>& tests) {
  if (!given.empty() || !tests.empty()) return given;
  std::vector<std::string> out;
  for (const auto& e : transport_registry::instance().all()) {
    const std::string why = e.unavailable ? e.unavailable() : std::string();
    if (why.empty()) {
      out.push_back(e.name);
    } else {
      fmt::print(stderr, "pairperf: {} is not in this sweep: {}\n", e.name, why);
    }
  }
  return out;
}

// Whether a case of `e` can be in the run: named by --transport, or, without it, having a test
// of --test, or any built-in transport when neither is given.
bool may_run(const transport_entry& e, const run_args& a) {
  if (!a.transports.empty())
    return std::find(a.transports.begin(), a.transports.end(), e.name) != a.transports.end();
  if (a.tests.empty()) return true;
  return std::any_of(e.tests.begin(), e.tests.end(), [&](const test_spec& t) {
    return std::find(a.tests.begin(), a.tests.end(), t.name) != a.tests.end();
  });
}

// Each transport's axis values (given or its default), for the matrix: only for the transports
// the run may have, since a default can cost time (libfabric's providers: a discovery, 0.3 s).
std::map<std::string, std::vector<std::string>> transport_axes(const run_args& a, bool local_run) {
  std::map<std::string, std::vector<std::string>> axes;
  for (const auto& [entry, cli] : a.transport_clis) {
    if (cli.axis && may_run(*entry, a)) axes[entry->name] = cli.axis(local_run);
  }
  return axes;
}

// Each selected transport's own options, checked by it; an option of a transport with no case
// selected is a usage error (it would apply to nothing).
nlohmann::json transport_own_options(const run_args& a, const std::vector<test_case>& cases) {
  std::set<std::string> used;
  for (const auto& c : cases) used.insert(c.transport);
  nlohmann::json own = nlohmann::json::object();
  for (const auto& [entry, cli] : a.transport_clis) {
    if (used.count(entry->name) == 0) {
      const auto given = cli.given ? cli.given() : std::vector<std::string>();
      if (!given.empty())
        throw usage_error(
            fmt::format("{} given, but no {} case is selected", given.front(), entry->name));
      continue;
    }
    if (cli.options) own[entry->name] = cli.options();
  }
  return own;
}

// --cpu CLIENT[,SERVER]: -1 where not given.
std::pair<int, int> parse_cpu_pair(const std::string& text) {
  if (text.empty()) return {-1, -1};
  const auto number = [&](const std::string& part) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 5)
      throw usage_error(fmt::format("--cpu {}: expected CLIENT[,SERVER], CPU numbers", text));
    return std::stoi(part);
  };
  const auto comma = text.find(',');
  if (comma == std::string::npos) return {number(text), -1};
  return {number(text.substr(0, comma)), number(text.substr(comma + 1))};
}

std::string default_results_path() {
  std::string host(256, '\0');
  ::gethostname(host.data(), host.size());
  host.resize(host.find('\0'));
  std::string stamp = utc_timestamp();
  std::erase(stamp, ':');
  return fmt::format("results/runs/{}-{}.json", stamp, host);
}

// Where results go: a progress line on a terminal (elapsed time, and the time left from
// `per_case_s`), the table, the results file (`json_path`, "" for none; checked now and its room
// for `cases` taken, so a path that cannot be written or a full disk fails before the sweep)
// and JSON lines.
multi_reporter make_reporters(const run_args& a, rate_unit unit, std::string& json_path,
                              double per_case_s, std::size_t cases) {
  const bool json_stdout = a.json == "-" || a.jsonl == "-";
  if (a.json == "-" && a.jsonl == "-")
    throw usage_error("--json - and --jsonl - both ask for stdout");
  multi_reporter out;
  if (!a.quiet && ::isatty(STDERR_FILENO) == 1)
    out.add(std::make_unique<progress_reporter>(stderr, per_case_s));
  if (!a.quiet) out.add(std::make_unique<console_reporter>(json_stdout ? stderr : stdout, unit));
  json_path = a.no_json ? std::string() : (a.json.empty() ? default_results_path() : a.json);
  if (!json_path.empty())
    out.add(std::make_unique<json_reporter>(json_path, a.json.empty(),
                                            results_file_room(cases, a.repeat)));
  if (!a.jsonl.empty()) out.add(std::make_unique<jsonl_reporter>(a.jsonl));
  return out;
}

// --gpu CLIENT[,SERVER] and --cpu CLIENT[,SERVER]: this side's GPU is selected and its CPU pinned
// now; the local server's share is returned for its command line.
struct server_placement {
  std::string gpu;  // "" for none
  int cpu = -1;     // -1 for none
};

server_placement place_sides(const run_args& a) {
  const auto comma = a.gpu.find(',');
  const std::string client_gpu = a.gpu.substr(0, comma);
  const std::string server_gpu = comma == std::string::npos ? client_gpu : a.gpu.substr(comma + 1);
  set_gpu_selection(parse_gpu_selector(client_gpu));
  const auto [client_cpu, server_cpu] = parse_cpu_pair(a.cpu);
  if (server_cpu >= 0 && !a.peer.empty())
    throw usage_error(
        "--cpu CLIENT,SERVER: the SERVER CPU applies to a local server only; pin a "
        "remote one with `pairperf server --cpu N`");
  if (client_cpu >= 0) pin_to_cpu(client_cpu);
  (void)parse_gpu_selector(server_gpu);  // a bad value is a usage error before anything starts
  return {server_gpu, server_cpu};
}

// The matrix of cases the command line asks for (a local sweep stays on loopback).
std::vector<test_case> requested_cases(const run_args& a, bool local_run) {
  matrix_request req{default_transports(a.transports, a.tests),
                     a.tests,
                     parse_size_list(a.sizes),
                     transport_axes(a, local_run),
                     a.ifaces,
                     {}};
  // A local sweep stays on loopback, whatever else this host's transports could reach.
  if (local_run && req.ifaces.empty()) req.ifaces = {"lo"};
  for (const auto& m : a.memory) req.memory.push_back(parse_memory_pair(m));
  return expand_matrix(req, transport_registry::instance(), usable_interfaces());
}

// --expect, each of which must apply to some case of the run (else a usage error).
std::vector<expectation> run_expectations(const run_args& a, const std::vector<test_case>& cases) {
  std::vector<expectation> out;
  for (const auto& text : a.expect) {
    expectation e = parse_expectation(text);
    if (std::none_of(cases.begin(), cases.end(),
                     [&](const test_case& c) { return applies(e, c); })) {
      throw usage_error(fmt::format(
          "--expect {}: no case of this run can be checked against it (wrong size or pattern?)",
          text));
    }
    out.push_back(std::move(e));
  }
  return out;
}

// The transports of the cases, in their first case's order.
std::vector<std::string> case_transports(const std::vector<test_case>& cases) {
  std::vector<std::string> used;
  for (const auto& c : cases) {
    if (std::find(used.begin(), used.end(), c.transport) == used.end()) used.push_back(c.transport);
  }
  return used;
}

// Where the client finds its server: a local one started into `local` (serving the transports
// `used`, with its GPU and CPU), or the peer given. A signal while it starts leaves o.server unset.
void reach_server(const run_args& a, const server_placement& server,
                  const std::vector<std::string>& used, client_options& o,
                  std::optional<local_server>& local) {
  if (a.peer.empty() && interrupt_signal().load() == 0) {
    std::vector<std::string> extra;
    if (!used.empty()) extra = {"--transport", fmt::format("{}", fmt::join(used, ","))};
    if (!server.gpu.empty()) extra.insert(extra.end(), {"--gpu", server.gpu});
    if (server.cpu >= 0) extra.insert(extra.end(), {"--cpu", std::to_string(server.cpu)});
    // Not --once: after a case whose process was ended the client connects again.
    try {
      local.emplace(o.config.timeouts.connect + o.config.timeouts.handshake, false, extra);
      o.server = endpoint{"127.0.0.1", local->port()};
    } catch (const std::exception&) {
      // A terminal's Ctrl-C reaches the whole process group, the starting server too.
      if (interrupt_signal().load() == 0) throw;
    }
  } else if (!a.peer.empty()) {
    o.server = parse_endpoint(a.peer, default_control_port);
  }
}

// The sweep: a server that stayed busy or a failed step is a summary too; a signal that ended
// the hello counts every case as planned; a stream that stopped mid-sweep is recorded.
run_summary run_sweep(const client_options& o, multi_reporter& out) {
  run_summary sum;
  try {
    sum = run_client(o, out);
  } catch (const server_stayed_busy& e) {
    sum.busy = e.what();  // measured nothing, and failed nothing: inconclusive
  } catch (const step_error& e) {
    sum.fatal = e.what();  // the results file still gets the context this side knows
  }
  if (sum.interrupted == 0 && (sum.interrupted = interrupt_signal().load()) != 0)
    sum.planned = o.cases.size();  // a signal ended the hello: no case ran
  // A stream that stopped mid-sweep (a disk that filled) fails the run; the results file, whose
  // room was taken at the start, still holds every case.
  sum.lost_output = out.failures();
  return sum;
}

// The run's end: its errors and reasons on stderr, the outcome to the reporters, where the
// results went; returns the exit code.
int finish_run(const run_args& a, const run_summary& sum, multi_reporter& out,
               const std::string& json_path, bool json_stdout) {
  // Errors and reasons first, then the summary line (the console reporter's finalize).
  const verdict_outcome outcome = sum.outcome();
  for (const auto& why : outcome.reasons)
    fmt::print(stderr, "pairperf: {}: {}\n", to_string(outcome.status), why);
  out.report_outcome(to_json(sum));
  out.finalize();
  const auto lost = out.failures();
  if (lost.size() > sum.lost_output.size()) {
    // The results file itself could not be written (said above as it failed); the previous file
    // is kept and no half-written one is left.
    const int code = sum.exit_code();
    return code >= 128 ? code : pairperf::code(exit_status::failed);
  }
  if (!json_path.empty() && json_path != "-")
    fmt::print(a.quiet || json_stdout ? stderr : stdout, "results: {}\n", json_path);
  return sum.exit_code();
}

int run_command(const run_args& a, const CLI::App& app, const std::vector<std::string>& argv) {
  // From the first moment: a signal while the local server starts still writes a results file.
  catch_interrupts();
  const server_placement server = place_sides(a);
  client_options o;
  o.config = make_config(a, app);
  const rate_unit unit = parse_rate_unit(a.units);
  const bool local_run = a.peer.empty();
  o.cases = requested_cases(a, local_run);
  o.config.transport.own = transport_own_options(a, o.cases);
  o.expectations = run_expectations(a, o.cases);
  o.token = a.token.resolve();
  o.argv = argv;
  o.interrupted = &interrupt_signal();
  o.wait_busy = a.wait_busy.resolve();
  o.reconnect = a.reconnect == "0" ? std::chrono::nanoseconds(0) : parse_duration(a.reconnect);

  // "-" puts the results on stdout; the table then goes to stderr so stdout stays JSON.
  const bool json_stdout = a.json == "-" || a.jsonl == "-";
  std::string json_path;
  multi_reporter out =
      make_reporters(a, unit, json_path, planned_case_seconds(o.config), o.cases.size());
  // The transports of this run's cases: only their libraries are described (and loaded or
  // probed) on this side and on a local server.
  const std::vector<std::string> used = case_transports(o.cases);
  // This side's facts are gathered while the local server starts (it gathers its own).
  auto facts = std::async(std::launch::async, [&used] { prepare_context(used); });
  std::optional<local_server> local;
  reach_server(a, server, used, o, local);
  facts.get();
  const run_summary sum = run_sweep(o, out);
  return finish_run(a, sum, out, json_path, json_stdout);
}

}  // namespace

command add_run(CLI::App& root, const std::vector<std::string>& argv) {
  auto args = std::make_shared<run_args>();
  CLI::App* app = root.add_subcommand(
      "run", "Measure against a server (or a local one): the sweep of sizes x tests x interfaces");
  register_options(app, *args);
  return command{app, [args, app, argv] { return run_command(*args, *app, argv); }};
}

}  // namespace pairperf::cli
