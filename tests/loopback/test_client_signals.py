"""The client side of a run stopped by a signal: SIGINT or SIGTERM mid-sweep, a second SIGINT, and
a signal at any moment of a sweep or of doctor (to the process or to its whole group), after which
every finished case is in a valid results file (the rest of the client's safety:
test_client_safety.py)."""
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_testlib import finished_in_stream, lines_in, pairperf_children, wait_for

SWEEP = ["--transport", "tcp", "--test", "tcp_lat", "--sizes", "8,64,1K,8K,64K", "--duration", "0.4s"]


class Signals(unittest.TestCase):
    def interrupt(self, sig):
        with pp.Server() as s, pp.tmpdir() as d:
            out, lines = os.path.join(d, "r.json"), os.path.join(d, "r.jsonl")
            client = pp.start(["run", s.address, "--json", out, "--jsonl", lines] + SWEEP)
            try:
                # Once the first case is written, the second is running: interrupt it.
                wait_for(lambda: os.path.exists(lines) and lines_in(lines) >= 2, 30, "the first case")
                start = time.monotonic()
                client.send_signal(sig)
                client.wait(timeout=30)
                took = time.monotonic() - start
            finally:
                output = pp.stop(client)
            doc = pp.load(out) if os.path.exists(out) else None
        return client.returncode, took, doc, output

    def test_sigint_mid_sweep_leaves_a_valid_results_file_and_exits_130(self):
        rc, took, doc, output = self.interrupt(signal.SIGINT)
        self.assertEqual(rc, 130, output)
        self.assertLess(took, 1.5, output)
        self.assertIsNotNone(doc, output)
        self.assertEqual(doc["outcome"]["exit_code"], 130)
        self.assertEqual(doc["outcome"]["verdict"], "failed")
        self.assertTrue(any("interrupted by SIGINT" in r for r in doc["outcome"]["reasons"]), doc["outcome"])
        statuses = [r["status"] for r in doc["results"]]
        self.assertEqual(statuses[0], "ok")
        self.assertLess(len(statuses), 5)  # the cases not run are left out
        # The signal lands in a case (that case is the error) or, now and then, between two.
        self.assertEqual(statuses[:-1], ["ok"] * (len(statuses) - 1), output)
        if statuses[-1] != "ok":
            self.assertIn("interrupted during", doc["results"][-1]["message"])

    def test_sigterm_is_143(self):
        rc, _, doc, output = self.interrupt(signal.SIGTERM)
        self.assertEqual(rc, 143, output)
        self.assertEqual(doc["outcome"]["exit_code"], 143)

    def test_a_second_sigint_ends_it_at_once(self):
        # A server that accepts and never answers: the client waits in hello (a 20 s bound), where
        # the first SIGINT is only noted; the second ends the process at once.
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(1)
            client = pp.start(["run", f"127.0.0.1:{silent.getsockname()[1]}", "--no-json", "--timeout-handshake", "20s"])
            try:
                conn, _ = silent.accept()
                client.send_signal(signal.SIGINT)
                time.sleep(0.3)
                self.assertIsNone(client.poll())
                start = time.monotonic()
                client.send_signal(signal.SIGINT)
                client.wait(timeout=10)
                took = time.monotonic() - start
                conn.close()
            finally:
                output = pp.stop(client)
        self.assertEqual(client.returncode, -signal.SIGINT, output)
        self.assertLess(took, 1)


class SignalsAtAnyMoment(unittest.TestCase):
    """SIGINT and SIGTERM at many points of a sweep, of doctor and of mesh (tests/scenarios): sent
    to the process alone or to its whole process group as a terminal's Ctrl-C does (the local server,
    the case workers and the library probes get it too), from the moment the handler is in place,
    while the local server starts, as a case worker starts and ends, mid-case. Every case the stream
    reported finished is in the results file, every time, and the file is valid."""

    # (signal, to the group, cases finished first, then this delay); -1: as soon as the local
    # server's process exists (it is still starting).
    POINTS = [(signal.SIGINT, True, -1, 0.0), (signal.SIGINT, False, -1, 0.0), (signal.SIGINT, True, 0, 0.0), (signal.SIGTERM, False, 0, 0.0), (signal.SIGINT, False, 0, 0.03),
              (signal.SIGINT, True, 1, 0.0), (signal.SIGTERM, True, 1, 0.004), (signal.SIGINT, False, 2, 0.0),
              (signal.SIGINT, True, 2, 0.02), (signal.SIGTERM, False, 3, 0.05), (signal.SIGINT, True, 4, 0.001),
              (signal.SIGINT, False, 5, 0.0)]

    def test_every_finished_case_is_written_whenever_the_signal_lands(self):
        seen = []
        for sig, group, after, delay in self.POINTS:
            with pp.tmpdir() as d:
                out, lines = os.path.join(d, "r.json"), os.path.join(d, "r.jsonl")
                client = pp.start(["run", "--json", out, "--jsonl", lines, "--transport", "tcp", "--test", "tcp_lat,tcp_bw",
                                   "--sizes", "8,4K,64K", "--duration", "0.1s"], start_new_session=True)
                try:
                    if after < 0:
                        wait_for(lambda: pairperf_children(client.pid), 10, "the local server's process")
                    else:
                        wait_for(lambda: pp.catches(client.pid, signal.SIGINT), 10, "the signal handler")
                    if after > 0:
                        wait_for(lambda: len(finished_in_stream(lines)) >= after, 30, f"{after} case(s)")
                    time.sleep(delay)
                    (os.killpg if group else os.kill)(client.pid, sig)
                    client.wait(timeout=30)
                finally:
                    output = pp.stop(client)
                finished = finished_in_stream(lines)
                where = f"{signal.Signals(sig).name} to the {'group' if group else 'process'} after {after} case(s) + {delay} s: {output[-1500:]}"
                self.assertTrue(os.path.exists(out), where)
                self.assertEqual(pp.schema_errors(out), [], where)
                doc = pp.load(out)
                written = [(r["case"]["index"], r["case"]["test"], r["case"]["size_bytes"]) for r in doc["results"]]
                seen.append((signal.Signals(sig).name, group, after, delay, client.returncode, len(finished), len(written)))
                self.assertEqual(client.returncode, 128 + sig, where)
                self.assertEqual(doc["outcome"]["exit_code"], 128 + sig, where)
                # The file holds what the stream reported, in order: every finished case and the one
                # the signal cut short (an error that says so), nothing else.
                self.assertEqual(written, finished, where)
                self.assertGreaterEqual(len(written), max(after, 0), where)
                statuses = [r["status"] for r in doc["results"]]
                self.assertEqual(statuses[:-1], ["ok"] * (len(statuses) - 1), where)
                if statuses and statuses[-1] != "ok":
                    self.assertIn("interrupted during", doc["results"][-1]["message"], where)
                self.assertEqual(pairperf_children(client.pid), [], where)
        print("\n(signal, group, after, delay, exit, finished in the stream, in the file): " + "; ".join(map(str, seen)), flush=True)


    def test_doctor_stopped_at_any_stage_writes_what_ran_and_judges_nothing_after(self):
        seen = []
        for group, delay in ((True, 0.0), (False, 0.15), (True, 0.5), (False, 0.9), (True, 1.3)):
            with pp.tmpdir() as d:
                out = os.path.join(d, "doctor.json")
                proc = pp.start(["doctor", "--json", out], start_new_session=True)
                try:
                    wait_for(lambda: pp.catches(proc.pid, signal.SIGINT), 10, "the signal handler")
                    time.sleep(delay)
                    (os.killpg if group else os.kill)(proc.pid, signal.SIGINT)
                    proc.wait(timeout=60)
                finally:
                    output = pp.stop(proc)
                where = f"SIGINT to the {'group' if group else 'process'} after {delay} s: {output[-2000:]}"
                self.assertTrue(os.path.exists(out), where)
                self.assertEqual(pp.schema_errors(out), [], where)
                doc = pp.load(out)
                stopped = doc.get("interrupted")
                seen.append((group, delay, proc.returncode, stopped and stopped["during"]))
                if proc.returncode == 0:  # it finished before the signal: a whole report
                    self.assertIsNone(stopped, where)
                    continue
                self.assertEqual(proc.returncode, 130, where)
                self.assertEqual(doc["exit_code"], 130, where)
                self.assertEqual(stopped["signal"], "SIGINT", where)
                self.assertIn(f"Interrupted by SIGINT during {stopped['during']}", output, where)
                # Nothing is judged from probes that did not run: no verdict on the path, and no
                # finding unless every reach probe ran (then only the path is left unjudged).
                self.assertIsNone(doc["verdict"], where)
                if stopped["during"] != "the path probe":
                    self.assertEqual(doc["findings"], [], where)
                self.assertEqual(pairperf_children(proc.pid), [], where)
        print("\n(group, delay, exit, stopped during): " + "; ".join(map(str, seen)), flush=True)
        self.assertGreaterEqual(sum(1 for s in seen if s[2] == 130), 4, seen)


if __name__ == "__main__":
    pp.main()
