// pairperf_gloo_loop: torch.distributed's point-to-point calls on libgloo, with nothing of
// pairperf's in the process: the peer of scripts/compare-peers' gloo rows, beside torch itself.
//
// As torch's ProcessGroupGloo (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, send/recv and
// their Work's wait): a gloo TCP device from the hostname or an interface (GLOO_SOCKET_IFNAME), a
// context of two ranks connected through a rendezvous store (connectFullMesh; a FileStore here
// where torch uses its TCPStore), one unbound buffer per operation (createUnboundBuffer), posted
// with send(rank, slot) / recv(rank, slot), and waited for in the caller with waitSend() /
// waitRecv(), which sleep until gloo's event loop thread completes the operation.
//
//   lat  ping-pong: rank 0 posts its receive, sends, waits for the send and the receive (torch's
//        irecv, send, wait); rank 1 waits for a request, posts the next receive, answers and
//        waits for the answer to leave. One-way latency = round trip / 2, every round trip a
//        sample.
//   bw   rank 0 streams to rank 1 with --window operations in flight on each side; each
//        completion reposts its buffer. Rank 1 times from its start (receives posted, then its
//        "go" to the sender) to its last arrival, as pairperf's receiver does.
//
// Two processes: the parent is rank 1, the forked child rank 0. Prints one JSON object.
// Exit status: 0 measured, 1 failed (gloo's error, the other side gone, --timeout), 2 usage.
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;
constexpr std::uint64_t data_slot = 1;  // torch's tag 0 maps to a slot of its own; any will do
constexpr std::uint64_t go_slot = 2;

struct options {
  std::string test = "lat";
  std::size_t size = 8;
  std::uint64_t iterations = 10000;
  std::uint64_t warmup = 1000;
  unsigned window = 32;
  std::string hostname = "127.0.0.1";
  double timeout_s = 60;
};

std::shared_ptr<gloo::transport::Device> make_device(const options& o) {
  gloo::transport::tcp::attr attr;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname) {
    attr.iface = ifname;
  } else {
    attr.hostname = o.hostname;
  }
  return gloo::transport::tcp::CreateDevice(attr);
}

std::shared_ptr<gloo::rendezvous::Context> connect(int rank, const std::string& store_dir,
                                                   const options& o) {
  gloo::rendezvous::FileStore store(store_dir);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, 2);
  context->setTimeout(std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000)));
  auto device = make_device(o);
  context->connectFullMesh(store, device);
  return context;
}

// One operation as ProcessGroupGloo makes it: its own unbound buffer.
std::unique_ptr<gloo::transport::UnboundBuffer> post(gloo::rendezvous::Context& c, bool send,
                                                     std::byte* data, std::size_t size,
                                                     std::uint64_t slot) {
  auto buf = c.createUnboundBuffer(data, size);
  if (send) {
    buf->send(1 - c.rank, slot);
  } else {
    buf->recv(1 - c.rank, slot);
  }
  return buf;
}

nlohmann::json pingpong(gloo::rendezvous::Context& c, const options& o) {
  std::vector<std::byte> s(o.size), r(o.size);
  std::vector<double> samples;
  samples.reserve(o.iterations);
  const std::uint64_t total = o.warmup + o.iterations;
  if (c.rank == 0) {
    for (std::uint64_t i = 0; i < total; ++i) {
      const auto t0 = steady::now();
      auto rb = post(c, false, r.data(), o.size, data_slot);
      auto sb = post(c, true, s.data(), o.size, data_slot);
      sb->waitSend();
      rb->waitRecv();
      if (i >= o.warmup)
        samples.push_back(std::chrono::duration<double>(steady::now() - t0).count());
    }
    std::sort(samples.begin(), samples.end());
    const auto at = [&](double q) {
      return samples[std::min(samples.size() - 1,
                              static_cast<std::size_t>(q * static_cast<double>(samples.size())))] /
             2;
    };
    double sum = 0;
    for (const double v : samples) sum += v;
    return {{"latency_s",
             {{"p50", at(0.5)},
              {"p99", at(0.99)},
              {"avg", sum / static_cast<double>(samples.size()) / 2}}},
            {"iterations", o.iterations}};
  }
  auto rb = post(c, false, r.data(), o.size, data_slot);
  for (std::uint64_t i = 0; i < total; ++i) {
    rb->waitRecv();
    if (i + 1 < total) rb = post(c, false, r.data(), o.size, data_slot);
    auto sb = post(c, true, s.data(), o.size, data_slot);
    sb->waitSend();
  }
  return nullptr;
}

// One stream of n messages; returns rank 1's span (start to last arrival), 0 on rank 0.
double stream(gloo::rendezvous::Context& c, const options& o, std::uint64_t n,
              std::vector<std::vector<std::byte>>& slots) {
  const bool sender = c.rank == 0;
  std::vector<std::byte> go(8);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> inflight(slots.size());
  const unsigned window = static_cast<unsigned>(slots.size());
  if (sender) {
    post(c, false, go.data(), go.size(), go_slot)->waitRecv();
    std::uint64_t posted = 0;
    for (; posted < std::min<std::uint64_t>(window, n); ++posted)
      inflight[posted % window] = post(c, true, slots[posted % window].data(), o.size, data_slot);
    for (std::uint64_t done = 0; done < n; ++done) {
      inflight[done % window]->waitSend();
      if (posted < n) {
        inflight[posted % window] = post(c, true, slots[posted % window].data(), o.size, data_slot);
        ++posted;
      }
    }
    post(c, false, go.data(), go.size(), go_slot)->waitRecv();  // the receiver's "got all"
    return 0;
  }
  std::uint64_t posted = 0;
  for (; posted < std::min<std::uint64_t>(window, n); ++posted)
    inflight[posted % window] = post(c, false, slots[posted % window].data(), o.size, data_slot);
  const auto start = steady::now();
  post(c, true, go.data(), go.size(), go_slot)->waitSend();
  for (std::uint64_t done = 0; done < n; ++done) {
    inflight[done % window]->waitRecv();
    if (posted < n) {
      inflight[posted % window] = post(c, false, slots[posted % window].data(), o.size, data_slot);
      ++posted;
    }
  }
  const double span = std::chrono::duration<double>(steady::now() - start).count();
  post(c, true, go.data(), go.size(), go_slot)->waitSend();
  return span;
}

nlohmann::json bandwidth(gloo::rendezvous::Context& c, const options& o) {
  std::vector<std::vector<std::byte>> slots(o.window, std::vector<std::byte>(o.size));
  (void)stream(c, o, o.warmup, slots);
  const double span = stream(c, o, o.iterations, slots);
  if (c.rank == 0) return nullptr;
  return {{"bandwidth_Bps", static_cast<double>(o.iterations * o.size) / span},
          {"span_s", span},
          {"iterations", o.iterations}};
}

int run_rank(int rank, const std::string& dir, const options& o, int result_fd) {
  try {
    auto c = connect(rank, dir, o);
    const nlohmann::json out = o.test == "lat" ? pingpong(*c, o) : bandwidth(*c, o);
    if (!out.is_null()) {
      const std::string text = out.dump();
      if (::write(result_fd, text.data(), text.size()) < 0) return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pairperf_gloo_loop rank %d: %s\n", rank, e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"torch.distributed's send/recv calls on libgloo, two processes on this host"};
  app.add_option("--test", o.test, "lat (ping-pong) or bw (stream)")
      ->check(CLI::IsMember({"lat", "bw"}));
  app.add_option("--size", o.size, "bytes per message")->check(CLI::Range(1UL, 1UL << 30));
  app.add_option("--iterations", o.iterations, "measured round trips or messages")
      ->check(CLI::Range(1UL, 100000000UL));
  app.add_option("--warmup", o.warmup, "unmeasured round trips or messages first");
  app.add_option("--window", o.window, "bw: operations in flight")->check(CLI::Range(1U, 1024U));
  app.add_option("--hostname", o.hostname,
                 "the device's address when GLOO_SOCKET_IFNAME is unset (torch: the hostname)");
  app.add_option("--timeout", o.timeout_s, "gloo's timeout, seconds; also the whole run's bound")
      ->check(CLI::Range(1.0, 3600.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  char tmpl[] = "/tmp/pairperf-gloo-loop-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  int fds[2];
  if (::pipe(fds) != 0) return 1;
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::alarm(static_cast<unsigned>(o.timeout_s) + 5);
    ::_exit(run_rank(0, dir, o, fds[1]));
  }
  ::alarm(static_cast<unsigned>(o.timeout_s) + 10);
  const int mine = run_rank(1, dir, o, fds[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (mine != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  nlohmann::json out{{"tool", "pairperf_gloo_loop"},
                     {"test", o.test},
                     {"size_bytes", o.size},
                     {"window", o.window}};
  // One side printed its half: the client its latency, the receiver its bandwidth.
  out.update(nlohmann::json::parse(text, nullptr, false));
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
