#pragma once
// Where every output option of pairperf writes: "-" is standard output, anything else a regular
// file written whole and atomically (a temporary file beside it, then rename). A missing folder
// is an error unless the caller asks for it to be made (pairperf's own default paths); a path
// that names anything but a regular file (a device, a folder, a socket) is refused; a temporary
// file never outlives a failure.
#include <cstdint>
#include <string>

namespace pairperf {

// Checks now, before any work, that write_output(path) will be able to write: the folder
// exists (or is made, with make_folder) and takes a new file, and the path is not something
// other than a regular file. Throws usage_error naming the path and the reason.
void check_output(const std::string& path, bool make_folder = false);

// Throws std::runtime_error naming the path when it cannot be written.
void write_output(const std::string& path, const std::string& text, bool make_folder = false);

// A file whose room is taken before the work that fills it: the path is checked as
// check_output does, a file with no name yet is made in its folder (O_TMPFILE; a named temporary
// file beside it where the filesystem has none) and `bytes` are allocated to it. A disk that
// fills during a sweep then cannot cost the sweep's results, and a disk already too full is an
// error before the first case. commit() writes the text over the reservation, trims the rest,
// syncs and renames it into place, replacing the previous file atomically; until then (and on any
// failure) the previous file is untouched and nothing is left behind (an unnamed file vanishes
// with the process, even one killed by SIGKILL). "-" reserves nothing and commits to stdout.
class reserved_output {
 public:
  // Throws usage_error naming the path and the reason (no room: how much is free, how much the
  // results need).
  reserved_output(std::string path, std::uint64_t bytes, bool make_folder = false);
  reserved_output(const reserved_output&) = delete;
  reserved_output& operator=(const reserved_output&) = delete;
  ~reserved_output();
  // Throws std::runtime_error naming the path; the previous file, if any, is kept.
  void commit(const std::string& text);
  [[nodiscard]] const std::string& path() const noexcept { return m_path; }

 private:
  std::string m_path;
  std::string m_named;  // the temporary file's name where O_TMPFILE was not available
  int m_fd = -1;
  bool m_done = false;
};

}  // namespace pairperf
