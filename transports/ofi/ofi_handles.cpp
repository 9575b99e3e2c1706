#include "transports/ofi/ofi_handles.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <signal.h>

#include <array>
#include <mutex>
#include <type_traits>

namespace pairperf::ofi {
namespace {

struct loaded {
  library functions;
  std::string why;  // "" when loaded
};

// The signals libpsm_infinipath's constructor takes (libfabric links it for its psm provider;
// Debian 12's libfabric1 1.17.0): it writes a backtrace to stderr and a .btr file into the working
// directory and calls exit(1), unless IPATH_NO_BACKTRACE is set. A crash inside libfabric then
// ended a server's session or a case process as a plain exit 1, which their supervisors take for
// a clean end. PSM installs them in a constructor "so any user program that sets signal handlers
// for these will override our settings" (psm2's hfi_debug.c, the same code): the process's own
// handlers are put back as they were before the load.
constexpr std::array<int, 6> taken_signals{SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT, SIGTERM};

void* open_keeping_handlers(const char* file) {
  std::array<struct sigaction, taken_signals.size()> before{};
  for (std::size_t i = 0; i < taken_signals.size(); ++i)
    ::sigaction(taken_signals[i], nullptr, &before[i]);
  void* handle = ::dlopen(file, RTLD_NOW | RTLD_LOCAL);
  for (std::size_t i = 0; i < taken_signals.size(); ++i)
    ::sigaction(taken_signals[i], &before[i], nullptr);
  return handle;
}

const loaded& loaded_library() {
  static std::once_flag once;
  static loaded l;
  std::call_once(once, [] {
    void* handle = open_keeping_handlers("libfabric.so.1");
    if (handle == nullptr) {
      const char* e = ::dlerror();
      l.why = fmt::format("libfabric cannot be loaded ({}; Debian: apt-get install libfabric1)",
                          e != nullptr ? e : "libfabric.so.1");
      return;
    }
    // The versions of the symbols these headers were compiled against (nm -D of a linked build).
    const auto get = [&](auto& out, const char* name, const char* version) {
      void* p = ::dlvsym(handle, name, version);
      if (p == nullptr && l.why.empty())
        l.why = fmt::format("this libfabric has no {}@{}", name, version);
      out = reinterpret_cast<std::remove_reference_t<decltype(out)>>(p);
    };
    get(l.functions.getinfo, "fi_getinfo", "FABRIC_1.3");
    get(l.functions.freeinfo, "fi_freeinfo", "FABRIC_1.3");
    get(l.functions.dupinfo, "fi_dupinfo", "FABRIC_1.3");
    get(l.functions.fabric, "fi_fabric", "FABRIC_1.1");
    get(l.functions.strerror, "fi_strerror", "FABRIC_1.0");
    get(l.functions.tostr, "fi_tostr", "FABRIC_1.0");
    get(l.functions.version, "fi_version", "FABRIC_1.0");
    // The handle stays open for the life of the process: providers keep state in it.
  });
  return l;
}

}  // namespace

const library* load(std::string* why) {
  const loaded& l = loaded_library();
  if (why != nullptr) *why = l.why;
  return l.why.empty() ? &l.functions : nullptr;
}

const library& lib() noexcept { return loaded_library().functions; }

info_ptr alloc_info() { return info_ptr(lib().dupinfo(nullptr)); }

info_ptr get_info(const fi_info* hints, const char* node, std::uint64_t flags, int& rc) {
  fi_info* list = nullptr;
  rc = lib().getinfo(api_version, node, nullptr, flags, hints, &list);
  if (rc != 0) {
    if (list != nullptr) lib().freeinfo(list);
    return nullptr;
  }
  return info_ptr(list);
}

std::string failure(const char* call, int rc) {
  return fmt::format("{}: {} ({})", call, lib().strerror(rc < 0 ? -rc : rc), rc);
}

std::string text_of(const void* value, enum fi_type type) {
  const char* s = lib().tostr(value, type);
  std::string out = s != nullptr ? s : "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace pairperf::ofi
