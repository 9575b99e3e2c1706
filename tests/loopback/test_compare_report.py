"""`pairperf compare`, `export` and `report` as a user runs them: on real runs (a baseline folder of runs), and
on the fixtures in tests/fixtures/report (one run each: a 12% bandwidth drop on UCX tcp and cma turned tcp)."""
import json
import os
import struct
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

FIX = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "report")
BASE, NEW, PEER = (os.path.join(FIX, n) for n in ("base.json", "new.json", "peer.json"))


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


class Compare(unittest.TestCase):
    def test_real_runs_as_the_unit(self):
        # A baseline folder of 3 real runs and a new run: one value per run, judged against the runs' spread.
        with pp.tmpdir() as d:
            base = os.path.join(d, "baseline")
            os.makedirs(base)
            files = []
            for name in ("a", "b", "c", "new"):
                out = os.path.join(base if name != "new" else d, f"{name}.json")
                proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat,tcp_bw", "--sizes", "64,64K", "--repeat", "3",
                                  "-d", "0.05s", "-q", "--json", out], timeout=120)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                files.append(out)
            self.assertEqual(len(pp.load(files[0])["results"][0]["repetitions"]), 3)
            cmp_json = os.path.join(d, "cmp.json")
            proc, _ = pp.run(["compare", base, files[-1], "--all", "--json", cmp_json], timeout=60)
            self.assertEqual(pp.schema_errors(cmp_json), [])
            doc = pp.load(cmp_json)
            # The same baseline as a list of runs (--base, repeated): the same verdicts.
            listed, _ = pp.run(["compare", "--base", files[0], "--base", files[1], "--base", files[2], files[-1],
                                "--json", "-"], timeout=60)
            self.assertEqual(listed.returncode, proc.returncode, listed.stderr)
            self.assertEqual(json.loads(listed.stdout)["base_files"], doc["base_files"])
        self.assertIn(proc.returncode, (0, 3, 4), proc.stderr)  # real noise: judged, or too wide to judge
        self.assertEqual(doc["exit_code"], proc.returncode)
        self.assertIn("tcp tcp_bw stream_uni iface=lo mem=host,host size=64K", proc.stdout)
        self.assertIn("3 baseline run(s), 1 new run(s)", proc.stdout)
        for case in doc["cases"]:
            for m in case["metrics"]:
                # A baseline run its host made noisy is left out, and counted.
                self.assertEqual((len(m["base"]) + m["base_noisy_runs"], len(m["new"])), (3, 1), m)
                if len(m["base"]) >= 2:
                    self.assertIsNotNone(m["p_value"], m)  # 2 or more quiet runs give a spread: tested

    def test_fixture_provenance_change_and_one_run_a_side(self):
        # Each fixture is one run: its 12% drop cannot be judged (the spread between runs is unknown), but
        # cma turned tcp is a finding whatever the runs.
        with pp.tmpdir() as d:
            out = os.path.join(d, "cmp.json")
            proc, _ = pp.run(["compare", BASE, NEW, "--json", out], timeout=60)
            doc = pp.load(out)
            self.assertEqual(pp.schema_errors(out), [])
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        self.assertIn("lanes: cma/memory -> tcp/lo  PROVENANCE CHANGE", proc.stdout)
        self.assertEqual(doc["schema"], "pairperf.compare")
        self.assertEqual(doc["provenance_changes"], 7)
        self.assertEqual(doc["regressions"], 0)
        notes = {m["note"] for c in doc["cases"] for m in c["metrics"]}
        self.assertTrue(all("spread between runs is unknown" in n for n in notes), notes)
        self.assertEqual(doc["missing"], [])

    def test_markdown_for_a_ci_comment(self):
        proc, _ = pp.run(["compare", BASE, NEW, "--markdown"], timeout=60)
        self.assertEqual(proc.returncode, 3)
        self.assertTrue(proc.stdout.startswith("### pairperf compare: findings"), proc.stdout[:200])
        self.assertIn("| case | metric | base | new | change | adjusted p | verdict |", proc.stdout)
        self.assertIn("**provenance change**", proc.stdout)

    def test_one_baseline_run_is_inconclusive_not_no_change(self):
        with pp.tmpdir() as d:
            out = os.path.join(d, "cmp.json")
            proc, _ = pp.run(["compare", BASE, BASE, "--json", out], timeout=60)
            self.assertEqual(pp.schema_errors(out), [])
            self.assertEqual((pp.load(out)["verdict"], pp.load(out)["exit_code"]), ("inconclusive", 4))
        self.assertEqual(proc.returncode, 4, proc.stdout)
        self.assertIn("inconclusive (1 baseline run: the spread between runs is unknown", proc.stdout)

    def test_bad_inputs_exit_2_with_the_reason(self):
        with pp.tmpdir() as d:
            broken = os.path.join(d, "broken.json")
            with open(broken, "w") as f:
                f.write("{\"schema\": ")
            foreign = os.path.join(d, "gbench.json")
            with open(foreign, "w") as f:
                json.dump({"context": {}, "benchmarks": []}, f)
            for args, text in (([BASE, broken], "not JSON"), ([foreign, BASE], "schema '(none)' is not pairperf.result"),
                               ([BASE, os.path.join(d, "none.json")], "no such file"),
                               ([BASE], "give BASE and at least one NEW"),
                               ([BASE, NEW, "--alpha", "2"], "--alpha must be between 0 and 1")):
                with self.subTest(args=args[-1]):
                    proc, _ = pp.run(["compare"] + args, timeout=60)
                    self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                    self.assertIn(text, proc.stderr)

    def test_exports(self):
        with pp.tmpdir() as d:
            bmf, big, small = (os.path.join(d, n) for n in ("bmf.json", "big.json", "small.json"))
            proc, _ = pp.run(["export", BASE, "--bmf", bmf, "--gab-bigger", big, "--gab-smaller", small], timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            b, g, s = pp.load(bmf), pp.load(big), pp.load(small)
            self.assertEqual(pp.schema_errors(bmf, as_kind="export.bmf"), [])
            self.assertEqual(pp.schema_errors(big, as_kind="export.gab") + pp.schema_errors(small, as_kind="export.gab"), [])
            # The formats are checked, not merely parsed: each file fails the other's schema.
            self.assertTrue(pp.schema_errors(big, as_kind="export.bmf"))
        key = "tcp tcp_lat pingpong iface=lo mem=host,host size=8"
        self.assertIn("latency", b[key])
        self.assertLess(b[key]["latency"]["lower_value"], b[key]["latency"]["upper_value"])
        self.assertEqual(len(g), 21)  # three bandwidth series x seven sizes
        self.assertTrue(all(e["unit"] == "GB/s" for e in g))
        self.assertEqual(len(s), 14)  # p50 and p99 x seven sizes
        self.assertTrue(all(e["unit"] == "us" and e["value"] > 0 for e in s))


class History(unittest.TestCase):
    def test_two_fixture_runs_a_lane_change_and_one_run_of_level(self):
        # The fixtures share one time: ordered by file name (base.json, new.json). The newest run's lanes differ
        # from the run before (cma turned tcp): a finding; its figures have one run of level to be judged against.
        with pp.tmpdir() as d:
            out = os.path.join(d, "history.json")
            proc, _ = pp.run(["history", BASE, NEW, "--all", "--json", out], timeout=60)
            self.assertEqual(pp.schema_errors(out), [])
            doc = pp.load(out)
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        self.assertEqual(doc["ordered_by"], "time")
        self.assertEqual([os.path.basename(r["file"]) for r in doc["runs"]], ["base.json", "new.json"])
        self.assertEqual(len(doc["provenance_changes"]), 7)
        self.assertIn("PROVENANCE CHANGE (lanes differ from the run before)", proc.stdout)
        for s in doc["series"]:
            self.assertEqual(len(s["values"]), 2)
            self.assertEqual(s["change_points"], [])  # two runs cannot make two levels of 3
            self.assertIn("spread between runs is unknown", s["latest"]["note"])

    def test_bad_inputs_exit_2(self):
        with pp.tmpdir() as d:
            for args, text in (([os.path.join(d, "none")], "no such file"), ([BASE, "--window", "1"], "--window"),
                               ([BASE, "--change-alpha", "0"], "--change-alpha")):
                with self.subTest(args=args):
                    proc, _ = pp.run(["history"] + args, timeout=60)
                    self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                    self.assertIn(text, proc.stderr)


class ReportLines(unittest.TestCase):
    """report groups curves by the case's own axes (the transport's axis value, interface, memory),
    never by a transport's name: a made-up transport's axis gets its own lines too."""

    def test_a_made_up_transports_axis_values_are_separate_lines(self):
        try:
            from pairperf_tools import report
        except ImportError as e:  # report draws with matplotlib
            self.skipTest(f"python3-matplotlib is not installed here ({e})")

        def result(transport, tls, size, iface="lo", memory=("host", "host")):
            return {"status": "ok", "case": {"transport": transport, "test": "x_bw", "pattern": "stream_uni", "tls": tls,
                                              "iface": iface, "memory": list(memory), "size_bytes": size},
                    "bandwidth_Bps": {"receiver": 1e9}}
        doc = {"results": [result("warp", "fast;slow", 8), result("warp", "fast;slow", 64), result("warp", "shm", 8),
                           result("warp", "", 8), result("plain", "", 8), result("plain", "", 8, memory=("cuda", "host"))]}
        streams, _ = report.collect([("f.json", doc)])
        self.assertEqual(sorted(streams["warp x_bw"]), ["default lo", "fast;slow lo", "shm lo"])
        self.assertEqual([s for s, _ in streams["warp x_bw"]["fast;slow lo"]], [8, 64])
        # A transport without an axis value: lines by interface and memory only.
        self.assertEqual(sorted(streams["plain x_bw"]), ["lo", "lo cuda,host"])


class Report(unittest.TestCase):
    def test_history_series_are_drawn(self):
        with pp.tmpdir() as d:
            hist = os.path.join(d, "history.json")
            pp.run(["history", BASE, NEW, "--json", hist], timeout=60)
            out = os.path.join(d, "report")
            proc, _ = pp.run(["report", hist, "--out", out], timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            # 35 series (21 bandwidth, 14 latency p50/p99): the first 24, 3 a row, 5 x 3.6 in each.
            self.assertEqual(png_size(os.path.join(out, "history.png")), (1500, 2880))
            with open(os.path.join(out, "history.svg")) as f:
                svg = f.read()
            self.assertIn("pairperf history: 2 runs", svg)
            with open(os.path.join(out, "index.html")) as f:
                self.assertIn("history.svg", f.read())


    def test_pictures_from_fixtures(self):
        with pp.tmpdir() as d:
            cmp_json = os.path.join(d, "cmp.json")
            pp.run(["compare", BASE, NEW, "--json", cmp_json], timeout=60)
            out = os.path.join(d, "report")
            proc, took = pp.run(["report", BASE, PEER, cmp_json, "--out", out], timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            # Bandwidth: two panels (tcp tcp_bw, ucx tag_bw) in one row of 5 x 3.6 in at 100 dpi.
            self.assertEqual(png_size(os.path.join(out, "bandwidth.png")), (1000, 360))
            self.assertEqual(png_size(os.path.join(out, "latency.png")), (500, 360))
            # Compare: 35 metrics (21 bandwidth, 14 latency p50/p99), 0.42 in each plus 1.6 in, 10 in wide.
            self.assertEqual(png_size(os.path.join(out, "compare.png")), (1000, 1630))
            for name in ("bandwidth", "latency", "compare"):
                self.assertGreater(os.path.getsize(os.path.join(out, f"{name}.png")), 20000)
                root = ET.parse(os.path.join(out, f"{name}.svg")).getroot()
                self.assertTrue(root.tag.endswith("svg"))
            with open(os.path.join(out, "bandwidth.svg")) as f:
                svg = f.read()
            self.assertIn("ucx_perftest tls=posix,sysv,cma", svg)  # the peer tool's curve
            self.assertIn("GB/s = 1e9 B/s", svg)
            with open(os.path.join(out, "index.html")) as f:
                index = f.read()
            for needle in ("bandwidth.svg", "latency.svg", "compare.svg", "<td>fixture-a</td><td>fixture-b</td>",
                           "ucx 1.13.1", "2026-11-21T19:00:00Z"):
                self.assertIn(needle, index)
        self.assertLess(took, 60)

    def test_bad_input_exit_2(self):
        with pp.tmpdir() as d:
            proc, _ = pp.run(["report", os.path.join(d, "nothing.json"), "--out", d], timeout=60)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("no such file", proc.stderr)
            info = os.path.join(d, "info.json")
            with open(info, "w") as f:
                json.dump({"schema": "pairperf.info", "schema_version": "1.0.0"}, f)
            proc, _ = pp.run(["report", info, "--out", d], timeout=60)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("is not pairperf.result", proc.stderr)
            peer_only = os.path.join(d, "peer")
            os.makedirs(peer_only)
            proc, _ = pp.run(["report", PEER, "--out", peer_only], timeout=60)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("nothing to show", proc.stderr)
            proc, _ = pp.run(["report", "--out", d], timeout=60)
            self.assertEqual(proc.returncode, 2)


if __name__ == "__main__":
    pp.main()
