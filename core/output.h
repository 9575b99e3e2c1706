#pragma once
// Where every output option of pairperf writes: "-" is standard output, anything else a regular
// file written whole and atomically (a temporary file beside it, then rename). A missing folder
// is an error unless the caller asks for it to be made (pairperf's own default paths); a path
// that names anything but a regular file (a device, a folder, a socket) is refused; a temporary
// file never outlives a failure.
#include <string>

namespace pairperf {

// Checks now, before any work, that write_output(path) will be able to write: the folder
// exists (or is made, with make_folder) and takes a new file, and the path is not something
// other than a regular file. Throws usage_error naming the path and the reason.
void check_output(const std::string& path, bool make_folder = false);

// Throws std::runtime_error naming the path when it cannot be written.
void write_output(const std::string& path, const std::string& text, bool make_folder = false);

}  // namespace pairperf
