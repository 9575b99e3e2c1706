#pragma once
// What explain reads across the lines of all the logs (internal to pairperf::diagnose): the
// facts that cause rules name as evidence (explain_catalog.cpp's evidence names): loopback and
// link-local addresses, bridges, an address one log advertises and another could not reach, a
// setting that differs between the logs, a name whose lookup failed, a host named like a Docker
// container.
#include "diagnose/explain.h"

namespace pairperf {

// Appends to e.facts what e.matches show.
void find_facts(explanation& e);

}  // namespace pairperf
