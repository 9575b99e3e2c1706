// gloo's checks with each side's devices known (as torch.distributed makes them there) and, where
// doctor ran it, gloo's own connection between the sides.
//
// gloo's rule (libgloo 0.5.0, Debian's 0.0~git20220518.5b14351, gloo/transport/tcp/pair.cc
// Pair::connect): the two sides of a pair compare their addresses (memcmp of the IP address, then
// the port); the side whose address sorts lower listens and the other connects to it. A side
// whose gloo address its peers cannot reach therefore fails only with the peers that sort above
// it: a pair can work while a third node, or another peer, fails against the same address.
#include <arpa/inet.h>

#include <array>
#include <cstring>

#include "core/interfaces.h"
#include "host/netvars_common.h"

namespace pairperf::netvars_detail {
namespace {


// Whether the peer can connect to this side's address: nullopt when the matrix did not say.
std::optional<bool> reachable(const side_view& s, const std::string& address) {
  if (is_loopback(address)) return s.loopback_reaches_peer;
  const auto it = s.addresses.find(address);
  if (it == s.addresses.end() || s.tested.count(it->second) == 0) return std::nullopt;
  return s.reaching.count(it->second) > 0;
}

std::string where_from(const side_view& s, const std::string& address) {
  const auto it = s.addresses.find(address);
  const std::string iface = it != s.addresses.end() ? it->second
                            : is_loopback(address) ? std::string("loopback")
                                                        : std::string("no interface of it");
  return fmt::format("{} ({}; from {})", address, iface, s.gloo.source);
}

constexpr const char* rule =
    "gloo's rule: the side whose address sorts lower listens and the other connects to it "
    "(gloo/transport/tcp/pair.cc, Pair::connect)";

class gloo_checker {
 public:
  gloo_checker(const side_view& c, const side_view& s, const application_outcome& probe)
      : m_c(c), m_s(s), m_probe(probe) {}

  std::vector<finding> run() {
    for (const side_view* side : {&m_c, &m_s}) ignored(*side);
    const bool made = devices_made();
    if (made && m_c.gloo.devices.size() != m_s.gloo.devices.size()) {
      add("pair", fmt::format("the client makes {} gloo device(s) ({}), the server {} ({}): "
                              "torch.distributed connects one context per device, and the "
                              "contexts one side lacks wait until their timeout{}",
                              m_c.gloo.devices.size(), m_c.gloo.source, m_s.gloo.devices.size(),
                              m_s.gloo.source, measured()),
          fmt::format("set the same number of interfaces in GLOO_SOCKET_IFNAME on every node "
                      "({})",
                      fix_line(m_c.gloo.devices.size() > m_s.gloo.devices.size() ? m_c : m_s,
                               "GLOO_SOCKET_IFNAME")),
          severity::fails);
    } else if (made) {
      for (std::size_t i = 0; i < m_c.gloo.devices.size(); ++i) order(i);
    }
    if (m_probe.ran && !m_probe.ok && !m_failed) {
      add("pair", fmt::format("gloo's connection between the pair fails: {}", m_probe.message),
          fmt::format("set GLOO_SOCKET_IFNAME on both sides to interfaces that reach each other "
                      "({}; {})",
                      fix_line(m_c, "GLOO_SOCKET_IFNAME"), fix_line(m_s, "GLOO_SOCKET_IFNAME")),
          severity::fails);
    }
    one_sided();
    for (const side_view* side : {&m_c, &m_s}) nccl_differs(*side);
    return std::move(m_out);
  }

 private:
  void add(std::string side, std::string problem, std::string fix, severity how) {
    m_failed = m_failed || how == severity::fails;
    m_out.push_back(
        finding{std::move(side), "GLOO_SOCKET_IFNAME", std::move(problem), std::move(fix), how});
  }

  [[nodiscard]] std::string measured() const {
    if (!m_probe.ran) return fmt::format(" (by {}; gloo's connection was not run)", rule);
    return m_probe.ok ? " (measured: gloo's own connection between the two sides worked)"
                      : fmt::format(" (measured: gloo's own connection failed: {})",
                                    m_probe.message);
  }

  void ignored(const side_view& s) {
    if (s.gloo.ignored_ifname.empty()) return;
    add(s.name,
        fmt::format("GLOO_SOCKET_IFNAME={} is one character on the {}: torch reads it only when "
                    "it is longer, and uses {} instead",
                    s.gloo.ignored_ifname, s.name, s.gloo.source),
        fix_line(s, "GLOO_SOCKET_IFNAME"), severity::advice);
  }

  // Every device made on both sides; a side that cannot make one fails by itself.
  bool devices_made() {
    bool ok = true;
    for (const side_view* s : {&m_c, &m_s}) {
      for (const auto& d : s->gloo.devices) {
        if (d.error.empty() && !d.address.empty()) continue;
        ok = false;
        add(s->name,
            fmt::format("gloo cannot make a device for {} on the {} ({}): {}",
                        d.iface.empty() ? "hostname " + d.hostname : "interface " + d.iface,
                        s->name, s->gloo.source, d.error.empty() ? "no address" : d.error),
            fix_line(*s, "GLOO_SOCKET_IFNAME"), severity::fails);
      }
    }
    return ok;
  }

  void order(std::size_t i) {
    const std::string& a = m_c.gloo.devices[i].address;
    const std::string& b = m_s.gloo.devices[i].address;
    const auto ka = gloo_order_key(a);
    const auto kb = gloo_order_key(b);
    if (!ka || !kb || ka == kb) return;
    if (ka->front() != kb->front()) {
      add("pair",
          fmt::format("the client's gloo address {} and the server's {} are of different "
                      "families: gloo refuses to connect them (\"address family mismatch\"){}",
                      where_from(m_c, a), where_from(m_s, b), measured()),
          "name interfaces with addresses of one family in GLOO_SOCKET_IFNAME on both sides",
          severity::fails);
      return;
    }
    const bool client_listens = *ka < *kb;
    const side_view& listener = client_listens ? m_c : m_s;
    const side_view& connector = client_listens ? m_s : m_c;
    const std::string& la = client_listens ? a : b;
    const std::string& ca = client_listens ? b : a;
    const std::string device =
        m_c.gloo.devices.size() > 1 ? fmt::format(" (device {} of {})", i + 1,
                                                  m_c.gloo.devices.size())
                                    : std::string();
    if (reachable(listener, la) == false) {
      // The connector must reach the listener's address and cannot: gloo fails. Measured as
      // working, the matrix's view of the address was wrong for gloo: say so, as fragile.
      const bool contradicted = m_probe.ran && m_probe.ok;
      add(listener.name,
          fmt::format("the {}'s gloo address {}{} does not reach the {}: it sorts below the "
                      "{}'s {}, so the {} listens there and the {} must connect to it{}",
                      listener.name, where_from(listener, la), device, connector.name,
                      connector.name, ca, listener.name, connector.name, measured()),
          fix_line(listener, "GLOO_SOCKET_IFNAME"),
          contradicted ? severity::fragile : severity::fails);
    }
    if (reachable(connector, ca) == false) {
      add(connector.name,
          fmt::format("the {}'s gloo address {}{} does not reach the {}; this pair connects "
                      "only because the {}'s {} sorts lower and the {} connects to it: a peer "
                      "whose address sorts above {} must connect to it and fails{}",
                      connector.name, where_from(connector, ca), device, listener.name,
                      listener.name, la, connector.name, ca, measured()),
          fix_line(connector, "GLOO_SOCKET_IFNAME"), severity::fragile);
    }
  }

  // The variable set on one side only: advice (each side's devices are judged above).
  void one_sided() {
    const auto c = get(m_c, "GLOO_SOCKET_IFNAME");
    const auto s = get(m_s, "GLOO_SOCKET_IFNAME");
    if (c.has_value() == s.has_value()) return;
    const side_view& unset = c ? m_s : m_c;
    const side_view& set = c ? m_c : m_s;
    m_out.push_back(finding{
        "pair", "GLOO_SOCKET_IFNAME",
        fmt::format("GLOO_SOCKET_IFNAME is set on the {} ({}) but not on the {}, which uses {}",
                    set.name, c ? *c : *s, unset.name, unset.gloo.source),
        fix_line(unset, "GLOO_SOCKET_IFNAME"), severity::advice});
  }

  // NCCL pointed at an interface, gloo left on another (vLLM's case): advice.
  void nccl_differs(const side_view& s) {
    const auto nccl = get(s, "NCCL_SOCKET_IFNAME");
    if (!nccl || get(s, "GLOO_SOCKET_IFNAME") || s.gloo.devices.empty()) return;
    const auto it = s.addresses.find(s.gloo.devices.front().address);
    if (it == s.addresses.end()) return;
    const auto chosen = nccl_select(parse_nccl_filter(*nccl), s.ifaces);
    if (chosen.empty() || contains(chosen, it->second)) return;
    m_out.push_back(finding{
        s.name, "GLOO_SOCKET_IFNAME",
        fmt::format("NCCL_SOCKET_IFNAME={} is set on the {} but GLOO_SOCKET_IFNAME is not: gloo "
                    "uses {}, another interface than NCCL's",
                    *nccl, s.name, where_from(s, s.gloo.devices.front().address)),
        fix_line(s, "GLOO_SOCKET_IFNAME"), severity::advice});
  }

  const side_view& m_c;
  const side_view& m_s;
  const application_outcome& m_probe;
  std::vector<finding> m_out;
  bool m_failed = false;
};

}  // namespace

std::vector<finding> check_gloo(const side_view& client, const side_view& server,
                                const application_outcome& probe) {
  return gloo_checker(client, server, probe).run();
}

}  // namespace pairperf::netvars_detail

namespace pairperf {

std::optional<std::vector<unsigned char>> gloo_order_key(const std::string& address) {
  std::array<unsigned char, 16> bytes{};
  if (::inet_pton(AF_INET, address.c_str(), bytes.data()) == 1)
    return std::vector<unsigned char>{4, bytes[0], bytes[1], bytes[2], bytes[3]};
  if (::inet_pton(AF_INET6, address.c_str(), bytes.data()) == 1) {
    std::vector<unsigned char> out{6};
    out.insert(out.end(), bytes.begin(), bytes.end());
    return out;
  }
  return std::nullopt;
}

}  // namespace pairperf
