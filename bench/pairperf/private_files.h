#pragma once
// The files pairperf ships beside its binary (scripts/report, pairperf-mpi), found relative to the
// running binary, never through the build or source path: installed, they are in
// <prefix>/libexec/pairperf (PAIRPERF_LIBEXEC_REL from the binary's folder); in a build tree, in
// libexec/ beside build/pairperf. $PAIRPERF_LIBEXEC_DIR overrides both.
#include <string>
#include <string_view>
#include <vector>

namespace pairperf::cli {

// The path of `name` among pairperf's private files, or "" when none exists. `also` is a folder
// to look in first (a tool-specific override such as $PAIRPERF_SCRIPTS), ignored when empty.
// A program must be executable; a data file (explain's catalog) need only be readable.
std::string find_private_file(std::string_view name, std::string_view also = {},
                              bool program = true);

// The folders find_private_file looks in, in order (for error messages).
std::vector<std::string> private_file_folders(std::string_view also = {});

// Replaces this process with the program argv[0] (searched on PATH when it has no '/'), given
// argv. Returns only on failure, with errno set.
void exec_program(std::vector<std::string> argv);

}  // namespace pairperf::cli
