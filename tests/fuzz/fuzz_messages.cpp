// libFuzzer harness: every control message's body as the server and the client read it (hello,
// case with its config, case and regions, run with its budget, drive with its cases, results with
// the path evidence, and driven with case results). Any exception is a refusal the peer gets told
// about; a crash, a sanitizer report or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/hex.h"
#include "core/result.h"
#include "harness/case_session.h"
#include "harness/server_limits.h"
#include "harness/token.h"

namespace {

template <class T>
void try_get(const nlohmann::json& j, const char* key) {
  try {
    if (j.contains(key)) (void)j.at(key).get<T>();
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): refused, as the server does
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 0;
  (void)pairperf::token_matches("s3cret", j.value("token", nlohmann::json()));
  try_get<pairperf::run_config>(j, "config");
  try_get<pairperf::test_case>(j, "case");
  try_get<std::vector<pairperf::test_case>>(j, "cases");
  try_get<std::vector<pairperf::case_result>>(j, "results");
  try_get<pairperf::case_result>(j, "result");
  try {
    if (j.contains("regions")) (void)pairperf::parse_peer_regions(j.at("regions"));
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
  }
  try {
    if (j.contains("address")) (void)pairperf::from_hex(j.at("address").get<std::string>());
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
  }
  // The server's evidence of the payload's path, as the client merges it (never throws).
  if (j.contains("path_evidence")) {
    pairperf::provenance mine;
    pairperf::add_peer_evidence(mine, j.at("path_evidence"));
  }
  try {
    if (j.contains("budget_s")) (void)pairperf::parse_phase_budget(j.at("budget_s"));
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
  }
  // What the server does with a case before it allocates anything.
  try {
    const auto config = j.at("config").get<pairperf::run_config>();
    const auto c = j.at("case").get<pairperf::test_case>();
    pairperf::server_limits limits;
    limits.max_case_memory = std::uint64_t{1} << 30;
    (void)pairperf::refuse_case(pairperf::capped(config, limits, std::chrono::seconds(5)), c,
                                j.value("iterations", std::uint64_t{1}), limits);
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
  }
  return 0;
}
