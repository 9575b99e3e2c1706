#pragma once
// What carried the bytes of one UCX case, asked of the live endpoint and the inspected request,
// put together with the parsers of ucx_provenance.h.
#include <ucp/api/ucp.h>

#include <string>

#include "core/result.h"
#include "transports/transport.h"

namespace pairperf::ucx {

struct endpoint_facts {
  ucp_ep_h ep = nullptr;
  bool client = true;
  std::string tls;    // "" = UCX's default (as in the case: one spelling of the default)
  std::string iface;  // the client's UCX_NET_DEVICES, "" = UCX's default
  op_kind data_op = op_kind::send;
  bool active_messages = false;
  std::size_t size = 0;
  bool gpu_memory = false;       // this side's buffer is GPU memory (staging is judged only then)
  std::string request_info;      // ucp_request_query's text for one data operation, "" if none
  std::size_t worker_cases = 1;  // cases the worker has served, this one included (1: new)
};

// lanes: the endpoint's data lanes; protocol: from the request when UCX named it, else from the
// endpoint's threshold table for the size, else the lanes that serve RMA; details (client or
// server side): version, tls, every lane with its use, the raw request text and ep info.
provenance describe_endpoint(const endpoint_facts& facts);

// The endpoint's lanes as "tcp/eth0 (am_bw), tcp/eth1 (wireup)", for errors: when a wireup fails,
// which devices UCX tried is the first thing a user needs. The devices go to `devices`.
std::string lanes_summary(ucp_ep_h ep, std::vector<std::string>& devices);

// The context's network resources ("tcp/eth0, tcp/eth1"): what UCX could try when an endpoint
// cannot even be created. Shared-memory and self resources are left out.
std::string network_resources(ucp_context_h context);

}  // namespace pairperf::ucx
