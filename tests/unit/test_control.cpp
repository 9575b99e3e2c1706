#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/control.h"

namespace pairperf {
namespace {

using namespace std::chrono_literals;

struct channel_pair {
  channel_pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    a.emplace(unique_fd(fds[0]), where{"", "peer-b", "if-a"});
    raw_b = fds[1];
  }
  ~channel_pair() {
    if (raw_b >= 0) ::close(raw_b);
  }
  std::optional<control_channel> a;
  int raw_b = -1;

  void write_b(const std::string& bytes) const {
    ASSERT_EQ(::write(raw_b, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  std::string read_b() const {
    char buf[4096];
    const ssize_t n = ::read(raw_b, buf, sizeof(buf));
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }
};

TEST(Control, SendsAndReceivesNamedMessages) {
  channel_pair p;
  p.a->send(msg_type::case_, {{"x", 1}}, "case 1 setup", 1s);
  const std::string wire = p.read_b();
  EXPECT_NE(wire.find(R"("type":"case")"), std::string::npos);
  p.write_b(encode_frame({{"type", "ready"}, {"address", "abcd"}}));
  const auto body = p.a->expect(msg_type::ready, "case 1 setup", 1s);
  EXPECT_EQ(body["address"], "abcd");
}

TEST(Control, TimeoutNamesTheStepPeerAndInterface) {
  channel_pair p;
  const auto start = steady::now();
  try {
    p.a->receive("hello", 200ms);
    FAIL() << "expected a timeout";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::timeout);
    const std::string what = e.what();
    EXPECT_NE(what.find("hello failed"), std::string::npos) << what;
    EXPECT_NE(what.find("peer peer-b"), std::string::npos) << what;
    EXPECT_NE(what.find("interface if-a"), std::string::npos) << what;
  }
  EXPECT_LT(steady::now() - start, 1s);
}

TEST(Control, OversizedFrameIsAnsweredWithAnErrorAndThrown) {
  channel_pair p;
  p.write_b(std::string("\x7f\xff\xff\xff", 4));
  try {
    p.a->receive("waiting", 1s);
    FAIL() << "expected a protocol error";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::protocol);
  }
  const std::string reply = p.read_b();
  EXPECT_NE(reply.find(R"("type":"error")"), std::string::npos) << reply;
  EXPECT_NE(reply.find("exceeds"), std::string::npos) << reply;
}

TEST(Control, PeerClosingMidFrameIsATruncation) {
  channel_pair p;
  const std::string f = encode_frame({{"type", "results"}, {"pad", std::string(100, 'x')}});
  p.write_b(f.substr(0, 20));
  ::close(p.raw_b);
  p.raw_b = -1;
  try {
    p.a->receive("case 2 measure results", 1s);
    FAIL() << "expected closed";
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::closed);
    EXPECT_NE(std::string(e.what()).find("truncated frame"), std::string::npos) << e.what();
  }
}

TEST(Control, RefusalAndPeerErrorsCarryThePeersText) {
  channel_pair p;
  p.write_b(encode_frame({{"type", "refused"}, {"reason", "protocol version 9 is not supported"}}));
  try {
    p.a->expect(msg_type::hello, "hello", 1s);
    FAIL();
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::refused);
    EXPECT_NE(std::string(e.what()).find("version 9"), std::string::npos);
  }
  p.write_b(encode_frame({{"type", "error"}, {"message", "no such test"}}));
  try {
    p.a->expect(msg_type::ready, "case", 1s);
    FAIL();
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::error);
    EXPECT_NE(std::string(e.what()).find("no such test"), std::string::npos);
  }
}

TEST(Control, UnknownAndUnexpectedTypesAreProtocolErrors) {
  channel_pair p;
  p.write_b(encode_frame({{"type", "teleport"}}));
  try {
    p.a->receive("waiting", 1s);
    FAIL();
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::protocol);
  }
  channel_pair q;
  q.write_b(encode_frame({{"type", "bye"}}));
  try {
    q.a->expect(msg_type::ready, "case", 1s);
    FAIL();
  } catch (const step_error& e) {
    EXPECT_EQ(e.kind(), error_kind::protocol);
    EXPECT_NE(std::string(e.what()).find("expected 'ready', got 'bye'"), std::string::npos)
        << e.what();
  }
}

TEST(Control, MessageNamesRoundTrip) {
  for (auto t :
       {msg_type::hello, msg_type::case_, msg_type::ready, msg_type::run, msg_type::running,
        msg_type::results, msg_type::bye, msg_type::refused, msg_type::error}) {
    EXPECT_EQ(parse_msg_type(to_string(t)), t);
  }
  EXPECT_FALSE(parse_msg_type("case_").has_value());
}

}  // namespace
}  // namespace pairperf
