"""Regression tracking as a nightly job runs it, at a size CI affords: separate runs of one build through a
namespace link whose tc rate limit is the bottleneck; a baseline folder of 5 runs; a 25% slower link (5 runs) caught by
`pairperf compare` on every run, and `pairperf history` placing the step at the first slow run and taking the level
after it as the new normal. Then the gate under another tenant's load (one busy process in some runs): a loaded run of
the same link is never a regression, and a 25% slower link under the same load is still caught.
scripts/regression-study runs the full study (--loaded for the load; docs/commands/compare.md quotes it).

Needs root (ip netns, tc); anywhere else it skips with the reason printed."""
import json
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

    def test_another_tenants_load_is_never_a_regression_and_a_slower_link_under_it_is_caught(self):
        with pp.tmpdir() as d:
            with regression_study.Link(pp.BIN, f"L{os.getpid() % 1000}") as link:
                def run(name, load, mbit):
                    link.set_rate(mbit)
                    f = os.path.join(d, "runs", f"{name}{'-hog' if load else ''}.json")
                    os.makedirs(os.path.dirname(f), exist_ok=True)
                    with regression_study.Hog(load):
                        rc = link.run(f, "tcp_lat,tcp_bw", "1M", 3, "0.1s")
                    self.assertIn(rc, (0, 4), f)
                    return f

                # A nightly baseline of six runs, the load present in every other one (as a co-located job's).
                base = [run(f"base-{i}", i % 2 == 1, 1000) for i in range(6)]
                same = run("new-same-link", True, 1000)
                slower = run("new-slower-link", True, 750)
            folder = os.path.join(d, "baseline")
            aa = regression_study.compare_with(pp.BIN, base, [same], folder)
            slow = regression_study.compare_with(pp.BIN, base, [slower], folder)
            waits = [waited(f) for f in base]
            waited_new = waited(slower)
        print(f"baseline (waited share, noisy): {waits}\nloaded, same link: {aa}\nloaded, 25% slower: {slow}", flush=True)
        # The same link under load: whatever moved, the measured waits explain it or the runs cannot tell; never a
        # regression (the loaded latency p99s were +60-72% "regressions" before the gate weighed the waits).
        self.assertNotEqual(aa["exit_code"], 3, aa)
        self.assertEqual(aa["regressions"], [], aa)
        # The slower link under the same load: the baseline's own loaded runs held the bandwidth (the link, not the
        # CPUs, sets it), so the drop is the link's. Judged where the baseline has three quiet runs and two loaded
        # ones that waited 5 points more than they did (compare's rule; a CPU hog beside the suite can take that
        # away, and then the answer is inconclusive, never "no change").
        quiet = [w for w, noisy in waits if not noisy]
        usual = sorted(quiet)[len(quiet) // 2] if quiet else 1.0
        loaded = [w for w, noisy in waits if noisy and w > usual + 0.05]
        self.assertAlmostEqual(slow["bandwidth_change"], -0.25, delta=0.05, msg=slow)
        # and the new run waited at most 10 points longer than the longest of them (a run that waited
        # much longer is not covered by what the baseline showed: compare/compare_noise.cpp held_under_load).
        slow_wait = waited_new
        if len(quiet) >= 3 and len(loaded) >= 2 and slow_wait[0] <= max(loaded) + 0.1:
            self.assertEqual((slow["exit_code"], slow["bandwidth"]), (3, "regression"), slow)
        else:
            # Another hog beside the suite can make every baseline run noisy: compare then judges them
            # all alike (the drop is caught) or cannot (inconclusive); never "no change".
            print(f"{len(quiet)} quiet baseline run(s), {len(loaded)} loaded beyond them, the slower run waited "
                  f"{slow_wait[0]}", flush=True)
            self.assertIn((slow["exit_code"], slow["bandwidth"]), ((3, "regression"), (4, "inconclusive")), slow)


def waited(path):
    """A run's 1 MiB stream: the larger share of its measurement either side waited for a CPU, and whether
    pairperf called it noisy."""
    with open(path) as f:
        case = next(r for r in json.load(f)["results"] if r["case"]["test"] == "tcp_bw")
    noise = case["host_noise"]
    return round(max(noise[s]["descheduled_share"] for s in ("client", "server") if s in noise), 3), noise["noisy"]


if __name__ == "__main__":
    pp.main()
