#pragma once
// Parsing and display of sizes, durations and rates. Storage is always bytes, seconds and bytes
// per second; only display converts. Size suffixes are binary (K = 1024), as in ucx_perftest and
// perftest; rates display in GB/s = 1e9 B/s unless GiB/s is asked for.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pairperf {

// The largest message size pairperf accepts (1 GiB).
inline constexpr std::uint64_t max_message_bytes = std::uint64_t{1} << 30;

// "64", "4K", "1M", "2G", "4T" (K/M/G/T = 2^10/2^20/2^30/2^40; "KiB", "KB" accepted as the
// same), at most `limit` bytes. Throws usage_error naming the bad text.
std::uint64_t parse_size(std::string_view text, std::uint64_t limit = max_message_bytes);

// A comma-separated list of sizes and doubling ranges: "1,64,4K,8:4M". The result is sorted and
// free of duplicates. Throws usage_error.
std::vector<std::uint64_t> parse_size_list(std::string_view text);

// "2", "0.5s", "250ms", "10us", "500ns". Throws usage_error. Must be > 0.
std::chrono::nanoseconds parse_duration(std::string_view text);

// 4096 -> "4K", 1000 -> "1000", 1048576 -> "1M".
std::string format_size(std::uint64_t bytes);

enum class rate_unit { gb, gib };
rate_unit parse_rate_unit(std::string_view text);  // "GB" or "GiB" (case-insensitive)
// Bytes per second -> "12.34 GB/s" (or GiB/s).
std::string format_rate(double bytes_per_second, rate_unit unit);
// Seconds -> "3.21 us", "1.50 ms".
std::string format_seconds(double seconds);
// Messages per second -> "1.23 M/s".
std::string format_message_rate(double per_second);

// A comma-separated list (UCX_TLS, UCX_NET_DEVICES, GLOO_SOCKET_IFNAME), or one with another
// separator (a ':' path list): items trimmed of blanks, empty ones dropped.
std::vector<std::string> split_list(const std::string& value, char separator = ',');

}  // namespace pairperf
