#pragma once
// How explain reads one log (internal to pairperf::diagnose): each line as the library printed it
// (log_line.h takes launchers' prefixes and colours off), a message wrapped onto indented lines
// as one, each tried against the catalog in its order (a failure before context; a generic
// socket format's errno words decide its class), and failure-looking lines no signature takes
// counted as unexplained.
#include <cstddef>

#include "diagnose/explain.h"

namespace pairperf {

// Appends the log's matches and unexplained lines to `e` (its logs and line counts are the
// caller's); `log` is the log's index in e.logs.
void read_lines(const explain_catalog& catalog, const log_input& in, std::size_t log,
                const explain_options& options, explanation& e);

}  // namespace pairperf
