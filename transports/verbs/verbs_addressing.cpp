#include "transports/verbs/verbs_addressing.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <stdexcept>

#include "core/errors.h"

namespace pairperf::verbs {

device_spec parse_device_spec(const std::string& text) {
  device_spec out;
  const auto colon = text.find(':');
  out.name = text.substr(0, colon);
  if (out.name.empty())
    throw usage_error(
        fmt::format("--ib-dev '{}': expected NAME or NAME:PORT, e.g. mlx5_0:1", text));
  if (colon != std::string::npos) {
    const std::string port = text.substr(colon + 1);
    unsigned p = 0;
    const auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || ptr != port.data() + port.size() || p == 0 || p > 255)
      throw usage_error(fmt::format("--ib-dev '{}': the port must be a number from 1", text));
    out.port = p;
  }
  return out;
}

std::optional<std::string> ipv4_of_gid(const std::string& gid_text) {
  // 16 bytes as 8 groups of 4 hex digits; IPv4-mapped: 0000:0000:0000:0000:0000:ffff:AABB:CCDD.
  std::string hex;
  for (char c : gid_text) {
    if (c != ':') hex.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (hex.size() != 32 || hex.compare(0, 24, "00000000000000000000ffff") != 0) return std::nullopt;
  std::array<unsigned, 4> b{};
  for (std::size_t i = 0; i < 4; ++i)
    b[i] = static_cast<unsigned>(std::stoul(hex.substr(24 + 2 * i, 2), nullptr, 16));
  return fmt::format("{}.{}.{}.{}", b[0], b[1], b[2], b[3]);
}

gid_choice choose_gid(const std::vector<gid_row>& table, const std::string& iface, int forced,
                      bool ethernet) {
  const auto zero = [](const gid_row& r) {
    return r.gid.find_first_not_of("0:") == std::string::npos;
  };
  if (forced >= 0) {
    const auto it = std::find_if(table.begin(), table.end(),
                                 [&](const gid_row& r) { return r.index == forced; });
    if (it == table.end() || zero(*it))
      throw std::runtime_error(fmt::format(
          "--gid-index {}: no such GID (the table has {} valid entries)", forced,
          std::count_if(table.begin(), table.end(), [&](const gid_row& r) { return !zero(r); })));
    return {forced, "--gid-index"};
  }
  if (!ethernet) return {0, "InfiniBand: LID addressing, GID 0"};
  std::vector<const gid_row*> candidates;
  for (const auto& r : table) {
    if (!zero(r) && (iface.empty() || r.ndev == iface)) candidates.push_back(&r);
  }
  if (candidates.empty()) {
    throw std::runtime_error(iface.empty()
                                 ? std::string("no valid GID on this port")
                                 : fmt::format("no GID of this port belongs to {}", iface));
  }
  const auto pick = [&](auto pred, const char* why) -> std::optional<gid_choice> {
    for (const auto* r : candidates) {
      if (pred(*r)) return gid_choice{r->index, why};
    }
    return std::nullopt;
  };
  if (auto c = pick([](const gid_row& r) { return r.type == "RoCE v2" && ipv4_of_gid(r.gid); },
                    "RoCE v2, IPv4-mapped"))
    return *c;
  if (auto c = pick([](const gid_row& r) { return r.type == "RoCE v2"; }, "RoCE v2")) return *c;
  return {candidates.front()->index, "the first valid GID"};
}

unsigned mtu_bytes(int mtu_enum) { return mtu_enum >= 1 && mtu_enum <= 5 ? 128U << mtu_enum : 0; }

int mtu_enum(unsigned bytes) {
  for (int e = 1; e <= 5; ++e) {
    if (mtu_bytes(e) == bytes) return e;
  }
  throw usage_error(fmt::format("--mtu {}: use 256, 512, 1024, 2048 or 4096", bytes));
}

int path_mtu(int mine, int theirs, unsigned requested_bytes) {
  int m = std::min(mine, theirs);
  if (requested_bytes != 0) m = std::min(m, mtu_enum(requested_bytes));
  return m;
}

std::string speed_text(unsigned active_speed) {
  switch (active_speed) {
    case 1:
      return "2.5 Gb/s (SDR)";
    case 2:
      return "5 Gb/s (DDR)";
    case 4:
      return "10 Gb/s (QDR)";
    case 8:
      return "10.3125 Gb/s (FDR10)";
    case 16:
      return "14.0625 Gb/s (FDR)";
    case 32:
      return "25.78125 Gb/s (EDR)";
    case 64:
      return "50 Gb/s (HDR)";
    case 128:
      return "100 Gb/s (NDR)";
    case 256:
      return "200 Gb/s (XDR)";
    default:
      return fmt::format("unknown ({})", active_speed);
  }
}

std::string width_text(unsigned active_width) {
  switch (active_width) {
    case 1:
      return "1x";
    case 2:
      return "4x";
    case 4:
      return "8x";
    case 8:
      return "12x";
    case 16:
      return "2x";
    default:
      return fmt::format("unknown ({})", active_width);
  }
}

std::string gid_text(const ibv_gid& g) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i > 0) out += ':';
    out += fmt::format("{:02x}{:02x}", g.raw[i], g.raw[i + 1]);
  }
  return out;
}

const char* gid_type_text(unsigned t) {
  switch (t) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return "unknown";
  }
}

}  // namespace pairperf::verbs
