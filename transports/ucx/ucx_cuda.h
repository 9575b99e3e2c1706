#pragma once
// Why this process's UCX can or cannot move GPU memory. Debian's libucx0 is built without CUDA;
// a CUDA-enabled UCX (scripts/build-ucx-cuda) has a libuct_cuda module that loads only where the
// driver's libcuda.so.1 and libnvidia-ml.so.1 do, and offers cuda_copy only where a GPU is seen.
// A user who sees "no cuda_copy" needs to know which of these it is.
#include <nlohmann/json.hpp>
#include <string>

namespace pairperf::ucx {

struct cuda_support {
  std::string unloadable;    // why no UCX loads in this process at all, "" if one does
  std::string ucs_library;   // the libucs this process loaded ("" if unknown)
  std::string module_dir;    // where UCX looks for its transport modules
  std::string module;        // the CUDA transport module found there, "" if none
  std::string driver_error;  // why a driver library UCX's module needs does not load, "" if they do
  bool cuda_copy = false;    // UCX offers cuda_copy: GPU memory can move
};

// Asks this process (once): dladdr on libucs, the module directory, the driver libraries.
const cuda_support& probe_cuda_support();

// One sentence on why GPU memory cannot move, with what to do; "" when cuda_copy is offered.
std::string explain_missing_cuda(const cuda_support& s);

nlohmann::json to_json(const cuda_support& s);

}  // namespace pairperf::ucx
