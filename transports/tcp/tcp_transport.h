#pragma once
// TCP sockets as a transport: `streams` connections per case, TCP_NODELAY, optional socket buffer
// sizes, the client bound to a chosen interface. Messages of data-channel operations go
// round-robin over the connections; the sync channel uses connection 0.
#include <memory>
#include <string>
#include <vector>

#include "core/socket.h"
#include "transports/registry.h"
#include "transports/tcp/tcp_stream.h"
#include "transports/transport.h"

namespace pairperf {

class tcp_transport final : public transport {
 public:
  explicit tcp_transport(const transport_params& params);

  // The registry row: name, tests, factory.
  static transport_entry entry();

  [[nodiscard]] capabilities caps() const override;
  std::vector<std::byte> local_address() override;
  void connect(std::span<const std::byte> peer_address) override;
  mem_region register_memory(std::byte* address, std::size_t length, memory_type type) override;
  [[nodiscard]] int post(const op& operation) noexcept override;
  [[nodiscard]] int poll(std::span<completion> out) noexcept override;
  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override;
  [[nodiscard]] std::string last_error() const override { return m_error; }
  [[nodiscard]] bool peer_gone() const noexcept override { return m_peer_gone; }
  [[nodiscard]] provenance describe() const override;

 private:
  void connect_as_client(const std::string& peer_json);
  void accept_as_server();
  void wait_blocking() noexcept;
  [[nodiscard]] where place(const std::string& step, const std::string& peer) const;

  transport_params m_params;
  unique_fd m_listener;  // server only
  std::vector<tcp_stream> m_streams;
  std::size_t m_next_send = 0;  // round-robin positions of data-channel ops
  std::size_t m_next_recv = 0;
  std::string m_bound_iface;  // client: the interface it bound to ("" = routed)
  std::string m_bind_method;  // "device", "address" or "route"
  std::string m_error;
  bool m_peer_gone = false;
};

}  // namespace pairperf
