#pragma once
// The cause classes explain answers with: what a failure comes down to, and whether the network
// is to blame. The classes are those a platform engineer fixes in different places (an interface
// variable, a name service, a firewall, the RDMA fabric, the container's limits, a crashed rank),
// so a verdict with the wrong class sends the user to the wrong team. `undetermined` is the
// honest answer when the logs show only consequences (a watchdog timeout, a reset) of a first
// cause they do not hold.
#include <string>
#include <vector>

namespace pairperf {

struct cause_class_info {
  const char* id;
  bool network;       // the network (or its configuration) is the cause
  const char* title;  // what it means, for the text report
};

// Every class, network classes first. Ids are stable: they are JSON values and corpus labels.
const std::vector<cause_class_info>& cause_classes();

// The class's entry, or nullptr for an unknown id.
const cause_class_info* find_cause_class(const std::string& id);

// The ids, joined with ", " (for error messages).
std::string cause_class_ids();

}  // namespace pairperf
