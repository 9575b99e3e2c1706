#pragma once
// A log line as the library printed it, before launchers dressed it: explain reads lines that
// torchrun, Ray, mpirun, Slurm, kubectl and docker compose prefixed, and that terminals coloured.
// `clean_line` takes those off (repeatedly: `[rank3]:` inside a Ray prefix inside a kubectl
// timestamp) and says who printed the line, so the library's own format matches and the lines of
// several ranks in one file can be told apart.
#include <string>
#include <string_view>

namespace pairperf {

struct clean_result {
  std::string text;    // the line without colour codes and launcher prefixes
  std::string origin;  // who printed it as the launcher says ("rank3", "RayWorker pid=7"), or ""
};

// Colour codes go wherever they are (ESC [ ... m, and the "[36m" a copy-paste leaves when it
// drops the ESC); prefixes only at the start of the line.
clean_result clean_line(std::string_view raw);

}  // namespace pairperf
