#pragma once
// An OFI endpoint's name as it travels over the control channel, and its checks: the peer's name
// is untrusted and is checked before libfabric sees it (fi_av_insert reads it as the provider's
// address format without bounds).
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pairperf::ofi {

struct endpoint_name {
  std::string provider;         // fi_info's prov_name ("tcp;ofi_rxm")
  std::uint32_t format = 0;     // fi_info's addr_format
  std::vector<std::byte> name;  // fi_getname
};

// {"provider": ..., "addr_format": N, "name": hex} as bytes.
std::vector<std::byte> encode_address(const endpoint_name& e);
// Throws std::invalid_argument saying what is wrong with the bytes.
endpoint_name decode_address(std::span<const std::byte> bytes);
// The peer's name is one this side's endpoint can take: the same provider and address format, and
// a name of that format's shape (a sockaddr of its family and size; a printable string of a known
// scheme). Throws std::invalid_argument.
void check_peer_name(const endpoint_name& peer, const endpoint_name& mine);
// fi_av_straddr's text of a name ("fi_sockaddr_in://127.0.0.1:40123"); "" where it has none.
std::string readable(fid_av* av, const std::vector<std::byte>& name);
// The local address the kernel routes toward `peer` (a numeric address) from: a connected UDP
// socket's name, nothing sent. "" where `peer` is no numeric address or the lookup failed;
// `err` is then the errno of the socket or its connect (ENETUNREACH: no route), else 0.
std::string source_toward(const std::string& peer, int& err);

}  // namespace pairperf::ofi
