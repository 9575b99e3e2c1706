"""Regression tracking as a nightly job runs it, at a size CI affords: separate runs of one build through a
namespace link whose tc rate limit is the bottleneck; a baseline folder of 5 runs; a 25% slower link (5 runs) caught by
`pairperf compare` on every run, and `pairperf history` placing the step at the first slow run and taking the level
after it as the new normal. scripts/regression-study runs the full study (24 A/A runs; README quotes it).

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
            # 25% slower: every run (and every two) caught, the bandwidth named, the change about -25%.
            slow = conf["slowed"]
            self.assertEqual(len(slow), 6 - m)
            for row in slow:
                self.assertEqual((row["exit_code"], row["bandwidth"]), (3, "regression"), slow)
                self.assertAlmostEqual(row["bandwidth_change"], -0.25, delta=0.05)
        # The series: one step, at the first slowed run, a regression; the newest run follows the accepted step,
        # so it is not a regression again.
        h = r["history"]
        self.assertEqual(h["runs"], 12)
        self.assertEqual([(c["run"], c["verdict"]) for c in h["change_points"]], [(7, "regression")], h)
        self.assertLess(h["change_points"][0]["p_value"], 0.05)
        self.assertNotEqual(h["exit_code"], 3, h)


if __name__ == "__main__":
    pp.main()
