// The OFI transport's pure parts: the provider axis and its checks, FI_PROVIDER judged against a
// side's libfabric, lane kinds, and the endpoint names a peer sends (checked before libfabric
// sees them).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

#include "core/errors.h"
#include "transports/ofi/ofi_address.h"
#include "transports/ofi/ofi_options.h"
#include "transports/registry.h"

namespace pairperf::ofi {
namespace {

TEST(OfiOptions, ProviderNamesAreChecked) {
  EXPECT_NO_THROW(check_provider(""));
  EXPECT_NO_THROW(check_provider("shm"));
  EXPECT_NO_THROW(check_provider("tcp;ofi_rxm"));
  EXPECT_NO_THROW(check_provider("verbs;ofi_rxm"));
  EXPECT_THROW(check_provider("tcp;"), usage_error);
  EXPECT_THROW(check_provider(";tcp"), usage_error);
  EXPECT_THROW(check_provider("tcp;;ofi_rxm"), usage_error);
  EXPECT_THROW(check_provider("tcp ofi_rxm"), usage_error);
  EXPECT_THROW(check_provider("../../etc"), usage_error);
  EXPECT_THROW(check_provider(std::string(65, 'a')), usage_error);
}

std::vector<offer> offers_here() {
  offer tcp{"tcp;ofi_rxm", "127.0.0.1/32", "lo", "FI_SOCKADDR_IN", true, true, false, true};
  offer shm{"shm", "shm", "shm", "FI_ADDR_STR", true, true, true, false};
  offer udp{"udp;ofi_rxd", "127.0.0.1/32", "lo", "FI_SOCKADDR_IN", true, false, false, true};
  offer msg_only{"verbs", "rxe", "rxe0", "FI_SOCKADDR_IB", false, true, false, true};
  return {udp, tcp, tcp, shm, msg_only};
}

TEST(OfiOptions, TheProviderAxisDefaults) {
  const auto offers = offers_here();
  EXPECT_EQ(default_providers({"efa"}, true, "shm", offers), std::vector<std::string>{"efa"});
  EXPECT_EQ(default_providers({}, true, "shm,tcp", offers),
            (std::vector<std::string>{"shm", "tcp"}));
  EXPECT_EQ(default_providers({}, true, "^sockets", offers), std::vector<std::string>{""});
  // Locally: one network provider and shared memory, not every provider.
  EXPECT_EQ(default_providers({}, true, nullptr, offers),
            (std::vector<std::string>{"tcp;ofi_rxm", "shm"}));
  // To another host: every provider with tagged RDM endpoints that leave the host, in
  // libfabric's order; shm cannot, and an endpoint without tagged messages is not offered.
  EXPECT_EQ(default_providers({}, false, nullptr, offers),
            (std::vector<std::string>{"udp;ofi_rxd", "tcp;ofi_rxm"}));
  EXPECT_EQ(default_providers({}, false, nullptr, {}), std::vector<std::string>{""});
}

TEST(OfiOptions, FiProviderIsJudgedAgainstASidesLibrary) {
  const nlohmann::json library{
      {"providers",
       {{{"provider", "tcp;ofi_rxm"}}, {{"provider", "shm"}}, {{"provider", "tcp;ofi_rxm"}}}}};
  auto [missing, available] = judge_provider_variable("efa", library);
  EXPECT_EQ(missing, std::vector<std::string>{"efa"});
  EXPECT_EQ(available, (std::vector<std::string>{"tcp;ofi_rxm", "shm"}));
  EXPECT_TRUE(judge_provider_variable("tcp", library).first.empty());  // a part of a layered one
  EXPECT_TRUE(judge_provider_variable("tcp;ofi_rxm", library).first.empty());
  EXPECT_EQ(judge_provider_variable("shm,efa,verbs;ofi_rxm", library).first,
            (std::vector<std::string>{"efa", "verbs;ofi_rxm"}));
  EXPECT_TRUE(judge_provider_variable("^efa", library).first.empty());
  // A side whose hello does not describe libfabric is not judged.
  EXPECT_TRUE(judge_provider_variable("efa", nlohmann::json::object()).second.empty());
  EXPECT_TRUE(judge_provider_variable("efa", nlohmann::json{{"providers", 3}}).first.empty());
}

TEST(OfiOptions, WhatAProviderLacksIsNamed) {
  // offers(rma, hmem, ordered) as fi_getinfo would answer for a provider with tagged RDM
  // endpoints and only the features listed.
  const auto provider = [](bool has_rma, bool has_hmem, bool has_order) {
    return [=](bool rma, bool hmem, bool ordered) {
      return (!rma || has_rma) && (!hmem || has_hmem) && (!ordered || has_order);
    };
  };
  EXPECT_EQ(what_lacks(provider(true, true, true), true, true), "");
  EXPECT_EQ(what_lacks(provider(false, true, true), true, false),
            "RMA (FI_RMA with remote read and write)");
  EXPECT_EQ(what_lacks(provider(false, true, true), false, true), "");
  EXPECT_EQ(what_lacks(provider(true, false, true), false, true),
            "device memory (FI_HMEM), which cuda buffers need");
  EXPECT_EQ(what_lacks(provider(true, true, false), false, false),
            "send-after-send ordering (FI_ORDER_SAS)");
  // Each alone, not together.
  const auto not_both = [](bool rma, bool hmem, bool) { return !(rma && hmem); };
  EXPECT_EQ(what_lacks(not_both, true, true),
            "RMA and device memory (FI_RMA with FI_HMEM) together");
}

TEST(OfiOptions, OwnOptionsAreCheckedOnBothSides) {
  EXPECT_EQ(options_from(nlohmann::json::object()).inject, "auto");
  EXPECT_EQ(options_from({{"inject", "off"}}).inject, "off");
  EXPECT_EQ(to_json(options_from({{"inject", "flag"}})), (nlohmann::json{{"inject", "flag"}}));
  EXPECT_THROW(options_from({{"inject", "maybe"}}), usage_error);
  EXPECT_THROW(options_from({{"inject", 1}}), usage_error);
}

TEST(OfiOptions, InjectionFollowsWhatEachProviderWasSeenToDo) {
  EXPECT_EQ(use_inject(options{}, "tcp;ofi_rxm").first, inject_mode::tinject);
  EXPECT_EQ(use_inject(options{}, "shm").first, inject_mode::tinject);
  EXPECT_EQ(use_inject(options{}, "udp;ofi_rxd").first, inject_mode::off);  // it loses them
  EXPECT_NE(use_inject(options{}, "udp;ofi_rxd").second.find("ofi_rxd"), std::string::npos);
  EXPECT_EQ(use_inject(options{}, "verbs;ofi_rxm").first, inject_mode::flag);
  EXPECT_EQ(use_inject(options{}, "efa").first, inject_mode::flag);
  EXPECT_EQ(use_inject(options{"tinject"}, "udp;ofi_rxd").first, inject_mode::tinject);
  EXPECT_EQ(use_inject(options{"off"}, "shm").first, inject_mode::off);
}

TEST(OfiOptions, LaneKinds) {
  EXPECT_EQ(kind_of_provider("shm"), lane_kind::shared_memory);
  EXPECT_EQ(kind_of_provider("tcp;ofi_rxm"), lane_kind::network);
  EXPECT_EQ(kind_of_provider("verbs;ofi_rxm"), lane_kind::rdma);
  EXPECT_EQ(kind_of_provider("efa"), lane_kind::rdma);
  EXPECT_EQ(kind_of_provider("cxi"), lane_kind::rdma);
  EXPECT_EQ(kind_of_provider("something_new"), lane_kind::unknown);
}

TEST(OfiOptions, TheRegistryCarriesTheTransport) {
  const auto* e = transport_registry::instance().find("ofi");
  ASSERT_NE(e, nullptr);
  ASSERT_TRUE(e->env_axis.has_value());
  EXPECT_EQ(e->env_axis->variable, "FI_PROVIDER");
  EXPECT_EQ(e->env_prefixes, std::vector<std::string>{"FI_"});
  const auto vars = transport_registry::instance().library_variables();
  EXPECT_NE(std::find(vars.begin(), vars.end(), "FI_PROVIDER"), vars.end());
  EXPECT_EQ(e->lane_kind_of("shm"), lane_kind::shared_memory);
}

std::vector<std::byte> sockaddr_bytes(const char* ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  std::vector<std::byte> out(sizeof(a));
  std::memcpy(out.data(), &a, sizeof(a));
  return out;
}

std::vector<std::byte> text_bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

TEST(OfiAddress, RoundTrip) {
  const endpoint_name tcp{"tcp;ofi_rxm", FI_SOCKADDR_IN, sockaddr_bytes("127.0.0.1", 4000)};
  const endpoint_name back = decode_address(encode_address(tcp));
  EXPECT_EQ(back.provider, tcp.provider);
  EXPECT_EQ(back.format, tcp.format);
  EXPECT_EQ(back.name, tcp.name);
  EXPECT_NO_THROW(check_peer_name(back, tcp));
}

TEST(OfiAddress, MalformedBytesAreRefused) {
  EXPECT_THROW(decode_address(text_bytes("garbage")), std::invalid_argument);
  EXPECT_THROW(decode_address(text_bytes(R"({"provider":"shm","addr_format":-1,"name":"00"})")),
               std::invalid_argument);
  EXPECT_THROW(decode_address(text_bytes(R"({"provider":"shm","addr_format":4,"name":"zz"})")),
               std::invalid_argument);
  EXPECT_THROW(decode_address(text_bytes(R"({"provider":"shm","addr_format":4,"name":""})")),
               std::invalid_argument);
  EXPECT_THROW(decode_address(text_bytes(R"({"provider":"shm","addr_format":1e300,"name":"00"})")),
               std::invalid_argument);
  const std::string big(2 * 1025, 'a');
  EXPECT_THROW(
      decode_address(text_bytes(R"({"provider":"shm","addr_format":4,"name":")" + big + "\"}")),
      std::invalid_argument);
}

TEST(OfiAddress, APeersNameMustFitThisSidesProviderAndFormat) {
  const endpoint_name mine{"tcp;ofi_rxm", FI_SOCKADDR_IN, sockaddr_bytes("127.0.0.1", 4000)};
  endpoint_name peer = mine;
  peer.provider = "shm";
  EXPECT_THROW(check_peer_name(peer, mine), std::invalid_argument);
  peer = mine;
  peer.format = FI_SOCKADDR_IN6;
  EXPECT_THROW(check_peer_name(peer, mine), std::invalid_argument);
  peer = mine;
  peer.name.assign(64, std::byte{0xff});  // the wrong size and family for a sockaddr_in
  EXPECT_THROW(check_peer_name(peer, mine), std::invalid_argument);
  peer = mine;
  peer.name[0] = std::byte{0xff};  // the right size, a foreign family
  peer.name[1] = std::byte{0xff};
  EXPECT_THROW(check_peer_name(peer, mine), std::invalid_argument);

  const endpoint_name shm{"shm", FI_ADDR_STR, text_bytes(std::string("fi_shm://4128:0:0") + '\0')};
  EXPECT_NO_THROW(check_peer_name(shm, shm));
  endpoint_name bad = shm;
  bad.name = text_bytes("fi_shm://41\n28");
  EXPECT_THROW(check_peer_name(bad, shm), std::invalid_argument);
  bad.name = text_bytes("/etc/passwd");
  EXPECT_THROW(check_peer_name(bad, shm), std::invalid_argument);

  // A provider-specific binary format: its size is the provider's.
  const endpoint_name efa{"efa", FI_ADDR_EFA, std::vector<std::byte>(32, std::byte{1})};
  EXPECT_NO_THROW(check_peer_name(efa, efa));
  bad = efa;
  bad.name.resize(8);
  EXPECT_THROW(check_peer_name(bad, efa), std::invalid_argument);
}

}  // namespace
}  // namespace pairperf::ofi
