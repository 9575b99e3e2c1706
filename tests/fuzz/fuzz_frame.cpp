// libFuzzer harness: the control channel's frame decoder, fed in pieces as a socket would.
// The first byte chooses the piece size; every item the decoder gives back is taken.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  pairperf::frame_decoder decoder;
  while (!rest.empty()) {
    const std::size_t n = rest.size() < piece ? rest.size() : piece;
    decoder.feed(rest.substr(0, n));
    rest.remove_prefix(n);
    for (;;) {
      auto item = decoder.next();
      if (std::holds_alternative<pairperf::frame_decoder::need_more>(item)) break;
      if (std::holds_alternative<pairperf::frame_error>(item)) return 0;  // stays in error
    }
  }
  (void)decoder.truncation_message();
  return 0;
}
