#include "transports/registry.h"

#include <algorithm>
#include <stdexcept>

#include "transports/tcp/tcp_transport.h"
#if PAIRPERF_HAVE_UCX
#include "transports/ucx/ucx_transport.h"
#endif
#if PAIRPERF_HAVE_VERBS
#include "transports/verbs/verbs_transport.h"
#endif
#if PAIRPERF_HAVE_OFI
#include "transports/ofi/ofi_transport.h"
#endif
#if PAIRPERF_HAVE_GLOO
#include "transports/gloo/gloo_transport.h"
#endif

namespace pairperf {

const transport_registry& transport_registry::instance() {
  static const transport_registry built_ins = [] {
    transport_registry r;
    r.add(tcp_transport::entry());
#if PAIRPERF_HAVE_UCX
    r.add(ucx_transport::entry());
#endif
#if PAIRPERF_HAVE_VERBS
    r.add(verbs_transport::entry());
#endif
#if PAIRPERF_HAVE_OFI
    r.add(ofi_transport::entry());
#endif
#if PAIRPERF_HAVE_GLOO
    r.add(gloo_transport::entry());
#endif
    return r;
  }();
  return built_ins;
}

void transport_registry::add(transport_entry entry) {
  if (find(entry.name) != nullptr)
    throw std::logic_error("duplicate transport name: " + entry.name);
  m_entries.push_back(std::move(entry));
}

const transport_entry* transport_registry::find(const std::string& name) const noexcept {
  for (const auto& e : m_entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const test_spec* transport_registry::find_test(const std::string& transport,
                                               const std::string& test) const noexcept {
  const transport_entry* e = find(transport);
  if (e == nullptr) return nullptr;
  for (const auto& t : e->tests) {
    if (t.name == test) return &t;
  }
  return nullptr;
}

std::vector<std::string> transport_registry::names() const {
  std::vector<std::string> out;
  out.reserve(m_entries.size());
  for (const auto& e : m_entries) out.push_back(e.name);
  return out;
}

std::vector<std::string> transport_registry::device_variables() const {
  std::vector<std::string> out;
  for (const auto& e : m_entries) {
    if (e.doctor && e.doctor->what == doctor_probe::role::library &&
        !e.doctor->device_variable.empty() &&
        std::find(out.begin(), out.end(), e.doctor->device_variable) == out.end())
      out.push_back(e.doctor->device_variable);
  }
  return out;
}

std::vector<std::string> transport_registry::library_variables() const {
  std::vector<std::string> out;
  for (const auto& e : m_entries) {
    if (e.env_axis && std::find(out.begin(), out.end(), e.env_axis->variable) == out.end())
      out.push_back(e.env_axis->variable);
  }
  for (auto& v : device_variables()) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
  }
  return out;
}

}  // namespace pairperf
