#include <gtest/gtest.h>

#include "core/frame.h"

namespace pairperf {
namespace {

std::string header(std::uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

TEST(Frame, EncodesLengthThenJson) {
  const std::string f = encode_frame({{"type", "bye"}});
  ASSERT_EQ(f.size(), 4U + 14U);
  EXPECT_EQ(f.substr(0, 4), header(14));
  EXPECT_EQ(f.substr(4), R"({"type":"bye"})");
}

TEST(Frame, DecodesByteByByteAndBackToBack) {
  const std::string stream =
      encode_frame({{"type", "hello"}, {"protocol", 1}}) + encode_frame({{"type", "bye"}});
  frame_decoder d;
  std::vector<nlohmann::json> got;
  for (char c : stream) {
    d.feed(std::string_view(&c, 1));
    for (;;) {
      auto item = d.next();
      if (auto* m = std::get_if<nlohmann::json>(&item)) {
        got.push_back(*m);
        continue;
      }
      ASSERT_FALSE(std::holds_alternative<frame_error>(item));
      break;
    }
  }
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[0]["protocol"], 1);
  EXPECT_EQ(got[1]["type"], "bye");
  EXPECT_EQ(d.pending(), 0U);
}

TEST(Frame, TruncatedFrameIsReportedAsSuch) {
  const std::string f = encode_frame({{"type", "case"}, {"x", "yyyyyyyy"}});
  frame_decoder d;
  d.feed(std::string_view(f).substr(0, 10));
  EXPECT_TRUE(std::holds_alternative<frame_decoder::need_more>(d.next()));
  EXPECT_GT(d.pending(), 0U);
  EXPECT_NE(d.truncation_message().find("6 of"), std::string::npos) << d.truncation_message();
  frame_decoder h;
  h.feed(std::string_view(f).substr(0, 2));
  EXPECT_NE(h.truncation_message().find("2 of 4 header"), std::string::npos);
}

TEST(Frame, OversizedFrameIsRefusedBeforeItsBodyArrives) {
  frame_decoder d;
  d.feed(header(max_frame_bytes + 1));
  auto item = d.next();
  ASSERT_TRUE(std::holds_alternative<frame_error>(item));
  EXPECT_NE(std::get<frame_error>(item).reason.find("exceeds"), std::string::npos);
  // The decoder stays failed.
  d.feed(encode_frame({{"type", "bye"}}));
  EXPECT_TRUE(std::holds_alternative<frame_error>(d.next()));
}

TEST(Frame, RefusesGarbage) {
  const auto reason = [](const std::string& bytes) {
    frame_decoder d;
    d.feed(bytes);
    auto item = d.next();
    return std::holds_alternative<frame_error>(item) ? std::get<frame_error>(item).reason
                                                     : std::string("accepted");
  };
  EXPECT_NE(reason(header(0)).find("empty"), std::string::npos);
  EXPECT_NE(reason(header(5) + "{{{{{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(reason(header(7) + "[1,2,3]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(reason(header(8) + R"({"a":1})" + " ").find("'type'"), std::string::npos);
  EXPECT_NE(reason(header(10) + R"({"type":1})").find("'type'"), std::string::npos);
  EXPECT_NE(reason("GET / HTTP/1.1\r\n\r\n").find("exceeds"),
            std::string::npos);  // "GET " read as a length
}

TEST(Frame, EncodeRefusesOversizedMessages) {
  nlohmann::json big{{"type", "x"}, {"blob", std::string(max_frame_bytes, 'a')}};
  EXPECT_THROW(encode_frame(big), std::length_error);
}

}  // namespace
}  // namespace pairperf
