#pragma once
// Internal to the OFI transport: how its messages are told apart (tags), shared by its setup
// (ofi_transport.cpp) and its data path (ofi_transport_ops.cpp).
#include <cstdint>

namespace pairperf::ofi_wire {

inline constexpr std::uint64_t data_tag = 0x1;    // measured payload
inline constexpr std::uint64_t sync_tag = 0x2;    // the patterns' acknowledgements
inline constexpr std::uint64_t wireup_tag = 0x3;  // the connect handshake
inline constexpr std::uint64_t flush_tag = 0x4;   // start_flush(): never received
inline constexpr std::uint64_t handshake_cookie = ~std::uint64_t{0} - 1;
inline constexpr std::uint64_t flush_cookie = ~std::uint64_t{0} - 2;

}  // namespace pairperf::ofi_wire
