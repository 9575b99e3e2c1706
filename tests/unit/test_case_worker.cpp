// The supervised worker (harness/case_worker.h): what the child reports reaches the supervisor in
// order, a dying child's last messages too, and a supervisor that cannot take a message ends the
// child instead of leaving it running.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "harness/case_worker.h"

namespace pairperf {
namespace {

TEST(CaseWorker, MessagesArriveInOrderBeforeTheResult) {
  std::vector<std::string> seen;
  const worker_outcome w = run_in_worker(
      [] {
        report_stage("first", std::chrono::seconds(5));
        report_message("{\"start\":0}");
        report_message("{\"result\":\"a\"}");
        report_stage("second", std::chrono::seconds(5));
        report_message("{\"start\":1}");
        return std::string("done");
      },
      nullptr, std::chrono::seconds(2), [&](const std::string& line) { seen.push_back(line); });
  EXPECT_EQ(w.how, worker_outcome::end::finished) << w.died_how << " " << w.last_words;
  EXPECT_EQ(w.output, "done");
  EXPECT_EQ(w.stage, "second");
  EXPECT_EQ(seen,
            (std::vector<std::string>{"{\"start\":0}", "{\"result\":\"a\"}", "{\"start\":1}"}));
}

TEST(CaseWorker, ADyingChildsMessagesStillArrive) {
  std::vector<std::string> seen;
  const worker_outcome w = run_in_worker(
      [] {
        report_message("one");
        report_stage("the second case", std::chrono::seconds(5));
        report_message("two");
        ::raise(SIGABRT);
        return std::string("never");
      },
      nullptr, std::chrono::seconds(2), [&](const std::string& line) { seen.push_back(line); });
  EXPECT_EQ(w.how, worker_outcome::end::died);
  EXPECT_EQ(w.died_how, "signal SIGABRT");
  EXPECT_EQ(w.stage, "the second case");
  EXPECT_EQ(seen, (std::vector<std::string>{"one", "two"}));
}

TEST(CaseWorker, AMessageTheSupervisorRejectsEndsTheChild) {
  int calls = 0;
  EXPECT_THROW(run_in_worker(
                   [] {
                     report_message("not what was expected");
                     report_message("more");
                     for (;;) ::pause();  // only SIGKILL ends it
                     return std::string();
                   },
                   nullptr, std::chrono::seconds(2),
                   [&](const std::string&) {
                     ++calls;
                     throw std::logic_error("out of order");
                   }),
               std::logic_error);
  EXPECT_EQ(calls, 1);  // nothing more is handed over once one failed
}

}  // namespace
}  // namespace pairperf
