#include "transports/ofi/ofi_transport.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/errors.h"
#include "core/hex.h"
#include "core/interfaces.h"
#include "transports/ofi/ofi_address.h"
#include "transports/ofi/ofi_options.h"
#include "transports/ofi/ofi_wire.h"

#if PAIRPERF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace pairperf {

using namespace ofi_wire;

namespace {

constexpr std::array<test_spec, 7> tests{{
    {"fi_tag_lat", pattern_kind::pingpong, op_kind::send,
     "ping-pong latency of tagged messages (one-way = RTT / 2)"},
    {"fi_tag_bw", pattern_kind::stream_uni, op_kind::send,
     "streaming bandwidth of tagged messages (receiver-measured)"},
    {"fi_tag_bibw", pattern_kind::stream_bi, op_kind::send,
     "bidirectional bandwidth of tagged messages"},
    {"fi_write_lat", pattern_kind::pingpong, op_kind::put,
     "RMA write made visible to the target, then a tagged notification (one-way = RTT / 2)"},
    {"fi_write_bw", pattern_kind::stream_uni, op_kind::put,
     "streaming RMA writes (sender-measured: the target sees no arrivals)"},
    {"fi_read_lat", pattern_kind::pingpong, op_kind::get,
     "one RMA read at a time (one-way = round trip / 2)"},
    {"fi_read_bw", pattern_kind::stream_uni, op_kind::get, "streaming RMA reads (reader-measured)"},
}};

bool is_rma(const std::string& test) {
  return std::any_of(tests.begin(), tests.end(), [&](const test_spec& t) {
    return t.name == test && (t.data_op == op_kind::put || t.data_op == op_kind::get);
  });
}

// The hints every case asks with; `rma` and `hmem` add what its test and memory need.
ofi::info_ptr hints_for(const std::string& provider, bool rma, bool hmem, bool ordered) {
  ofi::info_ptr h = ofi::alloc_info();
  if (!h) throw std::bad_alloc();
  h->ep_attr->type = FI_EP_RDM;
  h->caps = FI_TAGGED;
  if (rma) h->caps |= FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  if (hmem) h->caps |= FI_HMEM;
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                            FI_MR_ENDPOINT | (hmem ? FI_MR_HMEM : 0);
  h->domain_attr->threading = FI_THREAD_DOMAIN;
  if (ordered) h->tx_attr->msg_order = h->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) h->fabric_attr->prov_name = strdup(provider.c_str());
  return h;
}

// A name for a shared-memory provider's region that no other process has had. libfabric's shm
// names its file in /dev/shm after the process by default ("<pid>:<uid>:<endpoint>", libfabric
// 1.17 prov/shm/src/smr_init.c smr_resolve_addr and smr_ep.c smr_endpoint_name); a process killed
// with SIGKILL leaves its file, and once the pid comes round again (pid_max is 32768 here) a
// new process of that pid finds the file, sees its own pid in it alive, and fi_enable fails with
// EBUSY ("shm file in use", smr_util.c smr_retry_map). A node given with FI_SOURCE names the
// region instead: the pid, a clock reading and a per-process count make it unique.
std::string shared_memory_region_name() {
  static std::atomic<unsigned> count{0};
  return fmt::format("pairperf-{}-{:x}-{}", ::getpid(),
                     std::chrono::steady_clock::now().time_since_epoch().count(), count++);
}

bool ip_format(std::uint32_t f) {
  return f == FI_SOCKADDR_IN || f == FI_SOCKADDR_IN6 || f == FI_SOCKADDR;
}

}  // namespace

transport_entry ofi_transport::entry() {
  transport_entry e;
  e.name = ofi::name;
  e.description =
      "libfabric (OFI) RDM endpoints: tagged messages and RMA over the provider --ofi-provider "
      "selects (tcp;ofi_rxm, shm, verbs;ofi_rxm, efa...)";
  e.tests.assign(tests.begin(), tests.end());
  e.create = [](const transport_params& p) { return std::make_unique<ofi_transport>(p); };
  e.add_run_options = ofi::add_run_options;
  e.describe_library = ofi::describe_library;
  e.unavailable = ofi::unavailable;
  e.lane_kind_of = ofi::kind_of_provider;
  e.env_prefixes = {"FI_"};
  e.env_axis = transport_entry::env_axis_check{"FI_PROVIDER", ofi::judge_provider_variable};
  return e;
}

ofi_transport::ofi_transport(const transport_params& params)
    : m_params(params),
      m_provider(params.test.tls),
      m_options(ofi::options_from(own_options(params.options, ofi::name))) {
  ofi::check_provider(m_provider);
  if (std::string why; ofi::load(&why) == nullptr) throw transport_unsupported(why);
  const test_case& c = m_params.test;
  m_rma_test = is_rma(c.test);
  const memory_type mine = m_params.side == side::client ? c.client_memory : c.server_memory;
  m_gpu = mine == memory_type::cuda;
#if !PAIRPERF_HAVE_CUDA
  if (m_gpu) throw transport_unsupported("this pairperf was built without CUDA");
#endif
  choose_info();
  open_objects();
  // The handshake's buffers, registered where the provider needs local registration.
  (void)register_memory(m_hello_in.data(), m_hello_in.size(), memory_type::host);
  (void)register_memory(m_hello_out.data(), m_hello_out.size(), memory_type::host);
  (void)register_memory(m_flush_out.data(), m_flush_out.size(), memory_type::host);
}

ofi_transport::~ofi_transport() {
  if (in_provider() > 0 && m_info != nullptr &&
      ofi::close_may_crash_in_flight(m_info->fabric_attr->prov_name, ofi::lib().version())) {
    // Its close would crash this process (ofi_options.h). Nothing progresses the endpoint again
    // (manual progress: rxm runs no thread of its own), so its objects stay as they are, and go
    // with the process: its queued sends are never read from the buffers freed after this.
    (void)m_ep.release();
    for (auto& mr : m_mrs) (void)mr.release();
    (void)m_av.release();
    (void)m_cq.release();
    (void)m_domain.release();
    (void)m_fabric.release();
    return;
  }
  // The endpoint first (it cancels what is still posted), then what it was bound to.
  m_ep.reset();
  m_mrs.clear();
  m_av.reset();
  m_cq.reset();
  m_domain.reset();
  m_fabric.reset();
}

where ofi_transport::place(const std::string& step) const {
  return where{step, m_params.peer_host,
               m_params.side == side::client ? m_params.test.iface : std::string()};
}

// The address to open the endpoint on: --iface's, else the one that routes toward the peer (""
// = the provider's choice); m_source_why says which.
std::string ofi_transport::choose_source(std::uint32_t format) {
  std::string source;
  if (m_params.side == side::client && !m_params.test.iface.empty() && !ip_format(format)) {
    // Within one host (shm) an interface means nothing: the case runs, and says so.
    m_source_why = fmt::format("{} addresses; --iface {} does not apply",
                               ofi::text_of(&format, FI_TYPE_ADDR_FORMAT), m_params.test.iface);
  } else if (m_params.side == side::client && !m_params.test.iface.empty()) {
    const auto info = find_interface(m_params.test.iface);
    const bool want6 = format == FI_SOCKADDR_IN6;
    for (const auto& a : info ? info->addresses : std::vector<iface_address>{}) {
      if ((a.family == AF_INET6) == want6 && !is_link_local(a.address)) {
        source = a.address;
        break;
      }
    }
    if (source.empty())
      throw step_error(error_kind::error, place("ofi source address"),
                       fmt::format("interface {} has no {} address for libfabric",
                                   m_params.test.iface, want6 ? "IPv6" : "IPv4"));
    m_source_why = "--iface " + m_params.test.iface;
  } else if (ip_format(format)) {
    const bool wildcard = m_params.listen_host.empty() || m_params.listen_host == "0.0.0.0" ||
                          m_params.listen_host == "::";
    int no_route = 0;
    source = wildcard ? ofi::source_toward(m_params.peer_host, no_route) : m_params.listen_host;
    // With no route (a link that is down) the provider's first domain would take the case and
    // fail its first send from there (tcp;ofi_rxm of libfabric 1.17 on lo: fi_tsend -EINVAL).
    if (no_route == ENETUNREACH || no_route == EHOSTUNREACH) {
      throw step_error(error_kind::unreachable, place("ofi source address"),
                       fmt::format("no route toward the peer: {} ({})", std::strerror(no_route),
                                   errno_name(no_route)),
                       no_route);
    }
    m_source_why = wildcard ? "the route toward the peer" : "the server's listen address";
  } else if (m_source_why.empty()) {
    m_source_why =
        fmt::format("the provider ({} addresses)", ofi::text_of(&format, FI_TYPE_ADDR_FORMAT));
  }
  return source;
}

// Asks fi_getinfo for what the case needs. What is missing is named: no such provider, no RDM
// endpoint, no tagged messages, no RMA, no FI_HMEM, no ordering.
void ofi_transport::choose_info() {
  const std::string shown = m_provider.empty() ? "libfabric's choice" : "'" + m_provider + "'";
  int rc = 0;
  auto hints = hints_for(m_provider, m_rma_test, m_gpu, true);
  ofi::info_ptr list = ofi::get_info(hints.get(), nullptr, 0, rc);
  if (!list) {
    if (rc != -FI_ENODATA)
      throw step_error(error_kind::error, place("ofi getinfo"), ofi::failure("fi_getinfo", rc));
    const auto offers = ofi::rdm_offers();
    std::vector<std::string> names = ofi::provider_names(offers, false);
    const auto try_with = [&](bool rma, bool hmem, bool ordered) {
      int r = 0;
      auto h = hints_for(m_provider, rma, hmem, ordered);
      return ofi::get_info(h.get(), nullptr, 0, r) != nullptr;
    };
    if (!try_with(false, false, false)) {
      throw transport_unsupported(fmt::format(
          "libfabric {} on this host offers no RDM endpoint with tagged messages (providers "
          "with RDM endpoints here: {})",
          shown, names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
    }
    throw transport_unsupported(fmt::format("libfabric provider {} lacks {} for RDM endpoints",
                                            shown, ofi::what_lacks(try_with, m_rma_test, m_gpu)));
  }
  const std::uint32_t format = list->addr_format;
  std::string source = choose_source(format);
  if (source.empty() &&
      ofi::kind_of_provider(list->fabric_attr->prov_name) == lane_kind::shared_memory)
    source = shared_memory_region_name();
  if (!source.empty()) {
    ofi::info_ptr pinned = ofi::get_info(hints.get(), source.c_str(), FI_SOURCE, rc);
    if (pinned) {
      list = std::move(pinned);
    } else if (m_params.side == side::client && !m_params.test.iface.empty()) {
      throw step_error(error_kind::unreachable, place("ofi getinfo"),
                       fmt::format("libfabric provider {} offers no domain on {} ({}): {}", shown,
                                   m_params.test.iface, source, ofi::failure("fi_getinfo", rc)));
    } else {
      m_source_why = fmt::format("libfabric's first domain (none on {}, {})", source, m_source_why);
    }
  }
  m_infos = std::move(list);
  m_info = m_infos.get();
  m_send_after_write =
      (m_info->tx_attr->msg_order & m_info->rx_attr->msg_order & FI_ORDER_SAW) != 0;
  std::tie(m_inject, m_inject_why) = ofi::use_inject(m_options, m_info->fabric_attr->prov_name);
}

void ofi_transport::open_objects() {
  const auto check = [&](int rc, const char* call) {
    if (rc != 0)
      throw step_error(error_kind::error, place(fmt::format("ofi setup ({})", call)),
                       ofi::failure(call, rc));
  };
  fid_fabric* fabric = nullptr;
  check(ofi::lib().fabric(m_info->fabric_attr, &fabric, nullptr), "fi_fabric");
  m_fabric.reset(fabric);
  fid_domain* domain = nullptr;
  check(fi_domain(m_fabric.get(), m_info, &domain, nullptr), "fi_domain");
  m_domain.reset(domain);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = 0;  // the provider's default
  fid_cq* cq = nullptr;
  check(fi_cq_open(m_domain.get(), &cq_attr, &cq, nullptr), "fi_cq_open");
  m_cq.reset(cq);
  fi_av_attr av_attr{};
  av_attr.type =
      m_info->domain_attr->av_type != FI_AV_UNSPEC ? m_info->domain_attr->av_type : FI_AV_TABLE;
  av_attr.count = 2;
  fid_av* av = nullptr;
  check(fi_av_open(m_domain.get(), &av_attr, &av, nullptr), "fi_av_open");
  m_av.reset(av);
  fid_ep* ep = nullptr;
  check(fi_endpoint(m_domain.get(), m_info, &ep, nullptr), "fi_endpoint");
  m_ep.reset(ep);
  check(fi_ep_bind(m_ep.get(), &m_av->fid, 0), "fi_ep_bind (address vector)");
  check(fi_ep_bind(m_ep.get(), &m_cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind (completion queue)");
  if (const int rc = fi_enable(m_ep.get()); rc != 0) {
    std::string detail = ofi::failure("fi_enable", rc);
    const std::string provider = m_info->fabric_attr->prov_name;
    if (rc == -FI_EINVAL && provider.find("ofi_rxm") != std::string::npos &&
        provider.rfind("tcp", 0) != 0 && std::getenv("FI_UNIVERSE_SIZE") == nullptr) {
      // Seen on Soft-RoCE: rxm asks the core provider for a completion queue of (tx + rx
      // depth) x FI_UNIVERSE_SIZE entries, beyond rxe's limit of 32767.
      detail +=
          "; ofi_rxm sizes the core provider's completion queue for FI_UNIVERSE_SIZE peers (256 "
          "when unset), more than a device with a small completion-queue limit takes (rxe: "
          "32767 entries): set FI_UNIVERSE_SIZE=16 on both sides (a pair has two peers)";
    }
    throw step_error(error_kind::error, place("ofi setup (fi_enable)"), detail);
  }
  std::size_t len = 64;
  m_name.assign(len, std::byte{0});
  int rc = fi_getname(&m_ep->fid, m_name.data(), &len);
  if (rc == -FI_ETOOSMALL) {
    m_name.assign(len, std::byte{0});
    rc = fi_getname(&m_ep->fid, m_name.data(), &len);
  }
  check(rc, "fi_getname");
  m_name.resize(len);
}

capabilities ofi_transport::caps() const {
  capabilities c{true,
                 (m_info->caps & FI_WRITE) != 0,
                 (m_info->caps & FI_READ) != 0,
                 {memory_type::host},
                 true};  // tagged receives keep early arrivals
  if ((m_info->caps & FI_HMEM) != 0) c.memory.push_back(memory_type::cuda);
  return c;
}

std::vector<std::byte> ofi_transport::local_address() {
  return ofi::encode_address(
      ofi::endpoint_name{m_info->fabric_attr->prov_name, m_info->addr_format, m_name});
}

void ofi_transport::check_peer_address(std::span<const std::byte> peer_address) {
  transport::check_peer_address(peer_address);
  const ofi::endpoint_name peer = ofi::decode_address(peer_address);  // throws invalid_argument
  ofi::check_peer_name(
      peer, ofi::endpoint_name{m_info->fabric_attr->prov_name, m_info->addr_format, m_name});
}

void ofi_transport::connect(std::span<const std::byte> peer_address) {
  const ofi::endpoint_name peer = ofi::decode_address(peer_address);
  const int inserted = fi_av_insert(m_av.get(), peer.name.data(), 1, &m_peer, 0, nullptr);
  if (inserted != 1) {
    throw step_error(error_kind::error, place("ofi address vector insert"),
                     inserted < 0 ? ofi::failure("fi_av_insert", inserted)
                                  : std::string("fi_av_insert took no address"));
  }
  m_peer_text = ofi::readable(m_av.get(), peer.name);
  handshake();
}

void ofi_transport::handshake() {
  where at = place("ofi wireup");
  at.peer = fmt::format("{} ({})", m_params.peer_host, m_peer_text);
  if (at.iface.empty() && m_info->domain_attr->name != nullptr)
    at.iface = m_info->domain_attr->name;
  const auto failed = [&](const std::string& detail) {
    return step_error(
        m_peer_gone ? error_kind::unreachable : error_kind::error, at,
        fmt::format("libfabric provider {} (domain {}): {}", m_info->fabric_attr->prov_name,
                    m_info->domain_attr->name, detail));
  };
  request* r = acquire(op{op_kind::recv, op_channel::sync, m_hello_in.data(), m_hello_in.size(),
                          handshake_cookie, 0});
  ssize_t rc = fi_trecv(m_ep.get(), m_hello_in.data(), m_hello_in.size(),
                        desc_of(m_hello_in.data()), FI_ADDR_UNSPEC, wireup_tag, 0, &r->context);
  if (rc != 0) throw failed(ofi::failure("fi_trecv", static_cast<int>(rc)));
  const auto deadline = std::chrono::steady_clock::now() + m_params.connect_timeout;
  request* s = acquire(op{op_kind::send, op_channel::sync, m_hello_out.data(), m_hello_out.size(),
                          handshake_cookie, 0});
  while ((rc = fi_tsend(m_ep.get(), m_hello_out.data(), m_hello_out.size(),
                        desc_of(m_hello_out.data()), m_peer, wireup_tag, &s->context)) ==
         -FI_EAGAIN) {
    if (progress() < 0) throw failed(m_error);
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  if (rc != 0) throw failed(ofi::failure("fi_tsend", static_cast<int>(rc)));
  ++m_sends_outstanding;
  std::size_t done = 0;
  while (done < 2) {
    if (progress() < 0) throw failed(m_error);
    while (!m_done.empty()) {
      done += m_done.front().cookie == handshake_cookie ? 1 : 0;
      m_done.pop_front();
    }
    if (done < 2 && std::chrono::steady_clock::now() >= deadline) {
      m_peer_gone = true;
      throw failed(
          fmt::format("no wireup with the peer within {:.1f} s (timeout; this side's address {})",
                      std::chrono::duration<double>(m_params.connect_timeout).count(),
                      ofi::readable(m_av.get(), m_name)));
    }
  }
}

mem_region ofi_transport::register_memory(std::byte* address, std::size_t length,
                                          memory_type type) {
  std::uint64_t access = FI_SEND | FI_RECV;
  if (m_rma_test) access |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
  const bool prov_key = (m_info->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
  iovec iov{address, length};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  attr.requested_key = prov_key ? 0 : m_next_key++;
  attr.iface = FI_HMEM_SYSTEM;
#if PAIRPERF_HAVE_CUDA
  if (type == memory_type::cuda) {
    cudaPointerAttributes pa{};
    if (cudaPointerGetAttributes(&pa, address) != cudaSuccess)
      throw step_error(error_kind::error, place("ofi memory registration"),
                       "cudaPointerGetAttributes failed on a cuda buffer");
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = pa.device;
  }
#else
  (void)type;
#endif
  fid_mr* mr = nullptr;
  const int rc = fi_mr_regattr(m_domain.get(), &attr, 0, &mr);
  if (rc != 0) {
    throw step_error(error_kind::error, place("ofi memory registration"),
                     fmt::format("{} ({} bytes of {} memory)", ofi::failure("fi_mr_regattr", rc),
                                 length, to_string(type)));
  }
  m_mrs.emplace_back(mr);
  if ((m_info->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0) {
    int b = fi_mr_bind(mr, &m_ep->fid, 0);
    if (b == 0) b = fi_mr_enable(mr);
    if (b != 0)
      throw step_error(error_kind::error, place("ofi memory registration"),
                       ofi::failure("fi_mr_bind/fi_mr_enable", b));
  }
  const auto begin = reinterpret_cast<std::uintptr_t>(address);
  m_regions.push_back(region{begin, begin + length, fi_mr_desc(mr)});
  const std::uint64_t key = fi_mr_key(mr);
  std::vector<std::byte> packed(sizeof(key));
  std::memcpy(packed.data(), &key, sizeof(key));
  return mem_region{address, length, std::move(packed)};
}

void ofi_transport::set_remote_regions(const std::vector<remote_region>& regions) {
  m_remote_keys.clear();
  for (const auto& r : regions) {
    if (r.packed_key.size() != sizeof(std::uint64_t)) {
      throw step_error(error_kind::protocol, place("ofi remote regions"),
                       fmt::format("a peer's memory key has {} bytes, not 8", r.packed_key.size()));
    }
    std::uint64_t key = 0;
    std::memcpy(&key, r.packed_key.data(), sizeof(key));
    m_remote_keys.push_back(key);
  }
  m_remote = regions;
}

provenance ofi_transport::describe() const {
  provenance p;
  const std::string provider = m_info->fabric_attr->prov_name;
  const std::string domain = m_info->domain_attr->name != nullptr ? m_info->domain_attr->name : "";
  p.lanes.push_back(lane{provider, domain, ofi::kind_of_provider(provider)});
  const std::uint32_t v = ofi::lib().version();
  const std::string progress = ofi::text_of(&m_info->domain_attr->data_progress, FI_TYPE_PROGRESS);
  p.protocol = fmt::format("libfabric {}.{} {} RDM {} on {}, {}", FI_MAJOR(v), FI_MINOR(v),
                           provider, m_rma_test ? "RMA" : "tagged", domain, progress);
  nlohmann::json details{
      {"libfabric_version", fmt::format("{}.{}", FI_MAJOR(v), FI_MINOR(v))},
      {"provider", provider},
      {"provider_asked", m_provider},
      {"fabric", m_info->fabric_attr->name != nullptr ? m_info->fabric_attr->name : ""},
      {"domain", domain},
      {"endpoint_type", ofi::text_of(&m_info->ep_attr->type, FI_TYPE_EP_TYPE)},
      {"protocol", ofi::text_of(&m_info->ep_attr->protocol, FI_TYPE_PROTOCOL)},
      {"protocol_version", m_info->ep_attr->protocol_version},
      {"mr_mode", ofi::text_of(&m_info->domain_attr->mr_mode, FI_TYPE_MR_MODE)},
      {"inject_bytes", m_info->tx_attr->inject_size},
      {"inject",
       m_inject == ofi::inject_mode::off
           ? "off: " + m_inject_why
           : fmt::format("{} up to {} bytes{}",
                         m_inject == ofi::inject_mode::tinject ? "fi_tinject"
                                                               : "FI_INJECT with a completion",
                         m_info->tx_attr->inject_size,
                         m_inject_why.empty() ? "" : " (" + m_inject_why + ")")},
      {"max_message_bytes", m_info->ep_attr->max_msg_size},
      {"progress", progress},
      {"message_order", ofi::text_of(&m_info->tx_attr->msg_order, FI_TYPE_MSG_ORDER)},
      {"send_after_write",
       m_send_after_write ? "ordered (FI_ORDER_SAW)" : "sync waits for the writes' delivery"},
      {"source", ofi::readable(m_av.get(), m_name)},
      {"source_chosen_by", m_source_why},
      {"destination", m_peer_text},
      {"iface", m_params.side == side::client ? m_params.test.iface : std::string()},
      {"hmem", (m_info->caps & FI_HMEM) != 0}};
  (m_params.side == side::client ? p.client : p.server) = std::move(details);
  return p;
}

}  // namespace pairperf
