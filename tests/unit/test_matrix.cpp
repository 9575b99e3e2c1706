#include <gtest/gtest.h>

#include "core/errors.h"
#include "harness/matrix.h"
#include "transports/registry.h"

namespace pairperf {
namespace {

std::vector<interface_info> fake_ifaces() {
  interface_info lo;
  lo.name = "lo";
  lo.up = true;
  lo.addresses.push_back({2, "127.0.0.1", 8});
  interface_info eth;
  eth.name = "eth0";
  eth.up = true;
  eth.addresses.push_back({2, "10.0.0.1", 24});
  return {eth, lo};
}

TEST(Matrix, DefaultsToEveryTestOfEveryTransport) {
  matrix_request req;
  req.sizes = {8, 1024};
  std::size_t all_tests = 0;
  for (const auto& e : transport_registry::instance().all()) all_tests += e.tests.size();
  EXPECT_EQ(expand_matrix(req, transport_registry::instance(), fake_ifaces()).size(),
            all_tests * 2);
  req.transports = {"tcp"};
  const auto cases = expand_matrix(req, transport_registry::instance(), fake_ifaces());
  ASSERT_EQ(cases.size(), 6U);  // tcp_lat, tcp_bw, tcp_bibw x 2 sizes
  EXPECT_EQ(cases[0].test, "tcp_lat");
  EXPECT_EQ(cases[0].size_bytes, 8U);
  EXPECT_EQ(cases[1].size_bytes, 1024U);  // size varies fastest
  EXPECT_EQ(cases[2].test, "tcp_bw");
  EXPECT_EQ(cases[2].pattern, pattern_kind::stream_uni);
  EXPECT_EQ(cases[5].pattern, pattern_kind::stream_bi);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(cases[i].index, i);
    EXPECT_EQ(cases[i].iface, "");
    EXPECT_EQ(cases[i].client_memory, memory_type::host);
  }
}

TEST(Matrix, CrossesInterfacesAndMemoryPairs) {
  matrix_request req;
  req.sizes = {64};
  req.tests = {"tcp_lat"};
  req.ifaces = {"all"};
  req.memory = {{memory_type::host, memory_type::host}, {memory_type::host, memory_type::cuda}};
  const auto cases = expand_matrix(req, transport_registry::instance(), fake_ifaces());
  ASSERT_EQ(cases.size(), 4U);
  EXPECT_EQ(cases[0].iface, "eth0");
  EXPECT_EQ(cases[1].iface, "eth0");
  EXPECT_EQ(cases[1].server_memory, memory_type::cuda);
  EXPECT_EQ(cases[2].iface, "lo");
}

TEST(Matrix, RefusesUnknownNamesWithTheValidOnes) {
  matrix_request req;
  req.sizes = {64};
  req.transports = {"carrier-pigeon"};
  try {
    expand_matrix(req, transport_registry::instance(), fake_ifaces());
    FAIL() << "expected usage_error";
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("tcp"), std::string::npos) << e.what();
  }
  req.transports = {};
  req.tests = {"tcp_nope"};
  EXPECT_THROW(expand_matrix(req, transport_registry::instance(), fake_ifaces()), usage_error);
  req.tests = {};
  req.ifaces = {"eth9"};
  try {
    expand_matrix(req, transport_registry::instance(), fake_ifaces());
    FAIL() << "expected usage_error";
  } catch (const usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("eth0"), std::string::npos) << e.what();
  }
  req.ifaces = {};
  req.sizes = {};
  EXPECT_THROW(expand_matrix(req, transport_registry::instance(), fake_ifaces()), usage_error);
}

transport_entry entry_named(std::string name, std::vector<test_spec> tests) {
  transport_entry e;
  e.name = std::move(name);
  e.tests = std::move(tests);
  return e;
}

TEST(Matrix, TlsAxisCrossesOnlyTransportsThatHaveIt) {
  transport_registry reg;
  reg.add(entry_named("plain", {{"p_lat", pattern_kind::pingpong, op_kind::send, ""}}));
  reg.add(entry_named("lib", {{"l_lat", pattern_kind::pingpong, op_kind::send, ""}}));
  matrix_request req;
  req.sizes = {8};
  req.axes["lib"] = {"tcp", "posix,sysv,cma", ""};
  const auto cases = expand_matrix(req, reg, fake_ifaces());
  ASSERT_EQ(cases.size(), 1U + 3U);
  EXPECT_EQ(cases[0].tls, "");
  EXPECT_EQ(cases[1].tls, "tcp");
  EXPECT_EQ(cases[2].tls, "posix,sysv,cma");
  EXPECT_EQ(cases[3].tls, "");
  EXPECT_EQ(cases[3].test, "l_lat");
}

TEST(Matrix, ParsesMemoryPairs) {
  EXPECT_EQ(parse_memory_pair("host,cuda"), std::make_pair(memory_type::host, memory_type::cuda));
  EXPECT_EQ(parse_memory_pair("cuda"), std::make_pair(memory_type::cuda, memory_type::cuda));
  EXPECT_THROW(parse_memory_pair("rocm"), usage_error);
  EXPECT_THROW(parse_memory_pair("host,"), usage_error);
}

TEST(Registry, RefusesDuplicates) {
  transport_registry r;
  const transport_entry e = entry_named("x", {});
  r.add(e);
  EXPECT_THROW(r.add(e), std::logic_error);
  EXPECT_NE(transport_registry::instance().find_test("tcp", "tcp_bw"), nullptr);
  EXPECT_EQ(transport_registry::instance().find_test("tcp", "put_bw"), nullptr);
}

TEST(Registry, TheVariablesDoctorAndMeshShowComeFromTheEntries) {
  transport_registry r;
  transport_entry a = entry_named("alpha", {});
  a.env_axis = transport_entry::env_axis_check{"ALPHA_TLS", {}};
  a.doctor = doctor_probe{doctor_probe::role::library, "a_bw", "a_lat", "net", "ALPHA_DEVICES"};
  transport_entry b = entry_named("beta", {});
  b.env_axis = transport_entry::env_axis_check{"BETA_SET", {}};
  b.doctor = doctor_probe{doctor_probe::role::reach, "b_bw", "", "", ""};
  transport_entry c = entry_named("gamma", {});
  c.env_axis = transport_entry::env_axis_check{"ALPHA_TLS", {}};  // a shared library's variable
  r.add(a);
  r.add(b);
  r.add(c);
  EXPECT_EQ(r.library_variables(),
            (std::vector<std::string>{"ALPHA_TLS", "BETA_SET", "ALPHA_DEVICES"}));
  EXPECT_EQ(r.device_variables(), (std::vector<std::string>{"ALPHA_DEVICES"}));
  EXPECT_TRUE(transport_registry{}.library_variables().empty());
}

}  // namespace
}  // namespace pairperf
