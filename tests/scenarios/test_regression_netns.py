"""Regression tracking as a nightly job runs it, at a size CI affords: separate runs of one build through a
namespace link whose tc rate limit is the bottleneck; a baseline folder of 5 runs; a 25% slower link (5 runs) caught by
`pairperf compare` on every run, and `pairperf history` placing the step at the first slow run and taking the level
after it as the new normal. scripts/regression-study runs the full study (24 A/A runs; docs/commands/compare.md quotes it).

Needs root (ip netns, tc); anywhere else it skips with the reason printed."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_tools import netns, regression_study  # noqa: E402

REASON = netns.unavailable(str(os.getpid() % 10000))
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
class RegressionStudy(unittest.TestCase):
    def test_a_slower_link_is_caught_and_history_finds_the_step(self):
        with pp.tmpdir() as d:
            r = regression_study.study(pp.BIN, d, runs=7, baselines=(5,), slowed=5, unshaped=0, rate=1000,
                                       slowdown=0.25, tests="tcp_bw", sizes="1M", repeat=3, duration="0.1s",
                                       log=lambda m: None)
        lines = regression_study.summarize(r)
        print("\n".join(lines), flush=True)
        for conf, (m, comparisons) in zip(r["configurations"], ((1, 2), (2, 1))):
            self.assertEqual((conf["baseline_runs"], conf["new_runs"]), (5, m))
            # A/A through the bottleneck: judged (runs within about 1% of each other) or, under a sanitizer's
            # load, too spread to judge; never a false alarm.
            aa = conf["aa"]["shaped"]
            self.assertEqual(len(aa), comparisons)
            for row in aa:
                self.assertIn(row["exit_code"], (0, 4), aa)
            # 25% slower: every run (and every two) caught, the bandwidth named, the change about -25%; unless
            # the slowed runs' own noise meter says they waited for a CPU long enough to explain the drop (a
            # CPU hog beside the test): then inconclusive, saying so, and never "no change".
            slow = conf["slowed"]
            self.assertEqual(len(slow), 6 - m)
            for row in slow:
                self.assertAlmostEqual(row["bandwidth_change"], -0.25, delta=0.05)
                if row["exit_code"] == 3:
                    self.assertEqual(row["bandwidth"], "regression", slow)
                else:
                    self.assertEqual((row["exit_code"], row["bandwidth"]), (4, "inconclusive"), slow)
                    self.assertIn("its host noise explains", row["bandwidth_note"], slow)
        # The series: one step, at the first slowed run, a regression; the newest run follows the accepted step,
        # so it is not a regression again.
        h = r["history"]
        self.assertEqual(h["runs"], 12)
        # The shaped runs are so steady (0.02-0.4% apart) that a 0.1% move between A/A runs can be a real,
        # significant level change: a "shift" within the threshold, never a regression.
        steps = [(c["run"], c["verdict"]) for c in h["change_points"] if c["verdict"] != "shift"]
        self.assertEqual(steps, [(7, "regression")], h)
        for c in h["change_points"]:
            self.assertLess(c["p_value"], 0.05, c)
            if c["verdict"] == "shift":
                self.assertLess(abs(c["change"]), 0.05, c)
        self.assertNotEqual(h["exit_code"], 3, h)


if __name__ == "__main__":
    pp.main()
