// libFuzzer harness: the results-file reader `pairperf compare` and `export` use, on any bytes.
// An unreadable file must be a compare_error (exit 2, naming the file), never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "analysis/compare.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The first byte picks the reader: a results file (.json) or JSON Lines (.jsonl).
  if (size == 0) return 0;
  // In memory where there is a tmpfs for it: a file per input.
  static const std::string folder = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = folder + "/pairperf-fuzz-results-" + std::to_string(::getpid()) +
                           ((data[0] & 1) != 0 ? ".jsonl" : ".json");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  try {
    (void)pairperf::load_results(path);
  } catch (const pairperf::compare_error&) {  // NOLINT(bugprone-empty-catch)
  }
  std::remove(path.c_str());
  return 0;
}
