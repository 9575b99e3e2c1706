#include "bench/micro/micro_transport.h"

#include "patterns/run.h"

namespace pairperf {
namespace {

// A transport whose peer answers at once: a send completes in its post, a receive at the next
// poll. A ping-pong over it is the loop's own work per round trip (two posts, the polls, one
// clock read and one sample), with nothing of a library or a wire.
class instant_transport final : public transport {
 public:
  [[nodiscard]] capabilities caps() const override {
    return {true, false, false, {memory_type::host}, true};
  }
  std::vector<std::byte> local_address() override { return {}; }
  void connect(std::span<const std::byte>) override {}
  mem_region register_memory(std::byte* a, std::size_t n, memory_type) override {
    return {a, n, {}};
  }
  [[nodiscard]] int post(const op& o) noexcept override {
    (o.kind == op_kind::send ? m_sent : m_received) = completion{o.cookie, o.kind};
    (o.kind == op_kind::send ? m_has_sent : m_has_received) = true;
    return 0;
  }
  [[nodiscard]] int poll(std::span<completion> out) noexcept override {
    std::size_t n = 0;
    if (m_has_sent) out[n++] = m_sent;
    if (m_has_received) out[n++] = m_received;
    m_has_sent = m_has_received = false;
    return static_cast<int>(n);
  }
  pattern_outcome run_phase(const pattern_run& run, const pattern_buffers& buffers,
                            sample_recorder& samples, message_check* checker,
                            const where& place) override {
    return run_pattern(*this, run, buffers, samples, checker, place);
  }
  [[nodiscard]] std::string last_error() const override { return {}; }
  [[nodiscard]] bool peer_gone() const noexcept override { return false; }
  [[nodiscard]] provenance describe() const override { return {}; }

 private:
  completion m_sent, m_received;
  bool m_has_sent = false, m_has_received = false;
};

}  // namespace

std::unique_ptr<transport> make_instant_transport() {
  return std::make_unique<instant_transport>();
}

}  // namespace pairperf
