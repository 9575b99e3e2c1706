#include "transports/ucx/ucx_describe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

#include "transports/ucx/ucx_handles.h"
#include "transports/ucx/ucx_proto_table.h"
#include "transports/ucx/ucx_provenance.h"

namespace pairperf::ucx {
namespace {

bool named(const std::string& protocol) {
  return !protocol.empty() && protocol.find("???") == std::string::npos &&
         protocol.find("no debug info") == std::string::npos && protocol.rfind("flags:", 0) != 0;
}

std::string protocol_text(const endpoint_facts& f, const request_info& req,
                          const std::string& ep_text, const std::vector<lane_info>& lanes) {
  // A protocol the request names is the best evidence (UCX 1.13 names rendezvous by its progress
  // function; newer UCX names every protocol).
  if (named(req.protocol)) return req.protocol;
  if (f.data_op == op_kind::send) {
    const std::string table = f.active_messages ? "am_send" : "tag_send";
    const std::string proto = protocol_for_size(ep_text, table, f.size);
    if (!proto.empty())
      return fmt::format("{} {} (from the endpoint's {} thresholds)",
                         f.active_messages ? "am" : "tag", proto, table);
  }
  // RMA in UCX 1.13 carries no request information: name the lanes that serve it.
  std::vector<std::string> rma;
  for (const auto& l : lanes) {
    if (std::any_of(l.usage.begin(), l.usage.end(),
                    [](const std::string& u) { return u.rfind("rma", 0) == 0; })) {
      rma.push_back(l.transport + "/" + l.device);
    }
  }
  if ((f.data_op == op_kind::put || f.data_op == op_kind::get) && !rma.empty()) {
    return fmt::format("{} over rma lanes {}", f.data_op == op_kind::put ? "put" : "get",
                       fmt::join(rma, ", "));
  }
  return f.request_info.empty() ? std::string("(this side posted no data operation to inspect)")
                                : req.raw;
}

std::vector<lane_info> endpoint_lanes(ucp_ep_h ep, const std::string& ep_text) {
  std::vector<lane_info> lanes = parse_ep_info(ep_text);
#if UCP_API_VERSION >= UCP_VERSION(1, 14)
  // Newer UCX names the endpoint's transports directly, should the printed form change.
  if (lanes.empty()) {
    std::array<ucp_transport_entry_t, 32> entries{};
    ucp_ep_attr_t attr{};
    attr.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
    attr.transports.entries = entries.data();
    attr.transports.num_entries = entries.size();
    attr.transports.entry_size = sizeof(ucp_transport_entry_t);
    if (lib().ucp_ep_query(ep, &attr) == UCS_OK) {
      for (unsigned i = 0; i < attr.transports.num_entries; ++i) {
        lanes.push_back(
            {static_cast<int>(i), entries[i].transport_name, entries[i].device_name, {"unknown"}});
      }
    }
  }
#else
  (void)ep;
#endif
  return lanes;
}

// UCX 1.16+ (v2 protocols): the protocol UCX selected for this operation and size, as the row of
// the endpoint's protocol table that the request names (send operations), else as the request's
// own text (remote-key operations, whose tables live on the worker and print only with
// UCX_PROTO_INFO). Its lanes are the case's lanes: the ones UCX chose for this operation and
// size, not every lane of the endpoint.
bool apply_protocol_selection(const endpoint_facts& f, const std::string& ep_text, provenance& p,
                              nlohmann::json& details) {
  if (f.request_info.empty()) return false;
  const auto tables = parse_protocol_tables(ep_text);
  auto choice = choice_for_request(tables, f.request_info);
  if (!choice) choice = request_selection(f.request_info);
  if (!choice) return false;
  const protocol_row& row = choice->row;
  p.lanes.clear();
  nlohmann::json lanes = nlohmann::json::array();
  for (const auto& l : row.lanes) {
    p.lanes.push_back(lane{l.transport, l.device, kind_of_transport(l.transport)});
    lanes.push_back(l.transport + "/" + l.device);
  }
  p.protocol = row.description;
  p.bulk = bulk_lanes(row.description, row.config, {}, row.lanes);
  details["lanes_from"] = choice->table ? "ucx protocol table" : "ucx request";
  nlohmann::json selection{{"length", choice->length},
                           {"description", row.description},
                           {"estimated", row.estimated},
                           {"config", row.config},
                           {"lanes", lanes}};
  if (choice->table) {
    selection["endpoint"] = choice->table->endpoint;
    selection["operation"] = choice->table->operation;
    selection["range"] = row.range;
    selection["table"] = choice->table->lines;
  }
  details["protocol_selection"] = std::move(selection);
  return true;
}

}  // namespace

provenance describe_endpoint(const endpoint_facts& f) {
  provenance p;
  const std::string ep_text = capture([&](FILE* out) { lib().ucp_ep_print_info(f.ep, out); });
  const std::vector<lane_info> lanes = endpoint_lanes(f.ep, ep_text);
  for (const auto& l : lanes) {
    if (l.carries_data())
      p.lanes.push_back(lane{l.transport, l.device, kind_of_transport(l.transport)});
  }
  const request_info req = parse_request_info(f.request_info);
  p.protocol = protocol_text(f, req, ep_text, lanes);
  p.bulk = bulk_lanes(p.protocol, req.raw, lanes, req.lanes);
  if (f.gpu_memory) p.staged = staging_in(p.protocol + " " + req.raw);

  nlohmann::json lanes_json = nlohmann::json::array();
  for (const auto& l : lanes)
    lanes_json.push_back(
        {{"index", l.index}, {"transport", l.transport}, {"device", l.device}, {"usage", l.usage}});
  nlohmann::json request_lanes = nlohmann::json::array();
  for (const auto& l : req.lanes)
    request_lanes.push_back({{"transport", l.transport}, {"device", l.device}});
  nlohmann::json ep_lines = nlohmann::json::array();
  for (std::size_t start = 0; start < ep_text.size();) {
    const std::size_t end = std::min(ep_text.find('\n', start), ep_text.size());
    if (end > start) ep_lines.push_back(ep_text.substr(start, end - start));
    start = end + 1;
  }
  nlohmann::json details{{"ucx_version", lib().ucp_get_version_string()},
                         {"ucx_library", lib().path},
                         {"tls", f.tls},
                         {"lanes", lanes_json},
                         {"request_info", req.raw},
                         {"request_lanes", request_lanes},
                         {"error_handling", "none"},
                         {"worker_cases", f.worker_cases},
                         {"ep_info", ep_lines}};
  if (f.client) details["net_devices"] = f.iface;
  details["lanes_from"] = "endpoint configuration";
  if (apply_protocol_selection(f, ep_text, p, details) && f.gpu_memory)
    p.staged = staging_in(p.protocol + " " + req.raw);
  (f.client ? p.client : p.server) = std::move(details);
  return p;
}

std::string lanes_summary(ucp_ep_h ep, std::vector<std::string>& devices) {
  const std::string ep_text = capture([&](FILE* out) { lib().ucp_ep_print_info(ep, out); });
  std::vector<std::string> parts;
  for (const auto& l : endpoint_lanes(ep, ep_text)) {
    parts.push_back(fmt::format("{}/{} ({})", l.transport, l.device, fmt::join(l.usage, " ")));
    if (std::find(devices.begin(), devices.end(), l.device) == devices.end())
      devices.push_back(l.device);
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string network_resources(ucp_context_h context) {
  const std::string text = capture([&](FILE* out) { lib().ucp_context_print_info(context, out); });
  std::vector<std::string> out;
  for (const auto& r : context_resources(text)) {
    if (r.device != "memory" && r.device.rfind("memory", 0) != 0)
      out.push_back(r.transport + "/" + r.device);
  }
  return fmt::format("{}", fmt::join(out, ", "));
}

}  // namespace pairperf::ucx
