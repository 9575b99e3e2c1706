#include "diagnose/cause_class.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pairperf {

const std::vector<cause_class_info>& cause_classes() {
  static const std::vector<cause_class_info> classes{
      {"interface", true,
       "the library chose an interface that cannot reach the peer (or a different one per node)"},
      {"name_resolution", true,
       "a hostname does not resolve, or resolves to an unreachable address"},
      {"loopback", true, "a loopback address was advertised to other nodes"},
      {"port", true, "nothing listens at the address and port, or a firewall blocks them"},
      {"rdma", true, "the RDMA device, port, GID, MTU or queue-pair state"},
      {"fallback", true, "the data took a slower path than the job expects (no error)"},
      {"link", true, "a lossy, flapping or slow link dropped an established connection"},
      {"shm", false, "shared memory: /dev/shm too small or a segment that cannot be made"},
      {"container", false, "a container's or namespace's limits (IPC, PID, memlock, capabilities)"},
      {"version", false, "libraries, plugins or drivers of versions that do not fit together"},
      {"peer_died", false, "a peer process died for a reason of its own; the others saw it go"},
      {"oom", false, "out of memory (host or GPU)"},
      {"cuda", false, "a CUDA driver, runtime or GPU error"},
      {"config", false, "a setting or use of the library that is wrong, not about the network"},
      {"bug", false, "a defect of the library (fixed by upgrading or a patch)"},
      {"undetermined", false,
       "only consequences (timeouts, resets) of a first cause that these logs do not hold"},
  };
  return classes;
}

const cause_class_info* find_cause_class(const std::string& id) {
  for (const auto& c : cause_classes()) {
    if (id == c.id) return &c;
  }
  return nullptr;
}

std::string cause_class_ids() {
  std::vector<std::string> ids;
  for (const auto& c : cause_classes()) ids.emplace_back(c.id);
  return fmt::format("{}", fmt::join(ids, ", "));
}

}  // namespace pairperf
