// pairperf_ucx_bare: ucx_perftest's tag_lat and tag_bw loops (UCX 1.13.1,
// src/tools/perf/lib/ucp_tests.cc: run_pingpong, run_stream_uni) written against UCP alone, with
// nothing of pairperf's in the process: no harness, no pattern loops, no control channel. It is
// the third point of scripts/compare-peers' UCX rows, so that a gap between pairperf and
// ucx_perftest splits into what pairperf adds to the library's loop (pairperf / this) and what
// ucx_perftest's process does differently from the same loop (this / ucx_perftest).
//
// As ucx_perftest: one context with the tag feature only, configured from the environment
// (UCX_TLS, UCX_NET_DEVICES); single-threaded workers; buffers from ucp_mem_map(ALLOCATE), one per
// direction, every message in the same buffer; completions counted by callbacks that decrement a
// counter; the sender keeps --window sends in flight and the receiver --window receives. Each side
// creates an endpoint to the other's worker address.
//
// Two processes: the parent is the server (the receiver of tag_bw, the responder of tag_lat), the
// forked child the client; they exchange addresses and meet at barriers over pipes. Prints one
// JSON object: the client's view (latency: the round trips it timed; bandwidth: the sender's span
// to its flush) and the server's (bandwidth: the receiver's span to its last arrival).
//
// Exit status: 0 measured, 1 failed (UCX error, deadline, the other side gone), 2 usage.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

struct options {
  std::string test = "tag_lat";
  std::size_t size = 8;
  std::uint64_t iterations = 100000;
  std::uint64_t warmup = 10000;
  unsigned window = 32;
  std::vector<int> cpus;  // client, server
  double timeout_s = 120;
};

// The loop's clock: the TSC, as ucx_perftest's ucs_get_time(), converted with the rate it ran at
// against the steady clock over the timed phase.
inline std::uint64_t ticks() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(steady::now().time_since_epoch().count());
#endif
}

std::runtime_error ucx_error(const char* what, ucs_status_t status) {
  return std::runtime_error(std::string(what) + ": " + ucs_status_string(status));
}

// One end of the two pipes between the processes: whole messages, each read bounded in time.
class pipe_link {
 public:
  pipe_link(int in, int out, steady::time_point deadline)
      : m_in(in), m_out(out), m_deadline(deadline) {}
  void send(const std::string& bytes) const {
    const std::uint64_t n = bytes.size();
    write_all(&n, sizeof n);
    write_all(bytes.data(), bytes.size());
  }
  [[nodiscard]] std::string receive() const {
    std::uint64_t n = 0;
    read_all(&n, sizeof n);
    if (n > (1U << 20))
      throw std::runtime_error("pipe: a message of " + std::to_string(n) + " bytes");
    std::string bytes(n, '\0');
    read_all(bytes.data(), n);
    return bytes;
  }
  // Whether the other process has ended (its end of our incoming pipe closed), without reading.
  [[nodiscard]] bool other_side_gone() const noexcept {
    pollfd fd{m_in, 0, 0};
    return ::poll(&fd, 1, 0) > 0 && (fd.revents & (POLLHUP | POLLERR)) != 0;
  }
  void barrier() const {
    send("barrier");
    if (receive() != "barrier") throw std::runtime_error("pipe: out of step at a barrier");
  }

 private:
  void write_all(const void* p, std::size_t n) const {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t k = ::write(m_out, b, n);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) throw std::runtime_error(std::string("pipe write: ") + std::strerror(errno));
      b += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  void read_all(void* p, std::size_t n) const {
    auto* b = static_cast<char*>(p);
    while (n > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(m_deadline - steady::now());
      pollfd fd{m_in, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&fd, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0)
        throw std::runtime_error("pipe: the other side did not answer before the deadline");
      const ssize_t k = ::read(m_in, b, n);
      if (k < 0 && errno == EINTR) continue;
      if (k == 0) throw std::runtime_error("pipe: the other side ended");
      if (k < 0) throw std::runtime_error(std::string("pipe read: ") + std::strerror(errno));
      b += k;
      n -= static_cast<std::size_t>(k);
    }
  }
  int m_in, m_out;
  steady::time_point m_deadline;
};

// What the callbacks count down, as ucx_perftest's m_sends_outstanding / m_recvs_outstanding.
struct outstanding {
  int sends = 0;
  int recvs = 0;
};

void send_done(void* request, ucs_status_t, void* user) {
  --static_cast<outstanding*>(user)->sends;
  ucp_request_free(request);
}
void recv_done(void* request, ucs_status_t, const ucp_tag_recv_info_t*, void* user) {
  --static_cast<outstanding*>(user)->recvs;
  ucp_request_free(request);
}

constexpr ucp_tag_t tag = 0x1337a880;

// A context, worker, endpoint and two buffers, each released by its own deleter.
class ucx_side {
 public:
  ucx_side(std::size_t size, const pipe_link& link, steady::time_point deadline)
      : m_size(size), m_link(link), m_deadline(deadline) {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    ucp_context_h context = nullptr;
    if (const ucs_status_t s = ucp_init(&params, nullptr, &context); s != UCS_OK)
      throw ucx_error("ucp_init", s);
    m_context.reset(context);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucp_worker_h worker = nullptr;
    if (const ucs_status_t s = ucp_worker_create(context, &wp, &worker); s != UCS_OK)
      throw ucx_error("ucp_worker_create", s);
    m_worker.reset(worker);
    m_send = map(m_send_memh);
    m_recv = map(m_recv_memh);
    connect(link);
    m_send_params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    m_send_params.cb.send = send_done;
    m_send_params.user_data = &m_count;
    m_recv_params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    m_recv_params.cb.recv = recv_done;
    m_recv_params.user_data = &m_count;
  }
  ucx_side(const ucx_side&) = delete;
  ucx_side& operator=(const ucx_side&) = delete;
  ~ucx_side() {
    if (m_ep != nullptr) {
      ucp_request_param_t close{};
      close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      close.flags = UCP_EP_CLOSE_FLAG_FORCE;
      const ucs_status_ptr_t r = ucp_ep_close_nbx(m_ep, &close);
      if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(m_worker.get());
        ucp_request_free(r);
      }
    }
    if (m_send_memh != nullptr) ucp_mem_unmap(m_context.get(), m_send_memh);
    if (m_recv_memh != nullptr) ucp_mem_unmap(m_context.get(), m_recv_memh);
  }

  void send() {
    const ucs_status_ptr_t r = ucp_tag_send_nbx(m_ep, m_send, m_size, tag, &m_send_params);
    if (UCS_PTR_IS_ERR(r)) throw ucx_error("ucp_tag_send_nbx", UCS_PTR_STATUS(r));
    if (r != nullptr) ++m_count.sends;
  }
  void receive() {
    const ucs_status_ptr_t r =
        ucp_tag_recv_nbx(m_worker.get(), m_recv, m_size, tag, ~ucp_tag_t{0}, &m_recv_params);
    if (UCS_PTR_IS_ERR(r)) throw ucx_error("ucp_tag_recv_nbx", UCS_PTR_STATUS(r));
    if (r != nullptr) ++m_count.recvs;
  }
  // Progress until fewer than `limit` sends (receives) are in flight, as wait_send_window.
  void wait_sends_below(int limit) {
    while (m_count.sends >= limit) progress();
  }
  void wait_recvs_below(int limit) {
    while (m_count.recvs >= limit) progress();
  }
  void flush() {
    ucp_request_param_t none{};
    const ucs_status_ptr_t r = ucp_worker_flush_nbx(m_worker.get(), &none);
    if (UCS_PTR_IS_ERR(r)) throw ucx_error("ucp_worker_flush_nbx", UCS_PTR_STATUS(r));
    if (r == nullptr) return;
    ucs_status_t s = UCS_INPROGRESS;
    while ((s = ucp_request_check_status(r)) == UCS_INPROGRESS) progress();
    ucp_request_free(r);
    if (s != UCS_OK) throw ucx_error("worker flush", s);
  }

 private:
  // One ucp_worker_progress; every 65,536 calls, the deadline and the other process are checked
  // (a loop waiting for a peer that died would otherwise spin until the deadline).
  void progress() {
    ucp_worker_progress(m_worker.get());
    if ((++m_polls & 0xffff) != 0) [[likely]]
      return;
    if (steady::now() > m_deadline)
      throw std::runtime_error("the deadline passed with operations still in flight");
    if (m_link.other_side_gone())
      throw std::runtime_error("the other process ended with operations still in flight");
  }
  void* map(ucp_mem_h& memh) {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = nullptr;
    mp.length = std::max<std::size_t>(m_size, 1);
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    if (const ucs_status_t s = ucp_mem_map(m_context.get(), &mp, &memh); s != UCS_OK)
      throw ucx_error("ucp_mem_map", s);
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if (const ucs_status_t s = ucp_mem_query(memh, &attr); s != UCS_OK)
      throw ucx_error("ucp_mem_query", s);
    std::memset(attr.address, 0, m_size);
    return attr.address;
  }
  void connect(const pipe_link& link) {
    ucp_address_t* address = nullptr;
    std::size_t length = 0;
    if (const ucs_status_t s = ucp_worker_get_address(m_worker.get(), &address, &length);
        s != UCS_OK)
      throw ucx_error("ucp_worker_get_address", s);
    std::string mine(reinterpret_cast<const char*>(address), length);
    ucp_worker_release_address(m_worker.get(), address);
    link.send(mine);
    const std::string theirs = link.receive();
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = reinterpret_cast<const ucp_address_t*>(theirs.data());
    if (const ucs_status_t s = ucp_ep_create(m_worker.get(), &ep, &m_ep); s != UCS_OK)
      throw ucx_error("ucp_ep_create", s);
  }

  struct context_deleter {
    void operator()(ucp_context_h c) const noexcept { ucp_cleanup(c); }
  };
  struct worker_deleter {
    void operator()(ucp_worker_h w) const noexcept { ucp_worker_destroy(w); }
  };
  std::size_t m_size;
  const pipe_link& m_link;
  steady::time_point m_deadline;
  std::unique_ptr<ucp_context, context_deleter> m_context;
  std::unique_ptr<ucp_worker, worker_deleter> m_worker;  // destroyed before the context
  ucp_ep_h m_ep = nullptr;
  ucp_mem_h m_send_memh = nullptr, m_recv_memh = nullptr;
  void* m_send = nullptr;
  void* m_recv = nullptr;
  outstanding m_count;
  ucp_request_param_t m_send_params{}, m_recv_params{};
  std::uint64_t m_polls = 0;
};

// The timed phase's span, in seconds and in ticks, for the ticks' rate.
struct span {
  double seconds;
  std::uint64_t ticks;
};

// run_pingpong: the client sends then receives; the server receives then answers. Each side waits
// for its previous send before the next (a window of one). The client's round trips go to `rtt`.
span ping_pong(ucx_side& u, bool client, std::uint64_t n, std::vector<std::uint64_t>* rtt) {
  const auto t0 = steady::now();
  const std::uint64_t start = ticks();
  std::uint64_t prev = start;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (client) {
      u.wait_sends_below(1);
      u.send();
      u.receive();
      u.wait_recvs_below(1);
      if (rtt != nullptr) {
        const std::uint64_t now = ticks();
        (*rtt)[i] = now - prev;
        prev = now;
      }
    } else {
      u.receive();
      u.wait_recvs_below(1);
      u.wait_sends_below(1);
      u.send();
    }
  }
  u.wait_sends_below(1);
  return {std::chrono::duration<double>(steady::now() - t0).count(), ticks() - start};
}

// run_stream_uni: the client sends n messages, the server receives them, each keeping `window`
// in flight; the sender's span ends after its worker flush, the receiver's at its last arrival.
double stream(ucx_side& u, bool sender, std::uint64_t n, unsigned window) {
  const auto t0 = steady::now();
  const int limit = static_cast<int>(window);
  for (std::uint64_t i = 0; i < n; ++i) {
    if (sender) {
      u.wait_sends_below(limit);
      u.send();
    } else {
      u.wait_recvs_below(limit);
      u.receive();
    }
  }
  if (sender) {
    u.wait_sends_below(1);
    u.flush();
  } else {
    u.wait_recvs_below(1);
  }
  return std::chrono::duration<double>(steady::now() - t0).count();
}

// One side's run: warm-up, barrier, the timed phase, and its figures.
nlohmann::json run_side(const options& o, bool client, const pipe_link& link,
                        steady::time_point deadline) {
  ucx_side u(o.size, link, deadline);
  const bool latency = o.test == "tag_lat";
  if (latency) {
    ping_pong(u, client, o.warmup, nullptr);
  } else {
    stream(u, client, o.warmup, o.window);
  }
  link.barrier();
  nlohmann::json out = nlohmann::json::object();
  if (latency) {
    std::vector<std::uint64_t> rtt(client ? o.iterations : 0);
    const span s = ping_pong(u, client, o.iterations, client ? &rtt : nullptr);
    if (client && o.iterations > 0) {
      const double seconds_per_tick = s.ticks > 0 ? s.seconds / static_cast<double>(s.ticks) : 0;
      auto mid = rtt.begin() + static_cast<std::ptrdiff_t>(rtt.size() / 2);
      std::nth_element(rtt.begin(), mid, rtt.end());
      out["latency_s"] = {{"p50", static_cast<double>(*mid) * seconds_per_tick / 2},
                          {"mean", s.seconds / static_cast<double>(o.iterations) / 2}};
    }
  } else {
    const double seconds = stream(u, client, o.iterations, o.window);
    const double bytes = static_cast<double>(o.iterations) * static_cast<double>(o.size);
    out[client ? "sender_Bps" : "receiver_Bps"] = seconds > 0 ? bytes / seconds : 0.0;
  }
  link.barrier();  // neither closes its endpoint while the other still moves data
  return out;
}

void pin(const options& o, bool client) {
  if (o.cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(o.cpus[client ? 0 : 1], &set);
  if (::sched_setaffinity(0, sizeof set, &set) != 0)
    throw std::runtime_error(std::string("cannot pin to CPU ") +
                             std::to_string(o.cpus[client ? 0 : 1]) + ": " + std::strerror(errno));
}

// The forked client: its figures go to the server over the pipe; any failure is its exit status.
[[noreturn]] void client_main(const options& o, int in, int out, steady::time_point deadline) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int status = 0;
  try {
    const pipe_link link(in, out, deadline);
    pin(o, true);
    link.send(run_side(o, true, link, deadline).dump());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pairperf_ucx_bare (client): %s\n", e.what());
    status = 1;
  }
  std::fflush(nullptr);
  ::_exit(status);
}

int server_main(const options& o) {
  const auto deadline = steady::now() + std::chrono::duration_cast<steady::duration>(
                                            std::chrono::duration<double>(o.timeout_s));
  int to_client[2], to_server[2];
  if (::pipe2(to_client, O_CLOEXEC) != 0 || ::pipe2(to_server, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::close(to_client[1]);  // so that the server's end of the pipe is the only writer left
    ::close(to_server[0]);
    client_main(o, to_client[0], to_server[1], deadline);
  }
  ::close(to_client[0]);
  ::close(to_server[1]);
  std::optional<nlohmann::json> result;
  std::string failure;
  try {
    const pipe_link link(to_server[0], to_client[1], deadline);
    pin(o, false);
    nlohmann::json mine = run_side(o, false, link, deadline);
    nlohmann::json theirs = nlohmann::json::parse(link.receive());
    result =
        nlohmann::json{{"tool", "pairperf_ucx_bare"}, {"test", o.test},     {"size_bytes", o.size},
                       {"iterations", o.iterations},  {"warmup", o.warmup}, {"window", o.window}};
    result->update(mine);
    result->update(theirs);
  } catch (const std::exception& e) {
    failure = e.what();
    ::kill(child, SIGKILL);  // ours, by pid
  }
  ::close(to_server[0]);
  ::close(to_client[1]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const bool child_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!failure.empty() || !result || !child_ok) {
    std::fprintf(stderr, "pairperf_ucx_bare: %s\n",
                 failure.empty() ? "the client side failed" : failure.c_str());
    return 1;
  }
  std::printf("%s\n", result->dump().c_str());
  return 0;
}

// The command line, then the run; 2 for a usage error.
int parse_and_run(int argc, char** argv) {
  options o;
  CLI::App app{
      "ucx_perftest's tag_lat / tag_bw loop on UCP alone, client and server forked on this host"};
  app.add_option("-t,--test", o.test, "tag_lat or tag_bw")
      ->check(CLI::IsMember({"tag_lat", "tag_bw"}));
  app.add_option("-s,--size", o.size, "Message size in bytes")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30));
  app.add_option("-n,--iterations", o.iterations, "Timed iterations")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 30));
  app.add_option("-w,--warmup", o.warmup, "Warm-up iterations")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 30));
  app.add_option("-O,--window", o.window, "Messages in flight (tag_bw)")
      ->check(CLI::Range(1U, 1024U));
  app.add_option("--cpu", o.cpus, "CLIENT,SERVER: the CPUs to pin the two processes to")
      ->delimiter(',')
      ->expected(2)
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", o.timeout_s, "Seconds before the run gives up")
      ->check(CLI::Range(1.0, 3600.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return server_main(o);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return parse_and_run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pairperf_ucx_bare: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "pairperf_ucx_bare: an unknown exception\n");
  }
  return 1;
}
