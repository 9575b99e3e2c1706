#pragma once
// What to run: run_config (options that hold for the whole run) and test_case (one cell of the
// matrix). Both are plain values with a JSON round trip; the client sends them to the server.
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pairperf {

// How the two sides move messages; each test (a row of a transport's table) names one.
enum class pattern_kind {
  pingpong,    // client sends, server echoes; one-way latency = round trip / 2
  stream_uni,  // client streams to server with a window of outstanding operations
  stream_bi,   // both stream to each other at once
};

// Where a buffer lives; each is served by an allocator (transports/memory).
enum class memory_type { host, cuda };

// How a transport waits for completions.
enum class progress_mode {
  busy,   // spin on non-blocking calls (lowest latency, one core per side)
  block,  // sleep in the kernel until something happens
};

const char* to_string(pattern_kind p) noexcept;
const char* to_string(memory_type m) noexcept;
const char* to_string(progress_mode p) noexcept;
pattern_kind parse_pattern(const std::string& text);  // throws usage_error
memory_type parse_memory_type(const std::string& text);
progress_mode parse_progress(const std::string& text);

struct timeouts {
  std::chrono::nanoseconds connect = std::chrono::seconds(3);    // control and data connections
  std::chrono::nanoseconds handshake = std::chrono::seconds(5);  // each control round trip
  std::chrono::nanoseconds per_case = std::chrono::seconds(20);  // one phase of one case
  std::chrono::nanoseconds idle = std::chrono::seconds(60);      // server waiting for the next case
};

// Options that shape how transports move bytes, the same for every case of a run.
struct transport_options {
  progress_mode progress = progress_mode::busy;
  unsigned streams = 1;                 // parallel connections (TCP)
  std::uint64_t send_buffer_bytes = 0;  // 0 = the kernel's default (and autotuning)
  std::uint64_t recv_buffer_bytes = 0;
  // Each transport's own options, one JSON object under its registry name (e.g. "verbs":
  // {"qps": 2, ...}), from the options that transport registered on the command line. The
  // transport parses and checks its object, on both sides (the server's comes from the peer);
  // core knows nothing of what is inside. A transport missing here takes its defaults.
  nlohmann::json own = nlohmann::json::object();
};

// A number a peer sent, checked before it is converted: a whole number from 0 to `max`, else
// usage_error naming `field`. (A double out of an integer's range must never reach a cast.)
std::uint64_t whole_number(const nlohmann::json& v, const char* field, std::uint64_t max);

// The transport's own object in `options.own` (an empty object where there is none).
const nlohmann::json& own_options(const transport_options& options, const std::string& transport);

// Bounds on what a control message may carry (config.cpp refuses anything beyond them, so a
// peer's numbers never overflow a conversion); the server applies its own, tighter limits on top.
inline constexpr std::uint64_t max_iterations_limit = std::uint64_t{1} << 40;
inline constexpr std::uint64_t max_window_limit = std::uint64_t{1} << 16;
inline constexpr std::uint64_t max_size_bytes = std::uint64_t{1} << 30;  // units.h's too

struct run_config {
  std::optional<std::uint64_t> iterations;  // fixed count (-n); unset = time budget
  std::chrono::nanoseconds duration = std::chrono::milliseconds(200);  // budget per case
  std::uint64_t min_iterations = 10;
  std::uint64_t max_iterations = 4'000'000;  // also bounds the sample buffer
  std::optional<std::uint64_t> warmup;       // unset = chosen from size and window
  unsigned window = 32;                      // outstanding operations in stream patterns
  unsigned repeat = 1;  // measured phases per case (after one warm-up), each kept in the results
  bool validate = false;
  // A case is noisy when a side's measuring thread waited for a CPU longer than this share of
  // the measured time (host/noise.h).
  double noise_threshold = 0.05;
  transport_options transport;
  struct timeouts timeouts;
};

struct test_case {
  std::size_t index = 0;  // position in the matrix, 0-based
  std::string transport;  // registry name, e.g. "tcp"
  std::string test;       // test name from the transport's table, e.g. "tcp_lat"
  pattern_kind pattern = pattern_kind::pingpong;
  // The value of the transport's own axis (a transport set inside its library, as UCX_TLS is);
  // "" = the library's default, and for transports without an axis.
  std::string tls;
  std::string iface;  // client-side interface; "" = let routing choose
  // The server address the data path aims at, where a transport takes one (TCP); "" = the
  // server's address on the interface's subnet, else the control connection's.
  std::string target;
  memory_type client_memory = memory_type::host;
  memory_type server_memory = memory_type::host;
  std::uint64_t size_bytes = 0;
};

void to_json(nlohmann::json& j, const run_config& c);
void from_json(const nlohmann::json& j, run_config& c);
void to_json(nlohmann::json& j, const test_case& c);
void from_json(const nlohmann::json& j, test_case& c);

// Warm-up iterations for a case: as configured, else enough to fill the window twice, but
// never more than 256 MiB of traffic.
std::uint64_t warmup_iterations(const run_config& config, const test_case& c);

}  // namespace pairperf
