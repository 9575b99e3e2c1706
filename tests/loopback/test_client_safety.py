"""The client side of a run that must not lose work: results paths that cannot be written, time
budgets under contention, a disk that is or becomes full, and a case whose transport library dies
or hangs (the sweep goes on). A run stopped by a signal: test_client_signals.py."""
import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_testlib import finished_in_stream, lines_in, pairperf_children, wait_for


class ResultsPaths(unittest.TestCase):
    def run_with_json(self, path):
        with pp.Server() as s:
            return pp.run(["run", s.address, "--json", path, "--test", "tcp_lat", "--sizes", "8", "-n", "10"], timeout=60)

    def test_a_missing_folder_is_an_error_before_any_case_and_is_not_made(self):
        with pp.tmpdir() as d:
            path = os.path.join(d, "no", "such", "r.json")
            (proc, took) = self.run_with_json(path)
            self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
            self.assertIn("does not exist", proc.stderr)
            self.assertNotIn("tcp_lat", proc.stdout)  # nothing ran
            self.assertFalse(os.path.exists(os.path.join(d, "no")))

    def test_a_device_or_folder_is_never_replaced(self):
        with pp.tmpdir() as d:
            proc, _ = self.run_with_json(d)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("is not a regular file", proc.stderr)
        if os.geteuid() == 0:  # as root, replacing /dev/null would succeed: it must be refused
            proc, _ = self.run_with_json("/dev/null")
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))

    @unittest.skipIf(os.geteuid() == 0, "root writes into read-only folders")
    def test_an_unwritable_folder_is_an_error_before_any_case(self):
        with pp.tmpdir() as d:
            os.chmod(d, 0o500)
            proc, _ = self.run_with_json(os.path.join(d, "r.json"))
            os.chmod(d, 0o700)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("is not writable", proc.stderr)

    def test_a_folder_that_disappears_mid_sweep_costs_the_path_not_the_results(self):
        with pp.tmpdir() as d:
            folder = os.path.join(d, "out")
            os.mkdir(folder)
            lines = os.path.join(d, "r.jsonl")
            client = pp.start(["run", "--json", os.path.join(folder, "r.json"), "--jsonl", lines, "--transport", "tcp",
                               "--test", "tcp_lat", "--sizes", "8,64,512", "--duration", "0.2s"],
                              env=dict(os.environ, TMPDIR=d))
            try:
                wait_for(lambda: len(finished_in_stream(lines)) >= 1, 30, "the first case")
                shutil.rmtree(folder)
                client.wait(timeout=60)
            finally:
                output = pp.stop(client)
            rescued = [n for n in os.listdir(d) if n.startswith("pairperf-results-")]
            self.assertEqual(client.returncode, 1, output)
            self.assertEqual(len(rescued), 1, output)
            path = os.path.join(d, rescued[0])
            self.assertIn(f"the results are in {path} instead", output)
            self.assertEqual(pp.schema_errors(path), [])
            self.assertEqual([r["status"] for r in pp.load(path)["results"]], ["ok"] * 3)
            self.assertFalse(os.path.exists(folder))

    def test_no_temporary_file_is_left_behind(self):
        with pp.tmpdir() as d:
            path = os.path.join(d, "r.json")
            proc, _ = self.run_with_json(path)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(os.listdir(d), ["r.json"])
            self.assertEqual(json.load(open(path))["outcome"]["verdict"], "held")


class Budget(unittest.TestCase):
    def test_contention_costs_time_not_a_case_timeout(self):
        # Two busy loops on this host's CPUs: each round trip waits for a CPU. The warm-up alone
        # missed that and a 0.3 s case timed out; the pilot phase sees it.
        hogs = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"])
                for _ in range(os.cpu_count() or 2)]
        try:
            with pp.Server() as s, pp.tmpdir() as d:
                out = os.path.join(d, "r.json")
                proc, took = pp.run(["run", s.address, "--json", out, "--transport", "tcp", "--test", "tcp_lat",
                                     "--sizes", "8,64", "--duration", "0.3s", "--timeout-case", "2s"], timeout=120)
                doc = pp.load(out)
        finally:
            for h in hogs:
                h.kill()
                h.wait()
        self.assertEqual([r["status"] for r in doc["results"]], ["ok", "ok"], proc.stdout + proc.stderr)
        self.assertLess(took, 20)


    def test_a_ping_pong_measures_for_its_budget_and_a_stream_near_it(self):
        # A two-sided ping-pong is timed (it ends at the first round trip past the budget); the
        # others run counts in phases sized by the rate measured so far.
        with pp.Server() as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", s.address, "--json", out, "--transport", "tcp", "--test", "tcp_lat,tcp_bw",
                              "--sizes", "64", "--duration", "0.3s", "--validate"], timeout=60)
            doc = pp.load(out)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr + s.log)
        lat, bw = doc["results"]
        self.assertGreaterEqual(lat["elapsed_s"], 0.3, lat)
        # It ends at the first round trip past the budget: at most the slowest round trip it saw
        # (one-way max x 2; a descheduled side makes one long, 0.34 s seen with two CPU hogs) later.
        self.assertLess(lat["elapsed_s"], 0.3 + 2 * lat["latency_s"]["max"] + 0.05, lat)
        self.assertGreater(lat["iterations"], 10, lat)
        self.assertEqual(lat["validation"]["corrupt_bytes"], 0)
        self.assertGreater(bw["iterations"], 10, bw)
        self.assertGreater(bw["elapsed_s"], 0.1, bw)
        self.assertLess(bw["elapsed_s"], 1.5, bw)


    def test_a_timed_ping_pong_ends_promptly_where_polls_sleep(self):
        # --progress block: each empty poll may sleep 10 ms in the kernel, so the server checks the
        # clock (and whether the client stopped) on every one, not every 1024th (10 s late).
        with pp.Server() as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, took = pp.run(["run", s.address, "--json", out, "--transport", "tcp", "--test", "tcp_lat",
                                 "--sizes", "8,64", "--duration", "0.3s", "--progress", "block"], timeout=60)
            doc = pp.load(out)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr + s.log)
        self.assertEqual([r["status"] for r in doc["results"]], ["ok", "ok"])
        for r in doc["results"]:
            self.assertGreaterEqual(r["elapsed_s"], 0.3, r)
        self.assertLess(took, 8, proc.stdout)


@unittest.skipIf(os.geteuid() != 0, "needs root to mount a small tmpfs")
class FullDisk(unittest.TestCase):
    def small_disk(self, size):
        """A tmpfs of `size` under a new folder (root only): returns (folder, unmount)."""
        d = pp.tmpdir()
        mnt = os.path.join(d.name, "small")
        os.mkdir(mnt)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt], check=True, timeout=20)

        def unmount():
            subprocess.run(["umount", mnt], timeout=20)
            d.cleanup()
        return mnt, unmount

    def test_a_disk_too_full_for_the_results_is_an_error_before_the_first_case(self):
        mnt, unmount = self.small_disk("8k")
        try:
            with open(os.path.join(mnt, "r.json"), "w") as f:
                f.write("previous\n")
            with pp.Server() as s:
                proc, _ = pp.run(["run", s.address, "--json", os.path.join(mnt, "r.json"), "--test", "tcp_lat",
                                  "--sizes", "8", "-n", "10"], timeout=60)
            left = sorted(os.listdir(mnt))
            with open(os.path.join(mnt, "r.json")) as f:
                kept = f.read()
        finally:
            unmount()
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("no room for the results", proc.stderr)
        self.assertRegex(proc.stderr, r"its filesystem has [0-9.]+ (B|KiB) free, and they need about [0-9.]+ KiB")
        self.assertNotIn("tcp_lat", proc.stdout)  # before the first case
        self.assertEqual(left, ["r.json"])  # no temporary file
        self.assertEqual(kept, "previous\n")  # the previous file untouched

    def test_a_disk_that_fills_mid_sweep_keeps_every_case_in_the_results_file(self):
        """Another writer fills the disk after the first two cases: the JSON lines stream stops at
        its last whole line with the reason, the sweep measures on, and the results file (its room
        taken at the start) holds every case; exit 1, the stream's loss named in the outcome."""
        mnt, unmount = self.small_disk("1m")
        try:
            out, lines = os.path.join(mnt, "r.json"), os.path.join(mnt, "r.jsonl")
            client = pp.start(["run", "--json", out, "--jsonl", lines, "--transport", "tcp", "--test", "tcp_lat",
                               "--sizes", "8,64,512,4K", "--duration", "0.2s"])
            try:
                wait_for(lambda: len(finished_in_stream(lines)) >= 2, 30, "two cases")
                fd = os.open(os.path.join(mnt, "filler"), os.O_WRONLY | os.O_CREAT)
                try:
                    for _ in range(1024):  # at most 4 MiB into a 1 MiB disk
                        os.write(fd, b"x" * 4096)
                except OSError as e:
                    self.assertEqual(e.errno, errno.ENOSPC)
                finally:
                    os.close(fd)
                client.wait(timeout=60)
            finally:
                output = pp.stop(client)
            doc = pp.load(out)
            errors = pp.schema_errors(out)
            with open(lines) as f:
                stream = f.read()
            left = sorted(os.listdir(mnt))
        finally:
            unmount()
        self.assertEqual(client.returncode, 1, output)
        self.assertEqual(errors, [])
        self.assertEqual([r["status"] for r in doc["results"]], ["ok"] * 4, output)
        self.assertEqual(doc["outcome"]["exit_code"], 1)
        self.assertTrue(any("r.jsonl: No space left on device" in r for r in doc["outcome"]["reasons"]), doc["outcome"])
        self.assertIn("that output stops here", output)
        self.assertTrue(stream.endswith("\n"), stream[-200:])
        for line in stream.splitlines():
            json.loads(line)  # every line whole
        self.assertEqual(left, ["filler", "r.json", "r.jsonl"])


class Worker(unittest.TestCase):
    def test_a_killed_client_leaves_no_case_process_behind(self):
        # The case's process dies with the client: left behind it kept measuring (and holding the
        # server's session) until its case timeout.
        with pp.Server() as s:
            client = pp.start(["run", s.address, "--no-json", "--transport", "tcp", "--test", "tcp_bw",
                               "--sizes", "64K", "-n", "2000000", "--timeout-case", "60s"])
            try:
                worker = wait_for(lambda: pairperf_children(client.pid), 30, "the case's process")[0]
                client.kill()
                client.wait(timeout=10)
                wait_for(lambda: not os.path.exists(f"/proc/{worker}") or
                         open(f"/proc/{worker}/stat").read().split()[2] == "Z", 2, "the case's process ending")
            finally:
                pp.stop(client)

    def test_a_case_whose_process_aborts_is_an_error_and_the_sweep_goes_on(self):
        # What a UCX assertion does to the process running the case: SIGABRT, here from outside.
        # The case that was running when it came (by the JSON Lines written so far) is the error.
        with pp.Server() as s, pp.tmpdir() as d:
            out, lines = os.path.join(d, "r.json"), os.path.join(d, "r.jsonl")
            client = pp.start(["run", s.address, "--json", out, "--jsonl", lines, "--transport", "tcp", "--test", "tcp_lat",
                               "--sizes", "8,64,1K", "--duration", "2s"])
            try:
                worker = wait_for(lambda: pairperf_children(client.pid), 30, "the case's process")[0]
                time.sleep(0.3)  # well inside its 2 s
                running = lines_in(lines) - 1 if os.path.exists(lines) else 0  # cases already written
                os.kill(worker, signal.SIGABRT)
                client.wait(timeout=90)
            finally:
                output = pp.stop(client)
            doc = pp.load(out)
        self.assertEqual(client.returncode, 1, output)
        statuses = [r["status"] for r in doc["results"]]
        expected = ["ok"] * 3
        expected[running] = "error"
        self.assertEqual(statuses, expected, f"killed {worker} during case {running + 1}\n{output}")
        self.assertIn("the case's process ended by signal SIGABRT", doc["results"][running]["message"])
        # The cases before it shared the worker it died in; the next one started a fresh one.
        workers = [r.get("worker_case") for r in doc["results"]]
        self.assertEqual(workers, list(range(1, running + 2)) + list(range(1, 3 - running)), output)

    def test_a_library_call_that_never_returns_is_ended_soon_after_the_phase_deadline(self):
        # To the supervisor a stopped case process is a library call that never returns (seen under
        # load: libfabric shm once its peer was killed): no stage ends. Each part of a phase has its
        # own bound (request 1+3+1 s, run 3 s, results 3+1 s here), so the case is ended within a
        # bound and the 2 s grace period of the stop; the old single bound for a phase (3 x 3 +
        # 2 x 1 + 2 x 1 = 13 s) ended it 12 s and more after.
        with pp.Server() as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            client = pp.start(["run", s.address, "--json", out, "--transport", "tcp", "--test", "tcp_bw",
                               "--sizes", "64K", "-n", "100000000", "--timeout-case", "3s",
                               "--timeout-connect", "1s", "--timeout-handshake", "1s"])
            try:
                worker = wait_for(lambda: pairperf_children(client.pid), 30, "the case's process")[0]
                time.sleep(0.8)  # set up and measuring: tcp sets up in milliseconds
                os.kill(worker, signal.SIGSTOP)
                stopped = time.monotonic()
                client.wait(timeout=60)
                took = time.monotonic() - stopped
            finally:
                output = pp.stop(client)
            doc = pp.load(out)
        self.assertEqual(client.returncode, 1, output)
        r = doc["results"][0]
        seen = f"ended {took:.2f} s after the stop: {r.get('message')}\n{output}"
        self.assertIn("did not end within its bound", r["message"], seen)
        self.assertIn("case 1 ", r["message"], seen)
        self.assertEqual(r["error_code"], "ETIMEDOUT", seen)
        self.assertLess(took, 7.5, seen)

    def test_a_case_run_while_the_supervisor_cannot_read_still_counts_its_whole_wall_time(self):
        # The supervisor timed a case from when it read the worker's "start" line; with both CPUs
        # busy it may read it late (a CI host: a case's wall time came out shorter than its
        # measurement). Stopped here through the whole second case, it reads that case's start
        # and result together: the wall time must come from the worker's clock.
        with pp.Server() as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            client = pp.start(["run", s.address, "--json", out, "-t", "tcp", "--test", "tcp_lat",
                               "--sizes", "8,64", "--duration", "0.4s"])
            try:
                wait_for(lambda: pairperf_children(client.pid), 30, "the case's process")
                time.sleep(0.2)  # the first case is under way
                os.kill(client.pid, signal.SIGSTOP)
                time.sleep(2.5)  # the rest of the first case and all of the second (0.4 s each)
                os.kill(client.pid, signal.SIGCONT)
                client.wait(timeout=60)
            finally:
                output = pp.stop(client)
            doc = pp.load(out)
        self.assertEqual(client.returncode, 0, output)
        seen = [(r["case"]["size_bytes"], r["status"], r["elapsed_s"], r["wall_s"]) for r in doc["results"]]
        self.assertEqual([x[:2] for x in seen], [(8, "ok"), (64, "ok")], seen)
        for size, _, elapsed, wall in seen:
            self.assertGreaterEqual(wall, elapsed, seen)
            self.assertGreater(elapsed, 0.3, seen)

    def test_cases_of_one_transport_share_a_worker_until_one_does_not_end_ok(self):
        # A library loads once per worker, not once per case (libfabric: 0.3 s). The server
        # refuses the 4 MiB cases (their buffers exceed its --max-case-memory): an error, after
        # which the next case starts in a fresh worker.
        with pp.Server("--max-case-memory", "1M") as s:
            proc, _ = pp.run(["run", s.address, "--json", "-", "-t", "tcp", "--test", "tcp_lat,tcp_bw",
                              "--sizes", "8,4M", "-n", "100"], timeout=120)
            doc = json.loads(proc.stdout[proc.stdout.index("{"):])
            seen = [(r["case"]["test"], r["status"], r.get("worker_case")) for r in doc["results"]]
            self.assertEqual(seen, [("tcp_lat", "ok", 1), ("tcp_lat", "error", 2), ("tcp_bw", "ok", 1),
                                    ("tcp_bw", "error", 2)], proc.stdout + proc.stderr)
            self.assertIn("server refused", doc["results"][1]["message"])
            if not pp.has_transport("ucx"):
                print("SKIP (part): no UCX transport in this build: the transport change is not checked")
                return
            # Another transport, another worker, although the case before it ended ok.
            proc, _ = pp.run(["run", s.address, "--json", "-", "-t", "tcp,ucx", "--tls", "tcp",
                              "--test", "tcp_lat,tcp_bw,tag_lat", "--sizes", "8", "-n", "100"], timeout=120)
            doc = json.loads(proc.stdout[proc.stdout.index("{"):])
            seen = [(r["case"]["transport"], r["status"], r.get("worker_case")) for r in doc["results"]]
            self.assertEqual(seen, [("tcp", "ok", 1), ("tcp", "ok", 2), ("ucx", "ok", 1)], proc.stdout + proc.stderr)


if __name__ == "__main__":
    pp.main()
