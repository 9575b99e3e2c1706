// explain's reading of a line as the library printed it: colour codes and launchers' prefixes
// off, who printed it kept.
#include <gtest/gtest.h>

#include "diagnose/log_line.h"

namespace pairperf {
namespace {

TEST(LogLine, ColourCodesGoWhereverTheyAre) {
  EXPECT_EQ(clean_line("\x1b[36m(RayWorker pid=7)\x1b[0m NCCL WARN x").text, "NCCL WARN x");
  // A paste that dropped the ESC, and syslog's #033 spelling, are colours too.
  EXPECT_EQ(clean_line("[1;31mERROR[0m connect failed").text, "ERROR connect failed");
  EXPECT_EQ(clean_line("#033[2m#033[33m(raylet)#033[0m killed").text, "(raylet) killed");
  // A bracket that is not a colour stays.
  EXPECT_EQ(clean_line("remote=[127.0.0.1]:99 [m] x").text, "remote=[127.0.0.1]:99 [m] x");
}

TEST(LogLine, LaunchersPrefixesComeOffAndSayWhoPrinted) {
  auto r = clean_line("[rank3]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed");
  EXPECT_EQ(r.text, "[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed");
  EXPECT_EQ(r.origin, "rank3");
  r = clean_line("[default1]:NCCL WARN x");
  EXPECT_EQ(r.origin, "rank1");
  r = clean_line("[1,2]<stderr>:[host:1:0] UCX ERROR y");
  EXPECT_EQ(r.text, "[host:1:0] UCX ERROR y");
  EXPECT_EQ(r.origin, "rank2");
  r = clean_line("(RayWorkerWrapper pid=4028887, ip=10.0.0.2) ERROR z");
  EXPECT_EQ(r.text, "ERROR z");
  EXPECT_EQ(r.origin, "RayWorkerWrapper pid=4028887");
  r = clean_line("2024-05-01T10:00:00.123456789Z [pod/w-0/main] 3: NCCL WARN w");
  EXPECT_EQ(r.text, "NCCL WARN w");
  EXPECT_EQ(r.origin, "pod/w-0/main");
  r = clean_line("worker-1  | RuntimeError: v");
  EXPECT_EQ(r.text, "RuntimeError: v");
  EXPECT_EQ(r.origin, "worker-1");
  r = clean_line("[trainer85612|12]:W0701 TCPStore.cpp:182] x");
  EXPECT_EQ(r.text, "W0701 TCPStore.cpp:182] x");
  EXPECT_EQ(r.origin, "rank12");
}

TEST(LogLine, MpirunsTimestampBeforeItsTagComesOffToo) {
  // mpirun --timestamp-output --tag-output, pasted after a separator line without its newline
  // (openucx/ucx MTT report, Open MPI 3.1.1a1; tests/fixtures/explain/real/s8b-ucx-mtt-roce-*).
  const auto r = clean_line(
      "=============================================================Tue Jun 12 18:14:48 "
      "2018[1,15]<stderr>:[clx-orion-097:26451:0:26451] rc_verbs_iface.c:63   FATAL: send "
      "completion with error: transport retry counter exceeded");
  EXPECT_EQ(r.text,
            "[clx-orion-097:26451:0:26451] rc_verbs_iface.c:63   FATAL: send completion with "
            "error: transport retry counter exceeded");
  EXPECT_EQ(r.origin, "rank15");
  // A ctime(3) date with a space-padded day; a line of '=' alone stays what it is.
  EXPECT_EQ(clean_line("Wed Jan  3 09:01:02 2024[0,1]<stdout>:x").text, "x");
  EXPECT_EQ(clean_line("=======").text, "=======");
  EXPECT_EQ(clean_line("==== backtrace ====").text, "==== backtrace ====");
}

TEST(LogLine, ALibrarysOwnFormatIsLeftAlone) {
  // NCCL's "host:pid:tid [dev]" and UCX's "[time] [host:pid:tid]" are the libraries' own.
  for (const char* line : {"node1:2481:2520 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
                           "[1619044902.015564] [host:33810:0] sock.c:261 UCX ERROR connect",
                           "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught"}) {
    const auto r = clean_line(line);
    EXPECT_EQ(r.text, line);
    EXPECT_EQ(r.origin, "");
  }
  EXPECT_EQ(clean_line("  \t  ").text, "");
}

}  // namespace
}  // namespace pairperf
