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

#include "core/errors.h"
#include "core/interfaces.h"
#include "core/output.h"
#include "core/socket.h"
#include "core/units.h"
#include "harness/client.h"
#include "harness/context.h"
#include "harness/expect.h"
#include "harness/matrix.h"
#include "harness/server.h"
#include "mesh/mesh.h"
#include "mesh/mesh_common.h"
#include "transports/registry.h"

namespace pairperf::mesh {
namespace {

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

pair_result measure(const node_pair& pair, const std::vector<mesh_node>& nodes,
                    const mesh_plan& plan) {
  const mesh_node& peer = nodes[static_cast<std::size_t>(pair.server)];
  const mesh_node& me = nodes[static_cast<std::size_t>(pair.client)];
  if (peer.address.empty())
    return unreachable_pair(pair, plan.cases,
                            fmt::format("{} serves on no address: {}", peer.name, peer.note), "");
  if (me.address.empty())
    return unreachable_pair(pair, plan.cases, fmt::format("{} has {}", me.name, me.note), "");
  client_options o;
  o.server = endpoint{peer.address, peer.port};
  o.config = plan.config;
  o.cases = plan.cases;
  // Open MPI does not support fork() in its processes, and this rank's server runs in a
  // thread of it: the cases run in this process.
  o.isolate = false;
  collecting_reporter got;
  try {
    run_client(o, got);
  } catch (const step_error& e) {
    return unreachable_pair(pair, plan.cases, e.what(),
                            e.sys_errno() != 0 ? errno_name(e.sys_errno()) : "");
  }
  pair_result out{pair, std::move(got.results), {}, "ok"};
  judge(out);
  return out;
}

// A barrier that sleeps while it waits. MPI_Barrier busy-polls: a rank waiting in it (the server
// side of a pair, whose measuring thread shares the process, or an idle rank on a node that also
// hosts a pair) takes a CPU from the very measurement the round is for, and the host-noise meter
// marks every pair noisy. A 200 us sleep between tests costs nothing against a round's length.
void quiet_barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibarrier(MPI_COMM_WORLD, &req);
  int done = 0;
  for (;;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done != 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
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

// Serves on the data interface's address, in a thread of this process; a rank without that
// address serves nothing, and its pairs say so (me.note).
std::thread start_node_server(const std::string& iface, const timeouts& bounds, mesh_node& me,
                              std::atomic<bool>& stop) {
  me.address = first_ipv4(iface, me.note);
  if (me.address.empty()) return {};
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  server_options so;
  so.listen_host = me.address;
  so.ready_fd = fds[1];
  so.log = nullptr;
  so.timeouts = bounds;
  so.isolate = false;  // a thread of an MPI process: no fork()
  std::thread server([so, &stop] {
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
  return server;
}

// Every rank's node (name, address, port, host facts, variables), in rank order.
std::vector<mesh_node> exchange_nodes(const mesh_node& me) {
  describe_nccl_in_context();  // this node's libnccl.so.2 answers, in its host facts
  const nlohmann::json mine{{"hostname", host_context().value("hostname", "?")},
                            {"address", me.address},
                            {"port", me.port},
                            {"note", me.note},
                            {"host", host_context()},
                            {"env", relevant_environment()},
                            {"libraries", application_libraries()}};
  std::vector<mesh_node> nodes;
  for (const auto& f : allgather(mine.dump())) {
    const auto j = nlohmann::json::parse(f);
    mesh_node n;
    n.name = j.value("hostname", "?");
    n.address = j.value("address", "");
    n.port = j.value("port", std::uint16_t{0});
    n.note = j.value("note", "");
    n.host = j.at("host");
    n.env = j.at("env");
    n.libraries = j.value("libraries", nlohmann::json::object());
    nodes.push_back(std::move(n));
  }
  name_nodes(nodes);
  return nodes;
}

// One barrier per round of `rounds` (it ends one round and starts the next; one more ends the
// last); this rank measures the pairs it is the client of. Returns its pairs; `seconds` gets
// each round's time, barrier to barrier.
std::vector<pair_result> run_rounds(const std::vector<mesh_round>& rounds,
                                    const std::vector<mesh_node>& nodes, const mesh_plan& plan,
                                    int rank, std::vector<double>& seconds) {
  std::vector<pair_result> mine;
  quiet_barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& round : rounds) {
    for (const auto& p : round) {
      if (p.client == rank) mine.push_back(measure(p, nodes, plan));
    }
    quiet_barrier();
    const auto t1 = std::chrono::steady_clock::now();
    seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    t0 = t1;
  }
  return mine;
}

// Outliers again, alone: a pair that is slow with nothing else running is a slow link; one that
// recovers was contention. Rank 0 picks them and tells the others; returns every rank's retests
// (on rank 0) and their total time in `seconds`.
std::vector<pair_result> retest_outliers(const mesh_args& a, const std::vector<pair_result>& pairs,
                                         const std::vector<mesh_node>& nodes, const mesh_plan& plan,
                                         int rank, double& seconds) {
  std::vector<std::size_t> outliers;
  if (rank == 0 && !a.no_retest)
    outliers = find_retests(pairs, outlier_rule{a.retest_bw, a.retest_lat});
  int n_out = static_cast<int>(outliers.size());
  MPI_Bcast(&n_out, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> flat(static_cast<std::size_t>(2 * n_out));
  for (std::size_t i = 0; i < outliers.size(); ++i) {
    flat[2 * i] = pairs[outliers[i]].pair.client;
    flat[2 * i + 1] = pairs[outliers[i]].pair.server;
  }
  if (n_out > 0) MPI_Bcast(flat.data(), 2 * n_out, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<mesh_round> rounds;
  for (int i = 0; i < n_out; ++i)
    rounds.push_back({node_pair{flat[static_cast<std::size_t>(2 * i)],
                                flat[static_cast<std::size_t>(2 * i + 1)]}});
  std::vector<double> each;
  const std::vector<pair_result> mine = run_rounds(rounds, nodes, plan, rank, each);
  seconds = std::accumulate(each.begin(), each.end(), 0.0);
  return gather_pairs(mine, rank);
}

}  // namespace

int mesh_mpi(const mesh_args& a, const std::vector<std::string>& argv) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto start = std::chrono::steady_clock::now();

  const mesh_plan plan = make_plan(a, size);
  // The results path is checked before the rounds, not found unwritable after them (mpirun
  // ends the other ranks when this one exits with the usage error).
  if (rank == 0 && !a.json.empty()) check_output(a.json);
  const run_config& config = plan.config;
  const auto& schedule = plan.schedule;
  // Bound the whole mesh: a rank that hangs outside pairperf's own timeouts must not hang the rest.
  const double bound = a.deadline.empty()
                           ? plan.pair_bound_s * static_cast<double>(schedule.size() * 2 + 2) + 30
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

  mesh_node me;
  std::atomic<bool> stop{false};
  std::thread server = start_node_server(a.iface, config.timeouts, me, stop);
  const std::vector<mesh_node> nodes = exchange_nodes(me);

  std::vector<double> round_seconds;
  const std::vector<pair_result> my_pairs = run_rounds(schedule, nodes, plan, rank, round_seconds);
  std::vector<pair_result> pairs = gather_pairs(my_pairs, rank);

  double retest_seconds = 0;
  const std::vector<pair_result> retests =
      retest_outliers(a, pairs, nodes, plan, rank, retest_seconds);

  stop.store(true);
  if (server.joinable()) server.join();
  int code = 0;
  if (rank == 0)
    code = finish_mesh(a, argv, plan, nodes, pairs, retests, round_seconds, retest_seconds, start);
  finished.store(true);
  watchdog.join();
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rank == 0 ? code : 0;
}

}  // namespace pairperf::mesh
