// pairperf explain's engine on small catalogs: what the catalog loader refuses, how fields fill
// checks, how facts across logs raise causes, and the exit code. (The shipped catalog against
// real programs' logs is loopback.explain and scenarios.explain.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "diagnose/explain.h"

namespace pairperf {
namespace {

nlohmann::json sig(const std::string& id, const std::string& kind, const std::string& contains,
                   const std::string& pattern, std::vector<std::string> fields) {
  return {{"id", id},
          {"library", id.substr(0, id.find('.'))},
          {"kind", kind},
          {"stage", "connect"},
          {"contains", contains},
          {"pattern", pattern},
          {"fields", fields},
          {"meaning", "reached {addr}"}};
}

nlohmann::json base_catalog() {
  nlohmann::json fail = sig("lib.connect", "failure", "connect to",
                            R"(connect to (\S+?):(\d+) failed: (.+)$)", {"addr", "port", "error"});
  fail["causes"] = {
      {{"text", "generic"}},
      {{"text", "refused by {addr}"}, {"when", {{"field", "error"}, {"matches", "refused"}}}},
      {{"text", "the setting differs"}, {"when", {{"evidence", "setting_differs"}}}},
      {{"text", "advertised by another"}, {"when", {{"evidence", "advertised_elsewhere"}}}}};
  fail["checks"] = {"pairperf doctor {addr}:{pairperf_port}[ --iface {iface}]", "pairperf doctor"};
  fail["class"] = "interface";
  nlohmann::json setting =
      sig("lib.setting", "context", "set to", R"((LIB_\w+) set to (\S+))", {"var", "value"});
  nlohmann::json using_ =
      sig("lib.using", "context", "Using", R"(Using (\w+):(\S+))", {"iface", "local_addr"});
  nlohmann::json loop = sig("lib.loopback", "warning", "loopback", "using loopback", {});
  loop["implies"] = "loopback";
  return {{"schema", "pairperf.explain-catalog"},
          {"schema_version", "1.0.0"},
          {"failure_looking", {R"(\bERROR\b)", R"(timeout)"}},
          {"signatures", {fail, setting, using_, loop}}};
}

explain_catalog catalog_of(const nlohmann::json& j) { return parse_catalog(j.dump(), "test"); }

std::string refusal(const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j = base_catalog();
  change(j);
  try {
    catalog_of(j);
  } catch (const catalog_error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ExplainCatalog, RefusesWhatItCannotUse) {
  EXPECT_NE(refusal([](auto& j) {
              j["signatures"][0]["fields"] = {"addr"};
            }).find("3 group(s) and 1 field name(s)"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& j) { j["signatures"][0]["kind"] = "fatal"; }).find("kind 'fatal'"),
            std::string::npos);
  EXPECT_NE(
      refusal([](auto& j) { j["signatures"][0]["fields"][0] = "address"; }).find("field 'address'"),
      std::string::npos);
  EXPECT_NE(refusal([](auto& j) {
              j["signatures"][0]["causes"][1]["when"]["evidence"] = "vibes";
            }).find("evidence 'vibes'"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& j) {
              j["signatures"][0]["checks"] = {"pairperf doctor {peer}"};
            }).find("'{peer}'"),
            std::string::npos);
  EXPECT_NE(
      refusal([](auto& j) { j["signatures"][0]["contains"] = ""; }).find("'contains' is empty"),
      std::string::npos);
  EXPECT_NE(refusal([](auto& j) {
              j["signatures"][0]["pattern"] = "(a";
            }).find("not a valid regular expression"),
            std::string::npos);
  EXPECT_NE(
      refusal([](auto& j) { j["signatures"].push_back(j["signatures"][1]); }).find("used twice"),
      std::string::npos);
  EXPECT_NE(refusal([](auto& j) { j["schema"] = "other"; }).find("'schema' must be"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& j) { j["signatures"] = nlohmann::json::array(); }).find("non-empty"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& j) { j["signatures"][0].erase("class"); }).find("needs its class"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& j) { j["signatures"][0]["class"] = "gremlins"; }).find("'gremlins'"),
            std::string::npos);
  EXPECT_NE(refusal([](auto& j) { j["signatures"][1]["class"] = "port"; }).find("no class"),
            std::string::npos);
  EXPECT_EQ(refusal([](auto&) {}), "(accepted)");
  EXPECT_THROW(parse_catalog("{not json", "x"), catalog_error);
}

log_input log(const std::string& name, std::vector<std::string> lines) {
  return {name, std::move(lines)};
}

TEST(Explain, OneDiagnosisPerSignatureWithEveryLineAndItsFields) {
  const auto c = catalog_of(base_catalog());
  const auto e =
      explain_logs(c,
                   {log("a.log", {"start", "connect to 10.0.0.2:99 failed: Connection refused",
                                  "connect to 10.0.0.3:98 failed: Connection refused"})},
                   {});
  ASSERT_EQ(e.diagnoses.size(), 1U);
  const diagnosis& d = e.diagnoses[0];
  EXPECT_EQ(d.matches.size(), 2U);
  EXPECT_EQ(d.fields.at("addr"), (std::vector<std::string>{"10.0.0.2", "10.0.0.3"}));
  EXPECT_EQ(d.meaning, "reached 10.0.0.2");
  // The cause the error shows first, then the unconditional one, then those not shown.
  ASSERT_EQ(d.causes.size(), 4U);
  EXPECT_EQ(d.causes[0].text, "refused by 10.0.0.2");
  EXPECT_TRUE(d.causes[0].supported);
  EXPECT_EQ(d.causes[1].text, "generic");
  EXPECT_FALSE(d.causes[2].supported);
  // One check per line's values; the optional --iface part left out (no iface in the line); the
  // port from the options; a check needing no field is suggested once.
  ASSERT_EQ(d.checks.size(), 3U);
  EXPECT_EQ(d.checks[0].command, "pairperf doctor 10.0.0.2:18515");
  EXPECT_TRUE(d.checks[0].runnable);
  EXPECT_EQ(d.checks[1].command, "pairperf doctor");
  EXPECT_EQ(d.checks[2].command, "pairperf doctor 10.0.0.3:18515");
  EXPECT_EQ(exit_code(e), 3);
}

TEST(Explain, FactsAcrossLogsRaiseTheirCauses) {
  const auto c = catalog_of(base_catalog());
  const auto e = explain_logs(
      c,
      {log("n1.log", {"LIB_IFNAME set to eth0", "connect to 10.9.0.5:7 failed: No route"}),
       log("n2.log", {"Using ib0:10.9.0.5", "LIB_IFNAME set to ib0"})},
      {});
  std::vector<std::string> kinds;
  for (const auto& f : e.facts) kinds.push_back(f.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"setting_differs", "advertised_elsewhere"}));
  EXPECT_NE(e.facts[0].text.find("eth0 in n1.log; ib0 in n2.log"), std::string::npos)
      << e.facts[0].text;
  EXPECT_EQ(e.facts[1].evidence, (std::vector<std::string>{"n2.log:1", "n1.log:2"}));
  const diagnosis& d = e.diagnoses.at(0);
  EXPECT_EQ(d.causes[0].text, "the setting differs");
  EXPECT_EQ(d.causes[1].text, "advertised by another");
  EXPECT_TRUE(d.causes[1].supported);
}

TEST(Explain, AMeaningNamesInWordsWhatTheLineDoesNotPrint) {
  nlohmann::json j = base_catalog();
  nlohmann::json bare = sig("lib.bare", "failure", "bare", "bare failure", {});
  bare["meaning"] = "{host} failed[ towards {addr}]";
  bare["class"] = "port";
  j["signatures"].push_back(bare);
  const auto e = explain_logs(catalog_of(j), {log("b.log", {"bare failure"})}, {});
  ASSERT_EQ(e.diagnoses.size(), 1U);
  EXPECT_EQ(e.diagnoses[0].meaning, "this node failed");
}

TEST(Explain, WarningsAloneExitZeroAndImplyTheirFact) {
  const auto c = catalog_of(base_catalog());
  const auto e = explain_logs(c, {log("w.log", {"using loopback", "all good"})}, {});
  ASSERT_EQ(e.diagnoses.size(), 1U);
  EXPECT_EQ(e.diagnoses[0].sig->kind, line_kind::warning);
  ASSERT_EQ(e.facts.size(), 1U);
  EXPECT_EQ(e.facts[0].kind, "loopback");
  EXPECT_EQ(exit_code(e), 0);
}

TEST(Explain, UnexplainedLinesAreCountedListedAndBounded) {
  const auto c = catalog_of(base_catalog());
  std::vector<std::string> lines;
  for (int i = 0; i < 50; ++i) lines.push_back("ERROR something new");
  // A traceback's quoted code says timeout= without being a failure.
  lines.emplace_back("  File \"job.py\", line 3, in <module>");
  lines.emplace_back("    dist.init_process_group(timeout=timeout)");
  explain_options o;
  o.max_unexplained = 5;
  const auto e = explain_logs(c, {log("u.log", lines)}, o);
  EXPECT_EQ(e.unexplained_total, 50U);
  EXPECT_EQ(e.unexplained.size(), 5U);
  EXPECT_EQ(exit_code(e), 4);
  const auto clean = explain_logs(c, {log("ok.log", {"all fine", ""})}, {});
  EXPECT_EQ(exit_code(clean), 0);
}

TEST(Explain, ACheckThatCouldNotRunMakesExitOne) {
  const auto c = catalog_of(base_catalog());
  auto e = explain_logs(c, {log("a.log", {"connect to 10.0.0.2:99 failed: refused"})}, {});
  e.diagnoses[0].checks[0].result = check_run{1, "failed", "", "cannot reach", 0.1};
  EXPECT_EQ(exit_code(e), 1);
  e.diagnoses[0].checks[0].result->outcome = "confirmed";
  EXPECT_EQ(exit_code(e), 3);
}

TEST(Explain, TheShippedCatalogLoads) {
  auto c = load_catalog(std::string(PAIRPERF_SOURCE_DIR) + "/diagnose/explain-catalog.json");
  EXPECT_GE(c.signatures.size(), 30U);
  EXPECT_THROW(load_catalog("/nonexistent/catalog.json"), catalog_error);
  const std::size_t hand = c.signatures.size();
  load_formats(c, std::string(PAIRPERF_SOURCE_DIR) + "/diagnose/explain-formats.json");
  EXPECT_GT(c.generated, 1000U);
  EXPECT_EQ(c.signatures.size(), hand + c.generated);
}

// A catalog with a cause, its consequence, and a consequence whose code can name the cause.
nlohmann::json verdict_catalog() {
  nlohmann::json j = base_catalog();
  nlohmann::json oom = sig("lib.oom", "failure", "out of memory", "out of memory", {});
  oom["class"] = "oom";
  nlohmann::json timeout = sig("lib.timeout", "failure", "timed out", "collective timed out", {});
  timeout["class"] = "peer_died";
  timeout["consequence"] = true;
  nlohmann::json exit = sig("lib.exit", "failure", "exitcode", R"(exitcode: (-?\d+))", {"error"});
  exit["class"] = "peer_died";
  exit["consequence"] = true;
  exit["causes"] = {
      {{"text", "SIGKILL"}, {"when", {{"field", "error"}, {"matches", "^-9$"}}}, {"class", "oom"}},
      {{"text", "its traceback"}}};
  nlohmann::json version =
      sig("lib.version", "context", "version", R"(version (\S+))", {"version"});
  for (auto& s : {oom, timeout, exit, version}) j["signatures"].push_back(s);
  return j;
}

TEST(Explain, TheVerdictIsTheFirstCauseNotItsConsequences) {
  const auto c = catalog_of(verdict_catalog());
  // The timeout comes first in the log, but it is a consequence: the OOM is the cause.
  auto e = explain_logs(c, {log("a.log", {"collective timed out", "out of memory"})}, {});
  ASSERT_TRUE(e.verdict.diagnosis);
  EXPECT_EQ(e.verdict.cause_class, "oom");
  EXPECT_FALSE(e.verdict.network);
  EXPECT_EQ(e.verdict.first, "a.log:2");
  // Consequences alone name no cause.
  e = explain_logs(c, {log("b.log", {"collective timed out"})}, {});
  EXPECT_EQ(e.verdict.cause_class, "undetermined");
  EXPECT_EQ(exit_code(e), 3);
  // A consequence whose code names its cause does.
  e = explain_logs(c, {log("c.log", {"collective timed out", "exitcode: -9"})}, {});
  EXPECT_EQ(e.verdict.cause_class, "oom");
  e = explain_logs(c, {log("d.log", {"exitcode: 1"})}, {});
  EXPECT_EQ(e.verdict.cause_class, "undetermined");
  // A network failure: the network is to blame.
  e = explain_logs(c, {log("e.log", {"connect to 10.0.0.2:99 failed: refused"})}, {});
  EXPECT_EQ(e.verdict.cause_class, "interface");
  EXPECT_TRUE(e.verdict.network);
  // Nothing failed: no verdict.
  e = explain_logs(c, {log("f.log", {"all good"})}, {});
  EXPECT_FALSE(e.verdict.diagnosis);
}

TEST(Explain, AFailureTowardLoopbackIsTheLoopbacksAndChecksSkipIt) {
  const auto c = catalog_of(base_catalog());
  const auto e =
      explain_logs(c, {log("a.log", {"connect to 127.0.1.1:3210 failed: Connection refused"})}, {});
  EXPECT_EQ(e.verdict.cause_class, "loopback");
  ASSERT_EQ(e.diagnoses.size(), 1U);
  // doctor of a loopback "peer" proves nothing: that check is not runnable; doctor of this node is.
  ASSERT_EQ(e.diagnoses[0].checks.size(), 2U);
  EXPECT_FALSE(e.diagnoses[0].checks[0].runnable);
  EXPECT_TRUE(e.diagnoses[0].checks[1].runnable);
}

TEST(Explain, AFailureLineIsNotTakenByAContextSignature) {
  const auto c = catalog_of(verdict_catalog());
  const auto e = explain_logs(c, {log("a.log", {"out of memory, version 2.19.3"})}, {});
  ASSERT_EQ(e.diagnoses.size(), 1U);
  EXPECT_EQ(e.diagnoses[0].sig->id, "lib.oom");
}

TEST(Explain, AWrappedMessageIsReadWhole) {
  const auto c = catalog_of(base_catalog());
  // The launcher's prefix goes, the indented continuation joins; the evidence is the line as
  // printed.
  const auto e = explain_logs(
      c, {log("a.log", {"[rank3]: connect to 10.0.0.2:99", "    failed: Connection refused"})}, {});
  ASSERT_EQ(e.matches.size(), 1U);
  EXPECT_EQ(e.matches[0].text, "[rank3]: connect to 10.0.0.2:99");
  EXPECT_EQ(e.matches[0].origin, "rank3");
  EXPECT_EQ(e.matches[0].fields.at("error"), "Connection refused");
  EXPECT_EQ(e.unexplained_total, 0U);
}

TEST(Explain, GeneratedFormatsComeAfterTheHandWrittenOnes) {
  auto c = catalog_of(base_catalog());
  const nlohmann::json formats{{"schema", "pairperf.explain-formats"},
                               {"formats",
                                {{{"id", "lib.gen.connect"},
                                  {"library", "lib"},
                                  {"level", "warn"},
                                  {"format", "connect to %s failed: %s"},
                                  {"regex", "connect to (.*?) failed: (.*)"},
                                  {"literal", "connect to "},
                                  {"file", "src/x.c"},
                                  {"line", 7},
                                  {"versions", {"1.0"}},
                                  {"class", "port"}},
                                 {{"id", "lib.gen.odd"},
                                  {"library", "lib"},
                                  {"level", "error"},
                                  {"format", "odd thing %d"},
                                  {"regex", "odd thing ([0-9]+)"},
                                  {"literal", "odd thing "},
                                  {"file", "src/y.c"},
                                  {"versions", {"1.0"}},
                                  {"class", "unclassified"}}}}};
  add_formats(c, formats.dump(), "formats.json");
  EXPECT_EQ(c.generated, 2U);
  auto e = explain_logs(c, {log("a.log", {"connect to 10.0.0.2:99 failed: refused"})}, {});
  EXPECT_EQ(e.diagnoses.at(0).sig->id, "lib.connect");  // the hand-written one keeps its line
  e = explain_logs(c, {log("b.log", {"odd thing 12"})}, {});
  ASSERT_EQ(e.diagnoses.size(), 1U);
  EXPECT_TRUE(e.diagnoses[0].sig->generated);
  EXPECT_EQ(e.verdict.cause_class, "undetermined");  // recognized, decides nothing
  EXPECT_NE(e.diagnoses[0].meaning.find("src/y.c"), std::string::npos);
  EXPECT_THROW(add_formats(c, formats.dump(), "again.json"), catalog_error);  // ids twice
}

// NCCL's line prefix names the host; Docker's default hostname (12 hex digits) says a container.
TEST(Explain, AHostNamedLikeADockerContainerIsEvidence) {
  nlohmann::json j = base_catalog();
  nlohmann::json sock = sig("lib.socket", "failure", "Socket creation failed",
                            R"(Socket creation failed : (.+)$)", {"error"});
  sock["causes"] = {
      {{"text", "the container lacks the family"},
       {"when", {{"field", "error"}, {"matches", "family"}, {"evidence", "container_hostname"}}},
       {"class", "container"}},
      {{"text", "no usable interface"}}};
  sock["class"] = "interface";
  j["signatures"].push_back(sock);
  const auto c = catalog_of(j);
  const std::string line =
      ":3171:3171 [0] include/socket.h:311 WARN Socket creation failed : Address family "
      "not supported by protocol";
  auto e = explain_logs(c, {log("a.log", {"e66aa18dc444" + line})}, {});
  EXPECT_EQ(e.verdict.cause_class, "container");
  ASSERT_EQ(e.facts.size(), 1U);
  EXPECT_EQ(e.facts[0].kind, "container_hostname");
  EXPECT_EQ(e.facts[0].subject, "e66aa18dc444");
  // A host named otherwise, or 12 hex digits that are not NCCL's prefix: no container.
  e = explain_logs(c, {log("b.log", {"gpu-node-0007" + line})}, {});
  EXPECT_EQ(e.verdict.cause_class, "interface");
  EXPECT_TRUE(e.facts.empty());
  e = explain_logs(
      c, {log("c.log", {"Socket creation failed : Address family e66aa18dc444:1:1 [0] "})}, {});
  EXPECT_EQ(e.verdict.cause_class, "interface");
}

// A lookup that failed, and a connection toward the same name: the name is the cause.
TEST(Explain, AConnectionTowardANameWhoseLookupFailedIsNameResolution) {
  nlohmann::json j = base_catalog();
  nlohmann::json lookup = sig("lib.lookup", "warning", "cannot look up",
                              R"(cannot look up (\S+): (.+)$)", {"host", "error"});
  lookup["causes"] = {{{"text", "{host} does not resolve"},
                       {"when", {{"field", "error"}, {"matches", "^-2 "}}},
                       {"class", "name_resolution"}}};
  j["signatures"].push_back(lookup);
  const auto c = catalog_of(j);
  auto e =
      explain_logs(c,
                   {log("a.log", {"connect to store.internal:29500 failed: Invalid argument",
                                  "cannot look up store.internal: -2 Name or service not known"})},
                   {});
  EXPECT_EQ(e.verdict.cause_class, "name_resolution");
  ASSERT_FALSE(e.diagnoses.empty());
  ASSERT_FALSE(e.diagnoses[0].causes.empty());
  EXPECT_TRUE(e.diagnoses[0].causes[0].supported);
  EXPECT_NE(e.diagnoses[0].causes[0].text.find("store.internal does not resolve"),
            std::string::npos);
  // Another name's lookup, or a lookup whose error is not the name's (-11, a system error): the
  // connection keeps its own class.
  e = explain_logs(c,
                   {log("b.log", {"connect to store.internal:29500 failed: Invalid argument",
                                  "cannot look up other.internal: -2 Name or service not known"})},
                   {});
  EXPECT_EQ(e.verdict.cause_class, "interface");
  e = explain_logs(c,
                   {log("c.log", {"connect to store.internal:29500 failed: Invalid argument",
                                  "cannot look up store.internal: -11 System error"})},
                   {});
  EXPECT_EQ(e.verdict.cause_class, "interface");
}

// A warning that alone leaves the outcome open: exit 4 alone, the failure's exit beside one.
TEST(Explain, AnInconclusiveWarningAloneIsNeitherHealthyNorAFailure) {
  nlohmann::json j = base_catalog();
  nlohmann::json reset =
      sig("lib.reset", "warning", "recv failed", R"(recv failed: (.+)$)", {"error"});
  reset["inconclusive"] = true;
  j["signatures"].push_back(reset);
  const auto c = catalog_of(j);
  auto e = explain_logs(c, {log("a.log", {"recv failed: Connection reset by peer"})}, {});
  EXPECT_FALSE(e.verdict.diagnosis);
  EXPECT_EQ(exit_code(e), 4);
  e = explain_logs(c,
                   {log("b.log", {"recv failed: Connection reset by peer",
                                  "connect to 10.0.0.2:99 failed: refused"})},
                   {});
  EXPECT_EQ(e.verdict.cause_class, "interface");
  EXPECT_EQ(exit_code(e), 3);
  // Only a warning without a class may be inconclusive.
  EXPECT_NE(refusal([](nlohmann::json& k) { k["signatures"][0]["inconclusive"] = true; }),
            "(accepted)");
  EXPECT_NE(refusal([](nlohmann::json& k) {
              k["signatures"][3]["inconclusive"] = true;
              k["signatures"][3]["class"] = "loopback";
            }),
            "(accepted)");
}

}  // namespace
}  // namespace pairperf
