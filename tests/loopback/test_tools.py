"""The Python tools as a user runs them (scripts/validate-results, scripts/compare-peers) and the
package they share (python/pairperf_tools): every document kind checked against its schema, a
results stream read as the document it streams, servers waited for by their listening socket."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_tools import compare_rows, documents, peer_runners, processes

SCRIPTS = os.path.join(pp.SOURCE_DIR, "scripts")
# The peer curves: the example in results/ and report's fixture. (tests/fixtures/report/{base,new}.json
# are results files of schema 1.0.0, kept old on purpose: compare must read them.)
EXAMPLES = [os.path.join(pp.SOURCE_DIR, "results", "examples", "ucx_perftest-curves.json"),
            os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "report", "peer.json")]
RESULTS_1_0 = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "report", "base.json")


def script(name, *args, timeout=120):
    return subprocess.run([os.path.join(SCRIPTS, name)] + list(args), capture_output=True, text=True, timeout=timeout)


def write(d, name, doc):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(doc if isinstance(doc, str) else json.dumps(doc))
    return path


class Schemas(unittest.TestCase):
    def test_every_document_kind_has_a_schema_that_is_itself_valid(self):
        for name in {**documents.SCHEMA_FILES, **documents.FOREIGN_FILES}:
            documents.validator(name)  # raises on a bad schema or a missing file
        listed = set(documents.SCHEMA_FILES.values()) | set(documents.FOREIGN_FILES.values())
        on_disk = {n for n in os.listdir(os.path.join(pp.SOURCE_DIR, "results")) if n.endswith("schema.json")}
        self.assertEqual(listed, on_disk)

    def test_examples_and_fixtures_are_valid(self):
        r = script("validate-results", *EXAMPLES)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"{len(EXAMPLES)} file(s) valid", r.stdout)

    def test_broken_documents_exit_1_naming_the_file_and_the_place(self):
        peer = pp.load(EXAMPLES[0])
        with pp.tmpdir() as d:
            no_points = json.loads(json.dumps(peer))
            no_points["series"][0]["points"] = []
            bad_target = {"schema": "pairperf.peer_ratios", "schema_version": "1.1.0", "suite": "tcp", "rounds": 1,
                          "where": "on loopback", "figures": {"rounds": 1, "ratios": {}},
                          "rows": [{"metric": "m", "pairperf": 1, "peer": "iperf3", "peer_value": 1, "ratio": 1,
                                    "target": "about 1", "meets": True}]}
            cases = {write(d, "points.json", no_points): "series/0/points",
                     write(d, "target.json", bad_target): "rows/0/target",
                     write(d, "other.json", {"schema": "someone.else"}): "not a pairperf document",
                     write(d, "text.json", "not json"): "not JSON",
                     write(d, "empty.jsonl", ""): "empty"}
            for path, where in cases.items():
                r = script("validate-results", path)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(path, r.stderr)
                self.assertIn(where, r.stderr)
        r = script("validate-results")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("usage: validate-results", r.stderr)

    def test_a_results_stream_reads_as_the_results_document(self):
        with pp.tmpdir() as d:
            stream, whole = os.path.join(d, "r.jsonl"), os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8,64", "-n", "100", "-q",
                              "--jsonl", stream, "--json", whole], timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            r = script("validate-results", stream, whole)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            streamed, written = documents.read(stream), documents.read(whole)
        self.assertEqual(streamed["schema"], "pairperf.result")
        self.assertEqual([x["case"] for x in streamed["results"]], [x["case"] for x in written["results"]])

    def test_tools_refuse_a_major_version_they_cannot_read(self):
        doc = pp.load(RESULTS_1_0)
        doc["schema_version"] = "2.0.0"
        with pp.tmpdir() as d:
            path = write(d, "v2.json", doc)
            with self.assertRaisesRegex(documents.DocumentError, r"v2\.json: pairperf.result schema version 2.0.0 is not 1.x"):
                documents.read_all([path], ("pairperf.result",))
            with self.assertRaisesRegex(documents.DocumentError, "is not pairperf.mesh"):
                documents.read_all([EXAMPLES[0]], ("pairperf.mesh",))


class Processes(unittest.TestCase):
    def test_a_server_is_waited_for_by_its_listening_socket(self):
        port = processes.free_port()
        self.assertFalse(processes.listening(port))
        code = f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); time.sleep(0.3); s.listen(); time.sleep(30)"
        start = time.monotonic()
        with processes.Background([sys.executable, "-c", code], port) as b:
            self.assertTrue(processes.listening(port))
            self.assertGreaterEqual(time.monotonic() - start, 0.3)
            pid = b.proc.pid
        self.assertIsNotNone(b.proc.returncode, f"pid {pid} still runs")

    def test_a_server_that_dies_first_is_an_error_naming_its_exit(self):
        port = processes.free_port()
        with self.assertRaisesRegex(RuntimeError, r"ended \(exit 3\) before it listened on port"):
            processes.Background(["sh", "-c", "exit 3"], port)


class ComparePeers(unittest.TestCase):
    def test_tcp_suite_prints_ratios_and_writes_a_valid_file(self):
        missing = [t for t in ("iperf3", "sockperf") if shutil.which(t) is None]
        if missing:
            self.skipTest(f"{', '.join(missing)} not installed (scripts/setup installs them)")
        with pp.tmpdir() as d:
            out = os.path.join(d, "peers.json")
            r = script("compare-peers", "--suite", "tcp", "--rounds", "2", "--seconds", "1", "--json", out,
                       "--pairperf", pp.BIN, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(pp.schema_errors(out), [])
            doc = pp.load(out)
        self.assertIn("pairperf vs peers on loopback", r.stdout)
        self.assertEqual([row["peer"] for row in doc["rows"]], ["iperf3", "sockperf", "sockperf"])
        for row in doc["rows"]:
            self.assertGreater(row["pairperf"], 0, row)
            self.assertGreater(row["peer_value"], 0, row)
            self.assertAlmostEqual(row["ratio"], row["pairperf"] / row["peer_value"], places=6)
            # Each round kept; the median is theirs, and each round's ratio pairs the same round.
            self.assertEqual(len(row["pairperf_rounds"]), 2)
            self.assertAlmostEqual(row["pairperf"], statistics.median(row["pairperf_rounds"]), places=6)
            self.assertEqual(row["round_ratios"], [m / t for m, t in zip(row["pairperf_rounds"], row["peer_rounds"])])
            # The table prints the rounds' range beside the median.
            low, high = min(row["pairperf_rounds"]), max(row["pairperf_rounds"])
            self.assertIn(f"{low:.3g}-{high:.3g}", r.stdout)

    def test_the_gloo_peers_measure_what_pairperf_measures(self):
        # The two peers of --suite gloo (the whole suite is a study outside CI: a few minutes), each
        # run once with small counts: the C++ loop with torch's calls on libgloo, and torch itself.
        loop = os.path.join(os.path.dirname(pp.BIN), "pairperf_gloo_loop")
        if not os.access(loop, os.X_OK):
            self.skipTest("built without gloo (libgloo-dev): no pairperf_gloo_loop")
        for test, key in (("lat", "latency_s"), ("bw", "bandwidth_Bps")):
            p = subprocess.run([loop, "--test", test, "--size", "4096", "--iterations", "200", "--warmup", "20",
                                "--timeout", "30"], capture_output=True, text=True, timeout=90)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            doc = json.loads(p.stdout)
            self.assertEqual((doc["tool"], doc["test"], doc["size_bytes"]), ("pairperf_gloo_loop", test, 4096))
            figure = doc[key]["p50"] if test == "lat" else doc[key]
            self.assertGreater(figure, 0, doc)
        bad = subprocess.run([loop, "--test", "nope"], capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 2, bad.stderr)
        why = peer_runners.gloo_unavailable(type("A", (), {"pairperf": pp.BIN})())
        if why:
            self.skipTest(why)
        env = dict(os.environ, PYTHONPATH=os.path.join(pp.SOURCE_DIR, "python"))
        p = subprocess.run([peer_runners.GLOO_TORCH_PYTHON, "-m", "pairperf_tools.torch_gloo_peer", "--test", "lat",
                            "--size", "64", "--iterations", "200", "--warmup", "20", "--timeout", "30"],
                           capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        doc = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(doc["tool"], "torch.distributed gloo")
        self.assertGreater(doc["latency_s"]["p50"], 0)
        self.assertLessEqual(doc["latency_s"]["p50"], doc["latency_s"]["p99"])

    def test_two_modes_are_told_apart(self):
        # This VM's TCP stream runs at about 2 or about 6 GB/s from one run to the next, whichever
        # tool runs: rounds of both tools in two levels are compared level by level.
        row = compare_rows.rounds_row("bw", [2.0e9, 6.1e9, 2.1e9, 6.3e9], "peer", [5.0e9, 1.9e9, 5.2e9, 2.0e9], 1e-9,
                                       ">= 1.0")
        low, high = compare_rows.modes(row)
        self.assertEqual((low["pairperf_rounds"], low["peer_rounds"], high["pairperf_rounds"], high["peer_rounds"]),
                         (2, 2, 2, 2))
        self.assertAlmostEqual(low["ratio"], 2.05 / 1.95)
        self.assertAlmostEqual(high["ratio"], 6.2 / 5.1)
        self.assertTrue(2.1 < low["split"] < 5.0)
        # One level (a spread under 1.5x): no modes. Too few rounds: none either.
        one = compare_rows.rounds_row("bw", [5.0e9, 5.6e9, 5.2e9], "peer", [4.8e9, 5.9e9, 5.1e9], 1e-9, ">= 1.0")
        self.assertIsNone(compare_rows.modes(one))
        self.assertIsNone(compare_rows.modes(compare_rows.rounds_row("bw", [2e9], "peer", [6e9], 1e-9, ">= 1.0")))
        # A level only one tool reached has no ratio.
        only = compare_rows.rounds_row("bw", [2.0e9, 2.1e9, 6.0e9], "peer", [2.0e9, 2.2e9, 2.1e9], 1e-9, ">= 1.0")
        self.assertIsNone(compare_rows.modes(only)[1]["ratio"])

    def test_the_ucx_gap_splits_into_what_pairperf_adds_and_what_the_peer_does(self):
        # Three tools in the same rounds: each round's pairperf / peer is exactly pairperf / bare
        # x bare / peer, and the medians are taken over the rounds' ratios.
        # The fourth round met two levels of the machine (the bare loop ran at about 2 GB/s, the
        # others at about 6): it compares levels, not tools, and is left out.
        mine, bare, theirs = [6.0, 2.0, 6.2, 6.1], [6.1, 2.1, 6.3, 2.0], [6.6, 2.0, 6.5, 6.0]
        b = compare_rows.breakdown("ucx tcp tag_bw 1 MiB", mine, bare, theirs)
        self.assertEqual((b["rounds"], b["same_level_rounds"]), (4, 3))
        self.assertAlmostEqual(b["pairperf_over_peer"], statistics.median([6.0 / 6.6, 1.0, 6.2 / 6.5]))
        self.assertAlmostEqual(b["pairperf_over_bare"], statistics.median([6.0 / 6.1, 2.0 / 2.1, 6.2 / 6.3]))
        self.assertAlmostEqual(b["bare_over_peer"], statistics.median([6.1 / 6.6, 2.1 / 2.0, 6.3 / 6.5]))
        text = compare_rows.breakdown_text(b)
        self.assertIn(f"pairperf / bare loop {b['pairperf_over_bare']:.3f}", text)
        self.assertIn(f"bare loop / perftest {b['bare_over_peer']:.3f}", text)

    def test_only_rounds_with_both_tools_at_one_level_pair_up(self):
        # Three levels (a shared-memory round trip at 0.08, 0.16 or 0.6 us): the parts fall in the
        # gaps of 1.5x or more between neighbours, and within a level the spread does not split it.
        self.assertEqual(len(compare_rows.level_bounds([0.080, 0.085, 0.150, 0.175, 0.6, 0.66])), 2)
        self.assertEqual(compare_rows.level_bounds([4.4, 5.0, 5.6, 6.6]), [])
        row = compare_rows.rounds_row("lat", [0.165, 0.170, 0.080, 0.160], "peer", [0.160, 0.600, 0.082, 0.165], 1e6, "<= 1.03")
        self.assertEqual(compare_rows.same_level_ratios(row), [0.165 / 0.160, 0.080 / 0.082, 0.160 / 0.165])
        doc = compare_rows.row_json(row, compare_rows.modes(row))
        self.assertAlmostEqual(doc["same_level_ratio"], statistics.median([0.165 / 0.160, 0.080 / 0.082, 0.160 / 0.165]))
        # No round at one level: no ratio, said as such.
        apart = compare_rows.rounds_row("bw", [6.0, 6.1], "peer", [2.0, 2.1], 1e-9, ">= 0.97")
        self.assertEqual(compare_rows.same_level_ratios(apart), [])
        self.assertIsNone(compare_rows.row_json(apart, None)["same_level_ratio"])

    def test_ofi_suite_compares_with_fi_pingpong_per_provider(self):
        if shutil.which("fi_pingpong") is None:
            self.skipTest("fi_pingpong not installed (libfabric-bin; scripts/setup installs it)")
        if not pp.has_transport("ofi"):
            self.skipTest("this pairperf was built without the libfabric (OFI) transport")
        with pp.tmpdir() as d:
            out = os.path.join(d, "peers.json")
            r = script("compare-peers", "--suite", "ofi", "--rounds", "1", "--json", out, "--pairperf", pp.BIN, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(pp.schema_errors(out), [])
            doc = pp.load(out)
        self.assertEqual([row["metric"].split(" ")[1] for row in doc["rows"]], ["tcp;ofi_rxm"] * 2 + ["shm"] * 2)
        for row in doc["rows"]:
            self.assertEqual(row["peer"], "fi_pingpong")
            self.assertGreater(row["pairperf"], 0, row)
            self.assertGreater(row["peer_value"], 0, row)
            self.assertAlmostEqual(row["ratio"], row["pairperf"] / row["peer_value"], places=6)

    def test_bad_arguments_exit_2(self):
        r = script("compare-peers", "--rounds", "0")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--rounds 1..20", r.stderr)
        r = script("compare-peers", "--suite", "ucx", "--ucx-library", "/nonexistent/lib", "--pairperf", pp.BIN)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--ucx-library /nonexistent/lib: no libucp.so.0 there", r.stderr)

    def test_the_ucx_rows_run_both_tools_on_one_ucx(self):
        # What compare-peers checks before its UCX rows: the UCX pairperf loads and the one
        # ucx_perftest runs on, by version and file; on the system's and on the 1.22 wheel's.
        if shutil.which("ucx_perftest") is None:
            self.skipTest("ucx_perftest is not installed (ucx-utils; scripts/setup installs it)")
        def put_row():
            # The put_bw row's two runs, briefly: both tools' figures parse and are positive.
            ours = peer_runners.pairperf_ucx(pp.BIN, "put_bw", "1M", 50, 5, ["posix,sysv,cma"])[0]["bandwidth_Bps"]
            theirs = peer_runners.ucx_perftest("ucp_put_bw", 1 << 20, 50, 5, "posix,sysv,cma")["bandwidth_Bps"]
            self.assertGreater(ours.get("receiver") or ours["sender"], 0)
            self.assertGreater(theirs, 0)

        try:
            seen = [peer_runners.ucx_versions(pp.BIN)]
            put_row()
            wheel = os.path.join(pp.SOURCE_DIR, ".deps", "ucx-1.22", "libucx", "lib")
            if os.path.exists(os.path.join(wheel, "libucp.so.0")):
                peer_runners.use_ucx(wheel)
                seen.append(peer_runners.ucx_versions(pp.BIN))
                put_row()
            else:
                print(f"the 1.22 half is left out: no libucx-cu13 wheel in {wheel} (scripts/setup installs it)")
        finally:
            peer_runners.UCX_INSTALL["lib"] = None
        print(seen, flush=True)
        for versions in seen:
            self.assertEqual(versions["pairperf"], versions["ucx_perftest"], versions)
        if len(seen) == 2:
            self.assertEqual(seen[1]["pairperf"][0], "1.22.0", seen)
            self.assertTrue(seen[1]["pairperf"][1].startswith(wheel), seen)


if __name__ == "__main__":
    pp.main()


BARE = os.path.join(os.path.dirname(pp.BIN), "pairperf_ucx_bare")


class BareUcxLoop(unittest.TestCase):
    """pairperf_ucx_bare, the third point of compare-peers' UCX rows, as compare-peers runs it."""

    def setUp(self):
        if not os.access(BARE, os.X_OK):
            self.skipTest(f"no {BARE}: this build has no UCX")

    def bare(self, *args, tls="tcp"):
        env = dict(os.environ, UCX_TLS=tls, UCX_NET_DEVICES="lo")
        return subprocess.run([BARE] + list(args), capture_output=True, text=True, timeout=120, env=env)

    def test_latency_and_bandwidth_are_measured_as_ucx_perftest_measures_them(self):
        cpus = sorted(os.sched_getaffinity(0))
        pin = ["--cpu", f"{cpus[0]},{cpus[1]}"] if len(cpus) >= 2 else []  # as compare-peers pins
        r = self.bare("--test", "tag_lat", "--size", "8", "--iterations", "2000", "--warmup", "200", *pin)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lat = json.loads(r.stdout)
        self.assertEqual((lat["tool"], lat["test"], lat["size_bytes"], lat["iterations"]), ("pairperf_ucx_bare", "tag_lat", 8, 2000))
        # One-way figures of a loopback round trip: above 50 ns, under a millisecond.
        for key in ("p50", "mean"):
            self.assertTrue(50e-9 < lat["latency_s"][key] < 1e-3, lat)
        r = self.bare("--test", "tag_bw", "--size", "65536", "--iterations", "300", "--warmup", "30", "--window", "8")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        bw = json.loads(r.stdout)
        self.assertEqual((bw["test"], bw["window"]), ("tag_bw", 8))
        # Both views of 300 x 64 KiB: above 1 MB/s, and within 2x of each other (the sender's span
        # ends at its flush, the receiver's at its last arrival).
        for key in ("receiver_Bps", "sender_Bps"):
            self.assertGreater(bw[key], 1e6, bw)
        self.assertLess(max(bw["receiver_Bps"], bw["sender_Bps"]) / min(bw["receiver_Bps"], bw["sender_Bps"]), 2.0, bw)

    def test_bad_input_is_a_usage_error_and_a_failed_library_call_exit_1(self):
        for args in (["--test", "put_bw"], ["--cpu", "0"], ["--size", "0"], ["--window", "0"]):
            r = self.bare(*args)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stdout}{r.stderr}")
            self.assertIn("Run with --help", r.stderr)
        r = self.bare("--cpu", f"0,{os.cpu_count() + 64}", "--iterations", "10")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("cannot pin to CPU", r.stderr)
        self.assertEqual(r.stdout, "")
        # A transport this machine does not have: UCX refuses, and both processes end.
        r = self.bare("--iterations", "10", tls="no_such_transport")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"pairperf_ucx_bare: ucp_\w+: ")
        self.assertNotIn('"tool"', r.stdout)  # no result; UCX's own log lines go to stdout

    def test_the_other_side_ending_mid_run_ends_this_one_at_once(self):
        # The client killed in the middle of a long stream: the server does not wait for its
        # deadline (240 s as compare-peers runs it) but sees the pipe close and says so.
        env = dict(os.environ, UCX_TLS="tcp", UCX_NET_DEVICES="lo")
        p = subprocess.Popen([BARE, "--test", "tag_bw", "--size", "65536", "--iterations", str(1 << 30), "--warmup", "10",
                              "--timeout", "240"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            children = []
            for _ in range(200):  # its forked client, by pid: the one child of the process started here
                with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                    children = f.read().split()
                if children:
                    break
                time.sleep(0.05)
            self.assertEqual(len(children), 1, "the bare loop forked no client within 10 s")
            time.sleep(0.5)  # into the timed stream
            killed_at = time.monotonic()
            os.kill(int(children[0]), 9)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        waited = time.monotonic() - killed_at
        self.assertEqual(p.returncode, 1, out + err)
        self.assertRegex(err, r"pairperf_ucx_bare: (the other process ended|pipe: the other side ended)")
        self.assertLess(waited, 30, f"the server took {waited:.1f} s to notice")
