// `pairperf mesh` under mpirun/srun: every rank serves, the schedule's client ranks measure
// towards their partners round by round, rank 0 gathers, retests outliers alone, compares the
// nodes and writes the matrices. MPI only starts the processes, tells ranks and hosts, carries
// the control addresses, holds the barriers and gathers the results; the measured bytes move over
// the selected pairperf transport between the two ranks of each pair.
#include <fmt/format.h>
#include <mpi.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <thread>

#include "bench/pairperf/commands.h"
#include "harness/client.h"
#include "harness/context.h"
#include "harness/errors.h"
#include "harness/expect.h"
#include "harness/interfaces.h"
#include "harness/matrix.h"
#include "harness/mesh.h"
#include "harness/server.h"
#include "harness/socket.h"
#include "harness/units.h"
#include "transports/registry.h"

namespace pairperf::cli {
namespace {

struct mesh_args {
  std::string transport = "tcp";
  std::vector<std::string> tests;
  std::string sizes;
  std::string iface;
  std::string pattern = "all-pairs";
  std::string duration = "0.2s";
  bool no_retest = false;
  double retest_bw = 0.5, retest_lat = 3.0;
  std::vector<std::string> expect;
  std::string json;
  std::string t_connect = "3s", t_case = "10s", deadline;
  std::vector<std::string> hosts;
};

class collector final : public reporter {
 public:
  void report_context(const nlohmann::json&) override {}
  void report_result(const case_result& r) override { results.push_back(r); }
  void finalize() override {}
  std::vector<case_result> results;
};

// Every rank's facts, as rank 0 and the clients need them.
struct node {
  std::string name, address, note;
  std::uint16_t port = 0;
  nlohmann::json host, env;
};

std::string first_ipv4(const std::string& iface, std::string& note) {
  for (const auto& info : usable_interfaces()) {
    if (!iface.empty() && info.name != iface) continue;
    if (iface.empty() && info.loopback) continue;
    for (const auto& a : info.addresses) {
      if (a.family == AF_INET) return a.address;
    }
  }
  note = iface.empty() ? "no IPv4 interface"
                       : fmt::format("no interface {} with an IPv4 address", iface);
  return {};
}

std::vector<std::string> allgather(const std::string& mine) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> offs(lens.size(), 0);
  for (std::size_t i = 1; i < lens.size(); ++i) offs[i] = offs[i - 1] + lens[i - 1];
  std::string all(static_cast<std::size_t>(offs.back() + lens.back()), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR,
                 MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < lens.size(); ++i)
    out.push_back(all.substr(static_cast<std::size_t>(offs[i]), static_cast<std::size_t>(lens[i])));
  return out;
}

pair_result measure(const node_pair& pair, const std::vector<node>& nodes,
                    const std::vector<test_case>& cases, const run_config& config) {
  pair_result out{pair, {}, {}, "ok"};
  const node& peer = nodes[static_cast<std::size_t>(pair.server)];
  const auto unreachable = [&](const std::string& why, const std::string& code) {
    for (const auto& c : cases) {
      case_result r;
      r.test = c;
      r.status = case_status::unreachable;
      r.message = why;
      r.error_code = code;
      out.results.push_back(r);
    }
    out.verdict = "unreachable";
  };
  if (peer.address.empty()) {
    unreachable(fmt::format("{} serves on no address: {}", peer.name, peer.note), "");
    return out;
  }
  const node& me = nodes[static_cast<std::size_t>(pair.client)];
  if (me.address.empty()) {
    unreachable(fmt::format("{} has {}", me.name, me.note), "");
    return out;
  }
  client_options o;
  o.server = endpoint{peer.address, peer.port};
  o.config = config;
  o.cases = cases;
  collector got;
  try {
    run_client(o, got);
    out.results = std::move(got.results);
  } catch (const step_error& e) {
    unreachable(e.what(), e.sys_errno() != 0 ? errno_name(e.sys_errno()) : "");
    return out;
  }
  for (const auto& r : out.results) {
    if (r.status == case_status::unreachable) out.verdict = "unreachable";
    if (r.status == case_status::error && out.verdict == "ok") out.verdict = "error";
  }
  return out;
}

std::vector<pair_result> gather_pairs(const std::vector<pair_result>& mine, int rank) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& p : mine) {
    j.push_back({{"client", p.pair.client},
                 {"server", p.pair.server},
                 {"verdict", p.verdict},
                 {"results", p.results}});
  }
  const std::string text = j.dump();
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<std::size_t>(size));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offs(lens.size(), 0);
  std::string all;
  if (rank == 0) {
    for (std::size_t i = 1; i < lens.size(); ++i) offs[i] = offs[i - 1] + lens[i - 1];
    all.resize(static_cast<std::size_t>(offs.back() + lens.back()));
  }
  MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  std::vector<pair_result> out;
  if (rank != 0) return out;
  for (std::size_t i = 0; i < lens.size(); ++i) {
    for (const auto& p : nlohmann::json::parse(
             all.substr(static_cast<std::size_t>(offs[i]), static_cast<std::size_t>(lens[i])))) {
      out.push_back(pair_result{{p.at("client").get<int>(), p.at("server").get<int>()},
                                p.at("results").get<std::vector<case_result>>(),
                                {},
                                p.at("verdict").get<std::string>()});
    }
  }
  return out;
}

int mesh_mpi(const mesh_args& a, const std::vector<std::string>& argv) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto start = std::chrono::steady_clock::now();

  // What to run: the transport's bandwidth and latency tests at 1 MiB and 8 B unless told.
  run_config config;
  config.duration = parse_duration(a.duration);
  config.timeouts.connect = parse_duration(a.t_connect);
  config.timeouts.per_case = parse_duration(a.t_case);
  std::vector<std::string> tests = a.tests;
  const transport_entry* entry = transport_registry::instance().find(a.transport);
  if (entry == nullptr) throw usage_error(fmt::format("unknown transport '{}'", a.transport));
  if (tests.empty()) {
    for (const auto& t : entry->tests) {
      const bool bw = t.pattern == pattern_kind::stream_uni && t.data_op == op_kind::send;
      const bool lat = t.pattern == pattern_kind::pingpong && t.data_op == op_kind::send;
      if ((bw || lat) && std::string(t.name).find("am_") != 0) tests.emplace_back(t.name);
    }
  }
  std::vector<test_case> cases;
  for (const auto& name : tests) {
    const test_spec* spec = transport_registry::instance().find_test(a.transport, name);
    if (spec == nullptr)
      throw usage_error(fmt::format("transport {} has no test {}", a.transport, name));
    const bool lat = spec->pattern == pattern_kind::pingpong;
    for (auto size_bytes : parse_size_list(a.sizes.empty() ? (lat ? "8" : "1M") : a.sizes)) {
      test_case c;
      c.index = cases.size();
      c.transport = a.transport;
      c.test = name;
      c.pattern = spec->pattern;
      c.iface = a.iface;
      c.size_bytes = size_bytes;
      cases.push_back(c);
    }
  }
  std::vector<expectation> expectations;
  for (const auto& e : a.expect) expectations.push_back(parse_expectation(e));
  const auto schedule = mesh_schedule(size, parse_mesh_pattern(a.pattern));

  // Bound the whole mesh: a rank that hangs outside pairperf's own timeouts must not hang the rest.
  const auto per_pair =
      std::chrono::duration<double>(config.timeouts.connect + 2 * config.timeouts.handshake +
                                    static_cast<long>(cases.size()) * 2 *
                                        (config.timeouts.per_case + config.timeouts.handshake))
          .count();
  const double bound = a.deadline.empty()
                           ? per_pair * static_cast<double>(schedule.size() * 2 + 2) + 30
                           : std::chrono::duration<double>(parse_duration(a.deadline)).count();
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    const auto until = start + std::chrono::duration<double>(bound);
    while (!finished.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!finished.load()) {
      fmt::print(
          stderr,
          "pairperf mesh: rank {} still running after {:.0f} s (--deadline): aborting the job\n",
          rank, bound);
      MPI_Abort(MPI_COMM_WORLD, 124);
    }
  });

  // Serve on the data interface's address; a rank without it serves nothing, and its pairs say so.
  node me;
  me.address = first_ipv4(a.iface, me.note);
  std::atomic<bool> stop{false};
  std::thread server;
  if (!me.address.empty()) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    server_options so;
    so.listen_host = me.address;
    so.ready_fd = fds[1];
    so.log = nullptr;
    so.timeouts = config.timeouts;
    server = std::thread([so, &stop] {
      try {
        run_server(so, stop);
      } catch (const std::exception& e) {
        fmt::print(stderr, "pairperf mesh: server: {}\n", e.what());
      }
    });
    char buf[16] = {};
    const ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
    ::close(fds[0]);
    me.port = static_cast<std::uint16_t>(n > 0 ? std::atoi(buf) : 0);
    if (me.port == 0) {
      me.note = "its server did not start";
      me.address.clear();
    }
  }
  const nlohmann::json mine{{"hostname", host_context().value("hostname", "?")},
                            {"address", me.address},
                            {"port", me.port},
                            {"note", me.note},
                            {"host", host_context()},
                            {"env", relevant_environment()}};
  std::vector<node> nodes;
  std::map<std::string, int> seen_names;
  const auto facts = allgather(mine.dump());
  for (const auto& f : facts) ++seen_names[nlohmann::json::parse(f).value("hostname", "?")];
  for (std::size_t i = 0; i < facts.size(); ++i) {
    const auto j = nlohmann::json::parse(facts[i]);
    node n;
    const std::string h = j.value("hostname", "?");
    n.name = seen_names[h] > 1 ? fmt::format("{}:{}", h, i) : h;
    n.address = j.value("address", "");
    n.port = j.value("port", std::uint16_t{0});
    n.note = j.value("note", "");
    n.host = j.at("host");
    n.env = j.at("env");
    nodes.push_back(std::move(n));
  }

  std::vector<pair_result> my_pairs;
  std::vector<double> round_seconds;
  for (const auto& round : schedule) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& p : round) {
      if (p.client == rank) my_pairs.push_back(measure(p, nodes, cases, config));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    round_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<pair_result> pairs = gather_pairs(my_pairs, rank);

  // Outliers again, alone: a pair that is slow with nothing else running is a slow link; one that
  // recovers was contention.
  std::vector<std::size_t> outliers;
  if (rank == 0 && !a.no_retest)
    outliers = find_outliers(pairs, outlier_rule{a.retest_bw, a.retest_lat});
  int n_out = static_cast<int>(outliers.size());
  MPI_Bcast(&n_out, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> retest_pairs(static_cast<std::size_t>(2 * n_out));
  if (rank == 0) {
    for (std::size_t i = 0; i < outliers.size(); ++i) {
      retest_pairs[2 * i] = pairs[outliers[i]].pair.client;
      retest_pairs[2 * i + 1] = pairs[outliers[i]].pair.server;
    }
  }
  if (n_out > 0) MPI_Bcast(retest_pairs.data(), 2 * n_out, MPI_INT, 0, MPI_COMM_WORLD);
  double retest_seconds = 0;
  std::vector<pair_result> my_retests;
  for (int i = 0; i < n_out; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    const node_pair p{retest_pairs[static_cast<std::size_t>(2 * i)],
                      retest_pairs[static_cast<std::size_t>(2 * i + 1)]};
    if (p.client == rank) my_retests.push_back(measure(p, nodes, cases, config));
    MPI_Barrier(MPI_COMM_WORLD);
    retest_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const std::vector<pair_result> retests = gather_pairs(my_retests, rank);

  stop.store(true);
  if (server.joinable()) server.join();
  int code = 0;
  if (rank == 0) {
    const outlier_rule rule{a.retest_bw, a.retest_lat};
    for (const auto& r : retests) {
      for (auto& p : pairs) {
        if (!(p.pair == r.pair)) continue;
        p.retest = r.results;
        if (r.verdict != "ok") {
          p.verdict = r.verdict;
        } else {
          // Alone it is fine: the first figure was contention; still slow alone: a slow link.
          std::vector<pair_result> probe = pairs;
          for (auto& q : probe) {
            if (q.pair == p.pair) q.results = r.results;
          }
          const auto again = find_outliers(probe, rule);
          const auto idx = static_cast<std::size_t>(&p - pairs.data());
          p.verdict = std::find(again.begin(), again.end(), idx) != again.end() ? "slow link"
                                                                                : "contention";
        }
      }
    }
    for (auto& p : pairs) {
      for (auto& r : p.retest.empty() ? p.results : p.retest) apply_expectations(expectations, r);
    }
    std::vector<std::string> names;
    std::vector<nlohmann::json> hosts, envs;
    for (const auto& n : nodes) {
      names.push_back(n.name);
      hosts.push_back(n.host);
      envs.push_back(n.env);
    }
    const std::vector<finding> findings = compare_nodes(names, hosts, envs);
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("pairperf mesh: {} nodes, {} ({} rounds of up to {} pairs), {} {}\n", size,
               a.pattern, schedule.size(), schedule.empty() ? 0 : schedule.front().size(),
               a.transport, fmt::join(tests, ","));
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      fmt::print("  {:>3} {:<14} {}\n", i, nodes[i].name,
                 nodes[i].address.empty() ? "serves nothing: " + nodes[i].note
                                          : fmt::format("{}:{}", nodes[i].address, nodes[i].port));
    }
    print_matrix(stdout, names, pairs, false);
    print_matrix(stdout, names, pairs, true);
    std::size_t bad = 0, failed_checks = 0;
    for (const auto& p : pairs) {
      if (p.verdict != "ok" && p.verdict != "contention") {
        ++bad;
        const auto& rs = p.retest.empty() ? p.results : p.retest;
        fmt::print("  {} -> {}: {}{}\n", names[static_cast<std::size_t>(p.pair.client)],
                   names[static_cast<std::size_t>(p.pair.server)], p.verdict,
                   rs.empty() || rs.front().message.empty() ? "" : ": " + rs.front().message);
      }
      for (const auto& r : p.retest.empty() ? p.results : p.retest)
        failed_checks += r.status == case_status::fail ? 1 : 0;
    }
    if (!findings.empty()) {
      fmt::print("\nFindings ({}):\n", findings.size());
      std::size_t k = 0;
      for (const auto& f : findings)
        fmt::print("  {}. [{}] {}: {}\n     fix: {}\n", ++k, f.side, f.subject, f.problem, f.fix);
    }
    fmt::print(
        "\n{} pair(s), {} not ok; rounds {:.1f} s, retests {:.1f} s ({} pairs), total {:.1f} s\n",
        pairs.size(), bad, std::accumulate(round_seconds.begin(), round_seconds.end(), 0.0),
        retest_seconds, n_out, total);
    if (!a.json.empty()) {
      nlohmann::json doc{
          {"schema", "pairperf.mesh"},
          {"schema_version", "1.0.0"},
          {"context",
           {{"tool", tool_context()},
            {"argv", argv},
            {"time_utc", utc_timestamp()},
            {"pattern", a.pattern},
            {"transport", a.transport},
            {"tests", tests},
            {"config", config}}},
          {"nodes", nlohmann::json::array()},
          {"mesh", mesh_matrices(size, names, pairs)},
          {"findings", findings},
          {"timing_s", {{"rounds", round_seconds}, {"retests", retest_seconds}, {"total", total}}}};
      for (const auto& n : nodes)
        doc["nodes"].push_back({{"name", n.name},
                                {"address", n.address},
                                {"port", n.port},
                                {"note", n.note},
                                {"host", n.host},
                                {"env", n.env}});
      std::ofstream f(a.json);
      f << doc.dump(2) << '\n';
      fmt::print("results: {}\n", a.json);
    }
    code = bad > 0 ? 1 : (!findings.empty() || failed_checks > 0) ? 3 : 0;
  }
  finished.store(true);
  watchdog.join();
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rank == 0 ? code : 0;
}

}  // namespace

command add_mesh(CLI::App& root, const std::vector<std::string>& argv) {
  auto a = std::make_shared<mesh_args>();
  CLI::App* app = root.add_subcommand("mesh",
                                      "All pairs of many nodes under mpirun/srun (`mpirun -np N "
                                      "pairperf mesh`): n x n bandwidth and "
                                      "latency matrices, outliers retested alone, interface and "
                                      "variable differences between nodes");
  app->add_option("-t,--transport", a->transport, "Transport for every pair")
      ->capture_default_str();
  app->add_option("--test", a->tests,
                  "Tests (default: the transport's bandwidth and latency tests)")
      ->delimiter(',');
  app->add_option("-s,--sizes", a->sizes,
                  "Message sizes (default: 1M for bandwidth, 8 for latency)");
  app->add_option("-i,--iface", a->iface,
                  "The data interface on every node (its address serves, its pairs bind to it)");
  app->add_option("--pattern", a->pattern, "all-pairs, ring or one-to-all")->capture_default_str();
  app->add_option("-d,--duration", a->duration, "Time budget per case")->capture_default_str();
  app->add_flag("--no-retest", a->no_retest, "Do not rerun outliers alone");
  app->add_option("--retest-bw", a->retest_bw,
                  "Outlier: bandwidth below this fraction of the median")
      ->capture_default_str();
  app->add_option("--retest-lat", a->retest_lat,
                  "Outlier: latency above this multiple of the minimum")
      ->capture_default_str();
  app->add_option("--expect", a->expect, "Check every pair's cases (as for run)");
  app->add_option("--json", a->json, "Results file (schema pairperf.mesh), written by rank 0");
  app->add_option("--timeout-connect", a->t_connect, "Bound on each connection attempt")
      ->capture_default_str();
  app->add_option("--timeout-case", a->t_case, "Bound on each phase of a case")
      ->capture_default_str();
  app->add_option("--deadline", a->deadline,
                  "Abort the whole job after this long (default: from the timeouts)");
  return command{app, [a, argv] { return mesh_mpi(*a, argv); }};
}

}  // namespace pairperf::cli
