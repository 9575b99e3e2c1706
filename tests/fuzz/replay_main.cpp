// A main() for the fuzz harnesses without libFuzzer: runs LLVMFuzzerTestOneInput once on each
// file named (or each file in each folder named). The suite replays the corpus in tests/fuzz
// this way with any compiler, under ASan/UBSan in `scripts/test --sanitize`; scripts/fuzz runs
// the real fuzzer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  std::size_t runs = 0;
  const auto one = [&](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++runs;
  };
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) one(e.path());
      }
    } else {
      one(p);
    }
  }
  std::printf("replayed %zu input(s)\n", runs);
  return runs > 0 ? 0 : 1;
}
