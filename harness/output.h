#pragma once
// Where every output option of pairperf writes: "-" is standard output, anything else a file
// written whole and atomically (a temporary file beside it, then rename), its folder created.
#include <string>

namespace pairperf {

// Throws std::runtime_error naming the path when it cannot be written.
void write_output(const std::string& path, const std::string& text);

}  // namespace pairperf
