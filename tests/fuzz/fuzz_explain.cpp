// libFuzzer harness: explain's reading of logs (colour codes, launchers' prefixes, wrapped
// messages, the shipped catalog and the generated formats) on any bytes. Any log must give an
// explanation, never a crash, a hang or a regex blow-up.
#include <cstddef>
#include <cstdint>
#include <string>

#include "diagnose/explain.h"

namespace {

const pairperf::explain_catalog& shipped() {
  static const pairperf::explain_catalog c = [] {
    auto cat = pairperf::load_catalog(PAIRPERF_SOURCE_DIR "/diagnose/explain-catalog.json");
    pairperf::load_formats(cat, PAIRPERF_SOURCE_DIR "/diagnose/explain-formats.json");
    return cat;
  }();
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Newlines split the input into lines; a NUL byte starts a second log.
  std::vector<pairperf::log_input> logs{{"a.log", {}}};
  std::string line;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n' || c == '\0') {
      logs.back().lines.push_back(line);
      line.clear();
      if (c == '\0' && logs.size() < 4) logs.push_back({"b.log", {}});
      continue;
    }
    line += c;
  }
  logs.back().lines.push_back(line);
  const auto e = pairperf::explain_logs(shipped(), logs, {});
  (void)pairperf::exit_code(e);
  nlohmann::json j = e;
  (void)j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
