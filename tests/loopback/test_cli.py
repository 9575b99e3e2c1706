"""The command line: bad values get a clear message and exit code 2, never a crash or a hang."""
import json
import os
import platform
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp


class BadValues(unittest.TestCase):
    CASES = [
        (["--sizes", "0"], "must be at least 1 byte"),
        (["--sizes", "64:8"], "start is above end"),
        (["--sizes", "abc"], "expected a number"),
        (["--sizes", "4X"], "unknown suffix"),
        (["--sizes", "2G"], "1G limit"),
        (["-n", "1"], "at least 2"),
        (["--window", "0"], "--window must be"),
        (["--streams", "100"], "--streams must be 1 to 64"),
        (["--transport", "carrier-pigeon"], "unknown transport 'carrier-pigeon' (this build has: tcp"),
        (["--test", "nope_bw"], "unknown test 'nope_bw'"),
        (["--iface", "nosuch0"], "no usable interface named 'nosuch0'"),
        (["--duration", "fast"], "invalid duration"),
        (["--duration", "0"], "must be at least 1 ns"), (["--duration", "0.1ns"], "must be at least 1 ns"),
        (["--units", "MB"], "use GB or GiB"),
        (["--progress", "lazy"], "unknown progress mode"),
        (["--mem", "rocm"], "unknown memory type 'rocm'"),
        (["--timeout-case", "-1"], "invalid duration"),
        (["--sndbuf", "lots"], "invalid size"),
        (["--min-iterations", "1"], "at least 2"),
        (["--window", "70000"], "--window must be 1 to 65536"),
        (["host:99999"], "invalid port"),
        (["[::1"], "missing ']'"),
        (["--no-such-option"], "no-such-option"),
        (["-n", "many"], "many"),
        # A transport's own option with none of its cases selected (every case here is tcp).
        (["--tls", "tcp"], "--tls given, but no ucx case is selected"),
        (["--ucx", "RNDV_THRESH=1K"], "--ucx given, but no ucx case is selected"),
        (["--qps", "2"], "--qps given, but no verbs case is selected"),
    ]

    def test_each_bad_value_is_named_with_exit_code_2(self):
        for args, message in self.CASES:
            with self.subTest(args=args):
                proc, took = pp.run(["run"] + args + ["--no-json", "--transport", "tcp"] if args[0] != "--transport" else ["run"] + args + ["--no-json"], timeout=20)
                self.assertEqual(proc.returncode, 2, f"{args}: {proc.stdout}{proc.stderr}")
                self.assertIn(message, proc.stderr)
                self.assertNotIn("terminate called", proc.stderr)
                self.assertLess(took, 5)

    def test_no_subcommand_is_a_usage_error(self):
        proc, _ = pp.run([], timeout=10)
        self.assertEqual(proc.returncode, 2)

    def test_unknown_host_fails_cleanly(self):
        proc, _ = pp.run(["run", "no-such-host.invalid", "--no-json", "--timeout-connect", "2s"], timeout=30)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("cannot resolve 'no-such-host.invalid'", proc.stderr)


class Progress(unittest.TestCase):
    def test_progress_line_only_on_a_terminal(self):
        import pty
        import subprocess
        master, slave = pty.openpty()
        try:
            proc = subprocess.run([pp.BIN, "run", "--no-json", "--sizes", "8,64,512,4K", "-d", "0.5s", "--test",
                                   "tcp_lat"], stdout=subprocess.PIPE, stderr=slave, timeout=60)
            os.close(slave)
            slave = None
            seen = b""
            while True:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
        finally:
            if slave is not None:
                os.close(slave)
            os.close(master)
        self.assertEqual(proc.returncode, 0)
        print(seen.decode(errors="replace").replace("\r", "\n"), flush=True)
        # Each case's place, the time so far and the time left: at first the budgets alone (4 cases of
        # 1.5 x 0.5 s + 0.3 s set-up), then at the pace the finished cases kept.
        self.assertRegex(seen, rb"\[1/4 0%\] tcp tcp_lat 8 lo  \d+:\d\d elapsed, ~0:04 left")
        for i, size in ((2, b"64"), (3, b"512"), (4, b"4K")):
            self.assertRegex(seen, rb"\[%d/4 %d%%\] tcp tcp_lat %s lo  \d+:\d\d elapsed, ~\d+:\d\d left"
                             % (i, (i - 1) * 25, size))
        # Not on a pipe: stderr stays quiet.
        plain, _ = pp.run(["run", "--no-json", "--sizes", "8", "-n", "20", "--test", "tcp_lat"], timeout=60)
        self.assertEqual(plain.stderr, "")
        self.assertIn("tcp_lat", plain.stdout)


class Info(unittest.TestCase):
    def test_table_lists_loopback_transports_and_memory(self):
        proc, _ = pp.run(["info"], timeout=20)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stdout, r"\nlo\s+up\s+65536")
        self.assertIn("127.0.0.1/8", proc.stdout)
        self.assertIn("tcp_lat", proc.stdout)
        self.assertIn("rdma devices:", proc.stdout)
        self.assertIn("cuda", proc.stdout)

    def test_json_has_host_tool_and_env(self):
        env = dict(os.environ, UCX_TLS="tcp", NCCL_SOCKET_IFNAME="eth0", UNRELATED_VAR="x")
        proc, _ = pp.run(["info", "--json"], timeout=20, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual(pp.schema_errors_of(doc), [])
        self.assertIn("lo", [i["name"] for i in doc["host"]["interfaces"]])
        self.assertEqual(doc["tool"]["name"], "pairperf")
        self.assertIn("tcp", doc["tool"]["transports"])
        self.assertEqual(doc["env"], {"UCX_TLS": "tcp", "NCCL_SOCKET_IFNAME": "eth0"} | {
            k: v for k, v in os.environ.items() if k.startswith(("UCX_", "NCCL_", "GLOO_")) or k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")})
        self.assertEqual(doc["memory_types"]["host"], "available")

    def test_version(self):
        proc, _ = pp.run(["--version"], timeout=10)
        self.assertEqual(proc.returncode, 0)
        self.assertIn("pairperf", proc.stdout)


class LoopClock(unittest.TestCase):
    """The clock of the timed loops (core/clock.h): the TSC where the CPU's flags and the kernel say it
    is invariant, CLOCK_MONOTONIC otherwise or on request; each side records its own."""

    @staticmethod
    def tsc_usable():
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
        try:
            with open("/sys/devices/system/clocksource/clocksource0/available_clocksource") as f:
                listed = "tsc" in f.read().split()
        except OSError:
            listed = True
        return platform.machine() == "x86_64" and "constant_tsc" in flags and "nonstop_tsc" in flags and listed

    def run_tcp(self, env):
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "--transport", "tcp", "--sizes", "8", "-n", "2000", "--json", out, "--quiet"], timeout=60, env=env)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            doc = pp.load(out)
        self.assertEqual(pp.schema_errors_of(doc), [])
        return doc

    def test_each_side_records_its_clock_and_the_default_follows_the_cpu(self):
        doc = self.run_tcp(pp.clean_env())
        expected = "tsc" if self.tsc_usable() else "monotonic"
        for side in (doc["context"]["client"], doc["context"]["server"]):
            clock = side["loop_clock"]
            self.assertEqual(clock["source"], expected, clock)
            self.assertGreater(clock["read_ns"], 0)
            if expected == "tsc":
                self.assertGreater(clock["tsc_hz"], 1e8, clock)
        # The samples, converted from counter ticks, are plausible loopback round trips.
        p50 = doc["results"][0]["latency_s"]["p50"]
        self.assertTrue(1e-7 < p50 < 1e-3, p50)

    def test_monotonic_on_request_and_a_bad_value_is_a_usage_error(self):
        doc = self.run_tcp(pp.clean_env(PAIRPERF_CLOCK="monotonic"))
        for side in (doc["context"]["client"], doc["context"]["server"]):
            self.assertEqual(side["loop_clock"]["source"], "monotonic")
            self.assertEqual(side["loop_clock"]["why_not_tsc"], "PAIRPERF_CLOCK=monotonic")
        proc, _ = pp.run(["run", "--transport", "tcp", "--sizes", "8", "-n", "10", "--no-json"], timeout=30,
                         env=pp.clean_env(PAIRPERF_CLOCK="rdtsc"))
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("PAIRPERF_CLOCK=rdtsc is not one of auto, tsc, monotonic", proc.stderr)


if __name__ == "__main__":
    pp.main()
