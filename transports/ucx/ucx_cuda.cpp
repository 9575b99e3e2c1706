#include "transports/ucx/ucx_cuda.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <ucs/type/status.h>

#include <cstdlib>
#include <filesystem>

#include "transports/ucx/ucx_library.h"
#include "transports/ucx/ucx_options.h"

namespace pairperf::ucx {
namespace {

namespace fs = std::filesystem;

// The libraries UCX's CUDA module takes from the driver (not from the toolkit).
constexpr const char* driver_libraries[] = {"libcuda.so.1", "libnvidia-ml.so.1"};

std::string first_driver_error() {
  for (const char* name : driver_libraries) {
    if (void* h = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD); h != nullptr) {
      ::dlclose(h);
      continue;
    }
    void* h = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (h == nullptr) {
      const char* err = ::dlerror();
      return err != nullptr ? err : fmt::format("{}: cannot be loaded", name);
    }
    ::dlclose(h);
  }
  return {};
}

cuda_support probe() {
  cuda_support s;
  if (load(&s.unloadable) == nullptr) return s;
  s.cuda_copy = available_transports().count("cuda_copy") > 0;
  // UCX looks for modules in "<directory of libucs>/ucx", then UCX_MODULE_DIR.
  s.ucs_library = lib().ucs;
  if (!s.ucs_library.empty())
    s.module_dir = (fs::path(s.ucs_library).parent_path() / "ucx").string();
  std::vector<std::string> dirs{s.module_dir};
  if (const char* env = std::getenv("UCX_MODULE_DIR"); env != nullptr && *env != '\0')
    dirs.emplace_back(env);
  for (const auto& dir : dirs) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / "libuct_cuda.so.0";
    std::error_code ec;
    if (fs::exists(candidate, ec)) {
      s.module = candidate.string();
      s.module_dir = dir;
      break;
    }
  }
  if (!s.module.empty() && !s.cuda_copy) s.driver_error = first_driver_error();
  return s;
}

}  // namespace

const cuda_support& probe_cuda_support() {
  static const cuda_support s = probe();
  return s;
}

std::string explain_missing_cuda(const cuda_support& s) {
  if (s.cuda_copy) return {};
  if (!s.unloadable.empty()) return s.unloadable;
  const std::string which =
      s.ucs_library.empty() ? "this UCX" : fmt::format("the UCX in use ({})", s.ucs_library);
  if (s.module.empty())
    return fmt::format(
        "{} was built without CUDA support: there is no libuct_cuda module in {} (Debian's libucx0 "
        "has none; build one with scripts/build-ucx-cuda and run with "
        "LD_LIBRARY_PATH=<its prefix>/lib)",
        which, s.module_dir.empty() ? std::string("its module directory") : s.module_dir);
  if (!s.driver_error.empty())
    return fmt::format(
        "UCX's CUDA module {} is installed but cannot load: {} (no NVIDIA driver libraries in "
        "this process's library path; in a container, run it with the NVIDIA container runtime "
        "or mount the driver's libraries)",
        s.module, s.driver_error);
  return fmt::format(
      "UCX's CUDA module {} and the driver libraries load, but UCX offers no cuda_copy: it sees "
      "no usable GPU (check CUDA_VISIBLE_DEVICES and nvidia-smi; UCX_LOG_LEVEL=debug ucx_info -d "
      "shows UCX's reason)",
      s.module);
}

nlohmann::json to_json(const cuda_support& s) {
  nlohmann::json j{
      {"cuda_copy", s.cuda_copy},
      {"ucs_library", s.ucs_library},
      {"module_dir", s.module_dir},
      {"module", s.module.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.module)}};
  if (const std::string why = explain_missing_cuda(s); !why.empty()) j["why_not"] = why;
  return j;
}

}  // namespace pairperf::ucx
