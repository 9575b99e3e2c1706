"""The exit-code contract (docs/exit-codes.md): 0 held, 1 failed, 2 usage, 3 missed,
4 inconclusive. Each test pins one path that used to exit 0 while nothing was judged, or used a
code of another meaning."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import pairperf_testlib as pp

def valid(path):
    errors = pp.schema_errors(path)
    return not errors, "\n".join(errors)


class RunExitCodes(unittest.TestCase):
    def test_expect_on_a_skipped_case_is_inconclusive(self):
        # Before: the cuda case was skipped and the run exited 0 with its --expect "passed".
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_bw", "--mem", "cuda,cuda", "--sizes", "1M",
                              "--expect", "transport=cuda_ipc", "--json", out], timeout=60)
            self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
            self.assertIn("--expect transport=cuda_ipc: judged no case", proc.stderr)
            self.assertIn("skipped", proc.stderr)
            doc = pp.load(out)
            self.assertEqual(doc["outcome"]["exit_code"], 4)
            self.assertEqual(doc["outcome"]["verdict"], "inconclusive")
            self.assertEqual(doc["results"][0]["unjudged"]["expect"], ["transport=cuda_ipc"])
            ok, why = valid(out)
            self.assertTrue(ok, why)

    def test_all_cases_skipped_is_inconclusive(self):
        proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--mem", "cuda,cuda", "--sizes", "8", "--no-json"], timeout=60)
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
        self.assertIn("nothing was measured: all 1 case(s) were skipped", proc.stderr)

    def test_expect_judged_and_held_is_zero_and_missed_is_three(self):
        # --noise-threshold 100: never noisy, so a busy CI host cannot turn the miss into a 4.
        quiet = ["--noise-threshold", "100"]
        proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "-n", "200", "--no-json",
                          "--expect", "lat<=10s@8"] + quiet, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("exit 0 (held)", proc.stdout)
        proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "-n", "200", "--no-json",
                          "--expect", "lat<=1ns@8"] + quiet, timeout=60)
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)

    def test_unreachable_server_still_writes_a_valid_file_and_the_error_comes_first(self):
        port = pp.free_port()
        with pp.tmpdir() as d:
            out = os.path.join(d, "f.json")
            proc, _ = pp.run(["run", f"127.0.0.1:{port}", "--json", out, "--timeout-connect", "2s"], timeout=30)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            ok, why = valid(out)
            self.assertTrue(ok, why)
            doc = pp.load(out)
            self.assertEqual(doc["outcome"]["verdict"], "failed")
            self.assertIn("ECONNREFUSED", doc["outcome"]["reasons"][0])
            for key in ("tool", "argv", "client", "config", "server_address"):
                self.assertIn(key, doc["context"])
            # The error is said before the summary line, never after it.
            self.assertNotIn("0 ok, 0 skipped", proc.stderr)
            self.assertIn("exit 1 (failed)", proc.stdout)

    def test_json_dash_is_stdout(self):
        with pp.tmpdir() as d:
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "-n", "100", "--json", "-"],
                             timeout=60, cwd=d)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "-")), "wrote a file named '-'")
            doc = json.loads(proc.stdout)  # stdout holds only the document; the table is on stderr
            self.assertEqual(doc["schema"], "pairperf.result")
            self.assertIn("1 ok, 0 skipped, 0 not ok", proc.stderr)
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "-n", "100", "--no-json",
                              "--jsonl", "-", "-q"], timeout=60, cwd=d)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "-")))
            lines = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
            self.assertEqual(lines[0]["schema"], "pairperf.result")
            self.assertEqual(lines[1]["status"], "ok")

    def test_a_descheduled_run_is_marked_noisy_and_its_misses_not_judged(self):
        # Another process busy on the client's CPU: the client waits for it about half the time, the
        # host-noise twin of "4.00 ms one-way during a compile, called fast path". The host's
        # accounts name it another process's, so the case is noisy and its miss not judged.
        hog = subprocess.Popen(["taskset", "-c", "0", sys.executable, "-c",
                                "import time\nend = time.time() + 60\nwhile time.time() < end: pass"])
        try:
            with pp.tmpdir() as d:
                out = os.path.join(d, "n.json")
                proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "--cpu", "0,0",
                                  "--expect", "lat<=1ns", "--json", out], timeout=60)
                self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
                # The hog shares CPU 0 with both sides: which of them the scheduler made wait
                # longer varies from run to run (the line names the sides over the threshold).
                self.assertRegex(proc.stdout, r"noisy: the (client|server) was descheduled")
                self.assertIn("other processes ran", proc.stdout)
                self.assertIn("1 noisy", proc.stdout)
                doc = pp.load(out)
                noise = doc["results"][0]["host_noise"]
                self.assertTrue(noise["noisy"], noise)
                self.assertEqual(noise["contention"], "host", noise)
                self.assertGreater(max(noise["client"]["descheduled_share"], noise["server"]["descheduled_share"]),
                                   0.2, noise)
                self.assertEqual(noise["client"]["cpus_allowed"], "0")
                self.assertEqual(noise["server"]["cpus_allowed"], "0")
                self.assertEqual(doc["outcome"]["counts"]["noisy"], 1)
                ok, why = valid(out)
                self.assertTrue(ok, why)
        finally:
            hog.kill()
            hog.wait()
        # Client and server alone on one CPU: they wait for each other, which is this run's own
        # contention, not the host's: shown, not noisy, and the miss is judged (3). A CI host busy
        # with other tests may add its own load: then noisy (4), naming the other processes.
        with pp.tmpdir() as d:
            out = os.path.join(d, "s.json")
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "--cpu", "0,0",
                              "--expect", "lat<=1ns", "--json", out], timeout=60)
            noise = pp.load(out)["results"][0]["host_noise"]
            print(f"client and server on one CPU: exit {proc.returncode}, contention {noise.get('contention')}, "
                  f"noisy {noise['noisy']}", flush=True)
            if proc.returncode == 3:
                self.assertEqual(noise["contention"], "self", noise)
                self.assertFalse(noise["noisy"], noise)
                self.assertIn("own contention, not noise", proc.stdout)
                self.assertIn("this run's own threads", noise["self_why"])
            else:
                self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
                self.assertIn("other processes ran", noise["why"])
        # Apart (one CPU each where there are two), the same case is quiet enough to judge.
        if os.cpu_count() >= 2:
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "--cpu", "0,1", "--no-json",
                              "--expect", "lat<=10s"], timeout=60)
            self.assertIn(proc.returncode, (0, 4), proc.stdout + proc.stderr)
            if proc.returncode == 4:  # a busy CI host: then it must say why
                self.assertIn("noisy", proc.stdout)

    def test_bad_cpu_is_a_usage_error(self):
        for bad in ("x", "99999", "0,x"):
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "--no-json", "--cpu", bad], timeout=30)
            self.assertEqual(proc.returncode, 2, bad + proc.stderr)
            self.assertIn("--cpu", proc.stderr)

    def test_help_states_the_contract(self):
        for cmd in ("run", "compare", "doctor", "mesh", "export", "explain"):
            proc, _ = pp.run([cmd, "--help"], timeout=30)
            self.assertEqual(proc.returncode, 0)
            self.assertIn("4 inconclusive", proc.stdout, cmd)


class ExplainCodes(unittest.TestCase):
    """explain's reading of the contract: 0 nothing failed, 3 failures explained, 4 failure-looking
    lines no signature explains, 2 unreadable input (the fixtures are real programs' logs)."""

    def test_each_code(self):
        rec = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "explain", "recorded")
        for args, code in ((["ucx-healthy/nodea-client.log"], 0), (["fi-refused/nodea-client.log"], 3),
                           (["-"], 4), (["no-such.log"], 2)):
            proc = subprocess.run([pp.BIN, "explain"] + [a if a == "-" else os.path.join(rec, a) for a in args],
                                  input="mystery ERROR: the widget failed\n", capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, code, f"{args}: {proc.stdout}{proc.stderr}")


def halve_bandwidth(src, dst):
    doc = pp.load(src)
    for r in doc["results"]:
        if r.get("bandwidth_Bps", {}).get("receiver"):
            r["bandwidth_Bps"]["receiver"] /= 2
    with open(dst, "w") as f:
        json.dump(doc, f)


class CompareAndExportExitCodes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = pp.tmpdir()
        d = cls.dir.__enter__()
        cls.a = os.path.join(d, "a.json")
        proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_bw", "--sizes", "64K", "-d", "0.05s", "-q", "--json", cls.a], timeout=60)
        assert proc.returncode == 0, proc.stderr
        cls.half = os.path.join(d, "half.json")
        halve_bandwidth(cls.a, cls.half)

    @classmethod
    def tearDownClass(cls):
        cls.dir.__exit__(None, None, None)

    def test_half_the_bandwidth_against_one_baseline_run_is_inconclusive_in_the_default_output(self):
        # One baseline run shows no spread between runs: the halved bandwidth cannot be judged, and the
        # default output says so and what it needs (before: "0 regression(s)", exit 0).
        proc, _ = pp.run(["compare", self.a, self.half], timeout=60)
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
        self.assertIn("inconclusive (", proc.stdout)  # "noisy: ...; " comes first on a busy host
        self.assertIn("1 baseline run: the spread between runs is unknown", proc.stdout)
        self.assertIn("-50.0%", proc.stdout)
        self.assertIn("exit 4 (inconclusive)", proc.stdout)

    def test_no_case_in_common_is_inconclusive(self):
        with pp.tmpdir() as d:
            other = os.path.join(d, "other.json")
            proc, _ = pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "-n", "100", "-q", "--json", other], timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            proc, _ = pp.run(["compare", self.a, other, "--json", "-"], timeout=60)
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual(doc["verdict"], "inconclusive")
        self.assertIn("no case in common", doc["inconclusive_reason"])

    def test_export_dash_is_stdout_and_files_pool(self):
        with pp.tmpdir() as d:
            proc, _ = pp.run(["export", self.a, self.half, "--gab-bigger", "-"], timeout=60, cwd=d)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "-")), "wrote a file named '-'")
        entries = json.loads(proc.stdout)
        self.assertEqual(len(entries), 1)  # one case, both files: pooled, not the last file's value
        full = pp.load(self.a)["results"][0]["bandwidth_Bps"]["receiver"]
        self.assertAlmostEqual(entries[0]["value"], full * 0.75 * 1e-9, places=6)
        self.assertIn("pooled from 2 results", entries[0]["extra"])
        with pp.tmpdir() as d:
            proc, _ = pp.run(["export", self.a, "--bmf", "-"], timeout=60, cwd=d)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "-")), "wrote a file named '-'")
        self.assertEqual(len(json.loads(proc.stdout)), 1)

    def test_export_of_nothing_measured_is_inconclusive(self):
        with pp.tmpdir() as d:
            skipped = os.path.join(d, "s.json")
            pp.run(["run", "-t", "tcp", "--test", "tcp_lat", "--mem", "cuda,cuda", "--sizes", "8", "-q", "--json", skipped], timeout=60)
            proc, _ = pp.run(["export", skipped, "--bmf", os.path.join(d, "b.json")], timeout=60)
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
        self.assertIn("no measured (ok) case", proc.stderr)


if __name__ == "__main__":
    pp.main()
