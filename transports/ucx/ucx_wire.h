#pragma once
// Internal to the UCX transport: how its messages are told apart on the wire, shared by its
// setup (ucx_transport.cpp) and its data path (ucx_transport_ops.cpp).
#include <ucp/api/ucp.h>

#include <cstdint>

namespace pairperf::ucx_wire {

inline constexpr ucp_tag_t data_tag = 0x1;    // measured payload
inline constexpr ucp_tag_t sync_tag = 0x2;    // the patterns' acknowledgements
inline constexpr ucp_tag_t wireup_tag = 0x3;  // the connect handshake
inline constexpr ucp_tag_t full_mask = ~ucp_tag_t{0};
// A worker serves consecutive cases of one configuration and tag receives match any endpoint of
// it, so each case's tags carry its index (both sides know it): a message of an earlier case can
// never be taken for one of this case.
inline constexpr ucp_tag_t case_tag(ucp_tag_t kind, std::uint64_t case_index) {
  return kind | ((case_index + 1) << 8);
}
inline constexpr unsigned am_id = 0;  // active-message tests' handler
inline constexpr std::uint64_t handshake_cookie = ~std::uint64_t{0} - 1;

// Statuses that mean the peer is gone or unreachable rather than a local fault.
inline bool means_peer_gone(ucs_status_t s) {
  return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT ||
         s == UCS_ERR_UNREACHABLE || s == UCS_ERR_REJECTED;
}

}  // namespace pairperf::ucx_wire
