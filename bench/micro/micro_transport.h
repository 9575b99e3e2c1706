#pragma once
// A transport whose peer answers at once, for measuring the loops' own work (micro_harness.cpp).
// Its class is in micro_transport.cpp only, as a real transport's is in its own folder.
#include <memory>

#include "transports/transport.h"

namespace pairperf {

std::unique_ptr<transport> make_instant_transport();

}  // namespace pairperf
