#include "transports/ucx/ucx_transport.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/errors.h"
#include "transports/ucx/ucx_cuda.h"
#include "transports/ucx/ucx_describe.h"
#include "transports/ucx/ucx_options.h"
#include "transports/ucx/ucx_provenance.h"
#include "transports/ucx/ucx_wire.h"

namespace pairperf {

using namespace ucx_wire;  // the transport's own wire constants
namespace {

struct ucx_test {
  test_spec spec;
  bool active_messages;
};

constexpr std::array<ucx_test, 10> tests{{
    {{"tag_lat", pattern_kind::pingpong, op_kind::send, "ping-pong latency of tagged messages"},
     false},
    {{"tag_bw", pattern_kind::stream_uni, op_kind::send, "streaming bandwidth of tagged messages"},
     false},
    {{"tag_bibw", pattern_kind::stream_bi, op_kind::send,
      "bidirectional bandwidth of tagged messages"},
     false},
    {{"put_lat", pattern_kind::pingpong, op_kind::put,
      "ping-pong latency of a put made visible to the target (put, flush, notification)"},
     false},
    {{"put_bw", pattern_kind::stream_uni, op_kind::put,
      "streaming bandwidth of puts (flushed, sender-measured)"},
     false},
    {{"put_bibw", pattern_kind::stream_bi, op_kind::put,
      "bidirectional bandwidth of puts, each side into the other (sender-measured)"},
     false},
    {{"get_lat", pattern_kind::pingpong, op_kind::get,
      "latency of one get at a time (one-way = round trip / 2)"},
     false},
    {{"get_bw", pattern_kind::stream_uni, op_kind::get,
      "streaming bandwidth of gets (measured by the reader)"},
     false},
    {{"am_lat", pattern_kind::pingpong, op_kind::send, "ping-pong latency of active messages"},
     true},
    {{"am_bw", pattern_kind::stream_uni, op_kind::send, "streaming bandwidth of active messages"},
     true},
}};

ucs_memory_type_t to_ucs(memory_type m) {
  switch (m) {
    case memory_type::host:
      return UCS_MEMORY_TYPE_HOST;
    case memory_type::cuda:
      return UCS_MEMORY_TYPE_CUDA;
  }
  return UCS_MEMORY_TYPE_UNKNOWN;
}

}  // namespace

transport_entry ucx_transport::entry() {
  transport_entry e;
  e.name = ucx::name;
  e.description =
      "UCX (UCP): tagged messages, active messages and RMA over the transports UCX_TLS selects";
  for (const auto& t : tests) e.tests.push_back(t.spec);
  e.create = [](const transport_params& p) -> std::unique_ptr<transport> {
    return std::make_unique<ucx_transport>(p);
  };
  e.add_run_options = ucx::add_run_options;
  e.describe_library = [] {
    std::string why;
    const ucx::library* l = ucx::load(&why);
    if (l == nullptr) return nlohmann::json{{"error", why}};
    // The library that really runs, not the headers' version (ucx/ucx_library.h).
    return nlohmann::json{
        {"version", l->ucp_get_version_string()},
        {"library", l->path},
        {"built_with", fmt::format("{}.{}", ucx::built_version.major, ucx::built_version.minor)},
        {"transports", ucx::available_transports()},
        {"cuda", ucx::to_json(ucx::probe_cuda_support())}};
  };
  e.peer_mismatch = ucx::version_mismatch;
  // Available wherever the library loads.
  e.unavailable = [] {
    std::string why;
    return ucx::load(&why) != nullptr ? std::string() : why;
  };
  e.lane_kind_of = ucx::kind_of_transport;
  e.env_prefixes = {"UCX_"};
  e.env_axis = transport_entry::env_axis_check{
      "UCX_TLS", [](std::string_view value, const nlohmann::json& library) {
        std::pair<std::vector<std::string>, std::vector<std::string>> out;
        const auto names = library.is_object() ? library.find("transports") : library.end();
        if (!library.is_object() || names == library.end() || !names->is_array()) return out;
        std::set<std::string> available;
        for (const auto& n : *names) {
          if (n.is_string()) available.insert(n.get<std::string>());
        }
        if (available.empty()) return out;
        out.first = ucx::missing_transports(value, available);
        out.second.assign(available.begin(), available.end());
        return out;
      }};
  // Doctor: UCX over tcp on each local interface, and with UCX's own choice for the path.
  e.doctor =
      doctor_probe{doctor_probe::role::library, "tag_bw", "tag_lat", "tcp", "UCX_NET_DEVICES"};
  return e;
}

ucx_transport::ucx_transport(const transport_params& params) : m_params(params) {
  if (std::string why; ucx::load(&why) == nullptr) throw transport_unsupported(why);
  const test_case& c = params.test;
  for (const auto& t : tests) {
    if (t.spec.name == c.test) m_use_am = t.active_messages;
  }
  m_data_tag = case_tag(data_tag, c.index);
  m_sync_tag = case_tag(sync_tag, c.index);
  const memory_type mine = params.side == side::client ? c.client_memory : c.server_memory;
  m_mem_type = to_ucs(mine);
  const std::vector<std::string> options =
      ucx::options_from(own_options(params.options, ucx::name));
  if (!options.empty()) ucx::check_options(options);  // UCX itself takes unknown names silently
  const auto& available = ucx::available_transports();
  if (const auto missing = ucx::missing_transports(c.tls, available); !missing.empty()) {
    const bool wants_cuda = std::any_of(missing.begin(), missing.end(), [](const std::string& t) {
      return t.rfind("cuda", 0) == 0 || t == "gdr_copy";
    });
    const std::string why = wants_cuda ? ucx::explain_missing_cuda(ucx::probe_cuda_support()) : "";
    throw transport_unsupported(fmt::format(
        "UCX on this host does not offer {} (available: {}){}{}", fmt::join(missing, ", "),
        fmt::join(available, ", "), why.empty() ? "" : ": ", why));
  }
  if (mine == memory_type::cuda && available.count("cuda_copy") == 0) {
    throw transport_unsupported(fmt::format(
        "this host's UCX cannot move cuda memory: it has no cuda_copy transport "
        "(available: {}): {}",
        fmt::join(available, ", "), ucx::explain_missing_cuda(ucx::probe_cuda_support())));
  }
  if (mine == memory_type::cuda) {
    if (const std::string why = ucx::cuda_tls_problem(c.tls); !why.empty())
      throw transport_unsupported(why);
  }
  if (m_use_am && mine != memory_type::host)
    throw transport_unsupported("active-message tests copy on the CPU: host memory only");
  const bool one_sided_test = std::any_of(tests.begin(), tests.end(), [&](const ucx_test& t) {
    return t.spec.name == c.test &&
           (t.spec.data_op == op_kind::put || t.spec.data_op == op_kind::get);
  });
  if (one_sided_test &&
      (c.client_memory == memory_type::cuda || c.server_memory == memory_type::cuda)) {
    const ucx::version v = ucx::lib().loaded;
    const bool v2 =
        ucx::uses_protocols_v2(v.major, v.minor, options, std::getenv("UCX_PROTO_ENABLE"));
    if (const std::string why = ucx::cuda_rma_problem(v.major, v.minor, v2); !why.empty())
      throw transport_unsupported(why);
  }

  // The interface is the client's; the server's devices stay as its environment sets them.
  // Tagged messages carry the patterns' sync messages, so every test needs TAG.
  std::uint64_t features = UCP_FEATURE_TAG;
  if (m_use_am) features |= UCP_FEATURE_AM;
  if (one_sided_test) features |= UCP_FEATURE_RMA;
  m_context = ucx::context_for(c.tls, params.side == side::client ? c.iface : std::string(),
                               options, features);

  ucx::taken_worker taken = ucx::take_worker(m_context);
  m_worker = std::move(taken.worker);
  m_worker_cases = taken.cases;
  build_params();

  if (m_use_am) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = am_id;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = &ucx_transport::on_am;
    hp.arg = this;
    ucx::check(ucx::lib().ucp_worker_set_am_recv_handler(m_worker.get(), &hp),
               "ucp_worker_set_am_recv_handler");
  }
}

ucx_transport::~ucx_transport() {
  // Remote keys before their endpoint, the endpoint before memory and worker (member order does
  // the rest); AM data UCX lent us goes back first.
  while (!m_am_arrived.empty()) {
    if (m_am_arrived.front().persistent)
      ucx::api::ucp_am_data_release(m_worker.get(), m_am_arrived.front().data);
    m_am_arrived.pop();
  }
  m_rkeys.clear();
  // Operations still outstanding (a peer that died mid-case) are cancelled, not left behind.
  const bool outstanding = m_outstanding != nullptr;
  if (outstanding) cancel_outstanding();
  m_ep.reset();
  m_memory.clear();
  // The worker serves the next case of this configuration only if this one left it clean; a
  // worker that saw an error or still holds a message goes with this case.
  if (m_worker && !outstanding && !m_failed && !m_peer_gone && m_am_posted.empty() &&
      !ucx::has_unmatched_message(m_worker.get())) {
    if (m_use_am) {
      ucp_am_handler_param_t hp{};
      hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
      hp.id = am_id;
      hp.cb = nullptr;  // no handler: nothing may call into this object any more
      if (ucx::lib().ucp_worker_set_am_recv_handler(m_worker.get(), &hp) != UCS_OK) return;
    }
    ucx::keep_worker(m_context, ucx::taken_worker{std::move(m_worker), m_worker_cases});
  }
}

void ucx_transport::cancel_outstanding() noexcept {
  for (request_info* info = m_outstanding; info != nullptr;) {
    request_info* next = info->next;  // a cancelled receive may complete (and go) at once
    ucx::api::ucp_request_cancel(m_worker.get(), info);
    info = next;
  }
  // Cancelled requests complete through their callbacks, which free them.
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (m_outstanding != nullptr && std::chrono::steady_clock::now() < end)
    ucx::api::ucp_worker_progress(m_worker.get());
  while (m_outstanding != nullptr) {
    request_info* info = m_outstanding;
    unlink(info);
    ucx::api::ucp_request_free(info);
  }
}

capabilities ucx_transport::caps() const {
  capabilities c{true, true, true, {memory_type::host}, true};  // tag and AM keep early arrivals
  if (ucx::available_transports().count("cuda_copy") > 0) c.memory.push_back(memory_type::cuda);
  return c;
}

std::vector<std::byte> ucx_transport::local_address() {
  return ucx::worker_address(m_worker.get()).bytes();
}

// UCX parses a worker address without checking it (an address of 0xff bytes aborts the process
// in ucp_address_unpack), so the harness checks what it can: the size, and the header byte that
// packs the address format's version and flags, which two workers of one UCX build configured
// alike share. Anything subtler is left to the server's session process, which a library abort
// ends without ending the server.
void ucx_transport::check_peer_address(std::span<const std::byte> peer_address) {
  transport::check_peer_address(peer_address);
  const std::vector<std::byte> mine = local_address();
  if (mine.empty() || peer_address.size() < 2 || peer_address[0] != mine[0]) {
    throw std::invalid_argument(fmt::format(
        "the peer's UCX worker address ({} bytes, header 0x{:02x}) is not one this UCX ({}) "
        "reads (header 0x{:02x})",
        peer_address.size(), static_cast<unsigned>(peer_address[0]),
        ucx::lib().ucp_get_version_string(), mine.empty() ? 0U : static_cast<unsigned>(mine[0])));
  }
}

void ucx_transport::connect(std::span<const std::byte> peer_address) {
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  // No peer-failure mode: with it UCX drops the transports that cannot report a dead peer (in
  // 1.13 all of shared memory) and the lanes would not be those an application gets by default.
  // A dead peer is bounded by the case timeout instead; the provenance records the mode.
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucp_ep_h handle = nullptr;
  const ucs_status_t st = ucx::lib().ucp_ep_create(m_worker.get(), &ep, &handle);
  if (st != UCS_OK) {
    std::string detail = fmt::format("ucp_ep_create: {}", ucx::lib().ucs_status_string(st));
    if (st == UCS_ERR_UNREACHABLE) {
      const std::string mine = ucx::network_resources(m_context.get());
      detail += fmt::format(
          "; no transport of this side reaches any address the peer's UCX advertised (this "
          "side's network resources: {}{})",
          mine.empty() ? std::string("none") : mine,
          m_params.test.iface.empty() ? "" : ", UCX_NET_DEVICES=" + m_params.test.iface);
    }
    throw step_error(st == UCS_ERR_UNREACHABLE ? error_kind::unreachable : error_kind::error,
                     where{"ucx endpoint create", m_params.peer_host,
                           m_params.side == side::client ? m_params.test.iface : ""},
                     detail);
  }
  m_ep.emplace(m_worker.get(), handle);
  handshake();
}

void ucx_transport::handshake() {
  // One tagged message each way completes the wireup on both sides before any measurement (the
  // peer runs the same at the same time), and proves the path exists.
  where place{"ucx wireup", m_params.peer_host,
              m_params.side == side::client ? m_params.test.iface : ""};
  // A failed wireup names the devices UCX tried: with no interface pinned, that is the answer to
  // "which NIC did UCX pick" (the multi-NIC "Network is unreachable" case).
  const auto failed = [&](std::string detail) {
    std::vector<std::string> devices;
    const std::string lanes = ucx::lanes_summary(m_ep->get(), devices);
    if (place.iface.empty()) place.iface = fmt::format("{}", fmt::join(devices, ","));
    if (!lanes.empty()) {
      detail += fmt::format("; UCX's lanes to the peer: {}", lanes);
      if (m_params.test.iface.empty())
        detail +=
            "; pin the interface that reaches with --iface or UCX_NET_DEVICES (pairperf doctor "
            "shows which)";
    }
    return step_error(error_kind::unreachable, place, detail);
  };
  const op recv{op_kind::recv,     op_channel::sync, m_hello_in.data(),
                m_hello_in.size(), handshake_cookie, 0};
  const op send{op_kind::send,      op_channel::sync, m_hello_out.data(),
                m_hello_out.size(), handshake_cookie, 0};
  const ucp_tag_t tag = case_tag(wireup_tag, m_params.test.index);
  const bool posted = track(ucx::api::ucp_tag_recv_nbx(m_worker.get(), recv.local, recv.length, tag,
                                                       full_mask, &m_sync_recv_params),
                            recv, "wireup receive") == 0;
  if (!posted || track(ucx::api::ucp_tag_send_nbx(m_ep->get(), send.local, send.length, tag,
                                                  &m_sync_send_params),
                       send, "wireup send") != 0) {
    if (m_peer_gone) throw failed(m_error);
    throw step_error(error_kind::error, place, m_error);
  }
  const auto deadline = std::chrono::steady_clock::now() + m_params.connect_timeout;
  std::size_t done = 0;
  while (done < 2) {
    ucx::api::ucp_worker_progress(m_worker.get());
    if (m_failed) throw failed(m_error);
    while (!m_done.empty()) {
      done += m_done.front().cookie == handshake_cookie ? 1 : 0;
      m_done.pop();
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw failed(fmt::format("no wireup with the peer within {:.1f} s (timeout)",
                               std::chrono::duration<double>(m_params.connect_timeout).count()));
    }
  }
}

mem_region ucx_transport::register_memory(std::byte* address, std::size_t length,
                                          memory_type type) {
  const auto& h = m_memory.emplace_back(m_context.get(), address, length, to_ucs(type));
  return mem_region{address, length, h.packed_key()};
}

void ucx_transport::set_remote_regions(const std::vector<remote_region>& regions) {
  m_rkeys.clear();
  m_remote = regions;
  for (const auto& r : regions) {
    ucp_rkey_h key = nullptr;
    ucx::check(ucx::lib().ucp_ep_rkey_unpack(m_ep->get(), r.packed_key.data(), &key),
               "ucp_ep_rkey_unpack");
    m_rkeys.emplace_back(key);
  }
}

provenance ucx_transport::describe() const {
  if (!m_ep) return {};
  const auto it = std::find_if(tests.begin(), tests.end(), [&](const ucx_test& t) {
    return t.spec.name == m_params.test.test;
  });
  ucx::endpoint_facts facts;
  facts.ep = m_ep->get();
  facts.client = m_params.side == side::client;
  facts.tls = m_params.test.tls;
  facts.iface = m_params.test.iface;
  facts.data_op = it != tests.end() ? it->spec.data_op : op_kind::send;
  facts.active_messages = m_use_am;
  facts.size = m_params.test.size_bytes;
  facts.gpu_memory = m_mem_type != UCS_MEMORY_TYPE_HOST;
  facts.request_info = m_request_info;
  facts.worker_cases = m_worker_cases;
  return ucx::describe_endpoint(facts);
}

}  // namespace pairperf
