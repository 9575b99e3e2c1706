#include "transports/ofi/ofi_address.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/hex.h"

namespace pairperf::ofi {
namespace {

constexpr std::size_t max_name_bytes = 1024;

}  // namespace

std::vector<std::byte> encode_address(const endpoint_name& e) {
  const std::string text = nlohmann::json{
      {"provider", e.provider},
      {"addr_format", e.format},
      {"name", to_hex(e.name)}}.dump();
  std::vector<std::byte> out(text.size());
  std::transform(text.begin(), text.end(), out.begin(), [](char c) { return std::byte(c); });
  return out;
}

endpoint_name decode_address(std::span<const std::byte> bytes) {
  std::string text(bytes.size(), '\0');
  std::transform(bytes.begin(), bytes.end(), text.begin(),
                 [](std::byte b) { return static_cast<char>(b); });
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("provider") || !j.at("provider").is_string() ||
      !j.contains("addr_format") || !j.at("addr_format").is_number_unsigned() ||
      !j.contains("name") || !j.at("name").is_string())
    throw std::invalid_argument(
        "the peer's libfabric address is not {provider, addr_format, name}");
  endpoint_name e;
  e.provider = j.at("provider").get<std::string>();
  const auto format = j.at("addr_format").get<std::uint64_t>();
  if (format > 0xffffffffULL)
    throw std::invalid_argument("the peer's libfabric address format is out of range");
  e.format = static_cast<std::uint32_t>(format);
  e.name = from_hex(j.at("name").get<std::string>());  // throws invalid_argument
  if (e.name.empty() || e.name.size() > max_name_bytes)
    throw std::invalid_argument(
        fmt::format("the peer's libfabric endpoint name has {} bytes (1 to {} expected)",
                    e.name.size(), max_name_bytes));
  return e;
}

void check_peer_name(const endpoint_name& peer, const endpoint_name& mine) {
  if (peer.provider != mine.provider)
    throw std::invalid_argument(fmt::format(
        "the peer uses libfabric provider '{}', this side '{}': both sides must use one "
        "provider (--ofi-provider, or the same FI_PROVIDER on both)",
        peer.provider.substr(0, 64), mine.provider));
  if (peer.format != mine.format)
    throw std::invalid_argument(fmt::format(
        "the peer's libfabric address format is {}, this side's {}", peer.format, mine.format));
  const auto family = [&](sa_family_t want, std::size_t size) {
    sa_family_t got = 0;
    if (peer.name.size() >= sizeof(got)) std::memcpy(&got, peer.name.data(), sizeof(got));
    if (peer.name.size() != size || got != want)
      throw std::invalid_argument(fmt::format(
          "the peer's libfabric address is not a socket address of its format ({} bytes, "
          "family {}; expected {} bytes, family {})",
          peer.name.size(), got, size, want));
  };
  switch (peer.format) {
    case FI_SOCKADDR_IN:
      family(AF_INET, sizeof(sockaddr_in));
      return;
    case FI_SOCKADDR_IN6:
      family(AF_INET6, sizeof(sockaddr_in6));
      return;
    case FI_ADDR_STR: {
      // "fi_shm://1234" and the like: printable, one terminating NUL at most, at its end.
      auto end = peer.name.end();
      if (peer.name.back() == std::byte{0}) --end;
      const bool printable = std::all_of(peer.name.begin(), end, [](std::byte b) {
        const auto c = static_cast<unsigned char>(b);
        return c >= 0x21 && c < 0x7f;
      });
      const std::string text(reinterpret_cast<const char*>(peer.name.data()),
                             static_cast<std::size_t>(end - peer.name.begin()));
      if (!printable || text.rfind("fi_", 0) != 0 || text.find("://") == std::string::npos)
        throw std::invalid_argument(
            "the peer's libfabric string address is not a printable fi_...:// address");
      return;
    }
    default:
      // A provider-specific binary format (FI_ADDR_EFA, FI_ADDR_PSMX2...): its size is fixed by
      // the provider, so it must match this side's.
      if (peer.name.size() != mine.name.size())
        throw std::invalid_argument(
            fmt::format("the peer's libfabric address has {} bytes, this provider's {}",
                        peer.name.size(), mine.name.size()));
  }
}

std::string readable(fid_av* av, const std::vector<std::byte>& name) {
  if (av == nullptr || name.empty()) return {};
  std::array<char, 256> buf{};
  std::size_t len = buf.size();
  const char* text = fi_av_straddr(av, name.data(), buf.data(), &len);
  return text != nullptr ? std::string(buf.data()) : std::string();
}

std::string source_toward(const std::string& peer, int& err) {
  err = 0;
  sockaddr_storage dst{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&dst);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&dst);
  if (inet_pton(AF_INET, peer.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(9);
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, peer.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(9);
    len = sizeof(*v6);
  } else {
    return {};
  }
  const int fd = ::socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
    return {};
  }
  std::string out;
  sockaddr_storage src{};
  socklen_t src_len = sizeof(src);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&dst), len) != 0) {
    err = errno;
  } else if (::getsockname(fd, reinterpret_cast<sockaddr*>(&src), &src_len) == 0) {
    std::array<char, INET6_ADDRSTRLEN> text{};
    const void* a =
        src.ss_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&src)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&src)->sin6_addr);
    if (inet_ntop(src.ss_family, a, text.data(), text.size()) != nullptr) out = text.data();
  }
  ::close(fd);
  return out;
}

}  // namespace pairperf::ofi
