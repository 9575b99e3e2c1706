"""Failure paths: every one ends with a clear message within its bound, and the server survives."""
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp


class Failures(unittest.TestCase):
    def test_no_server_fails_fast_naming_step_address_and_errno(self):
        port = pp.free_port()
        proc, took = pp.run(["run", f"127.0.0.1:{port}", "--no-json", "--transport", "tcp", "--sizes", "8", "--timeout-connect", "2s"], timeout=30)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertLess(took, 2 + 1)
        self.assertIn("control connect failed", proc.stderr)
        self.assertIn(f"127.0.0.1:{port}", proc.stderr)
        self.assertIn("ECONNREFUSED", proc.stderr)

    def test_silent_server_times_out_in_the_handshake(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        held = []
        t = threading.Thread(target=lambda: held.append(listener.accept()), daemon=True)
        t.start()
        try:
            proc, took = pp.run(["run", f"127.0.0.1:{port}", "--no-json", "--timeout-handshake", "1s"], timeout=30)
        finally:
            for conn, _ in held:
                conn.close()
            listener.close()
        self.assertEqual(proc.returncode, 1)
        self.assertLess(took, 1 + 1.5)
        self.assertIn("hello failed", proc.stderr)
        self.assertIn("no reply before the timeout", proc.stderr)
        self.assertIn("interface lo", proc.stderr)

    def test_server_killed_mid_case_fails_the_client_within_a_second(self):
        with pp.Server() as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.jsonl")
            # A fixed count far beyond 2 s of data: the kill lands in the measured phase (a time
            # budget spends its first part in the unmeasured pilot).
            rc, took, output = pp.kill_server_mid_case(s, ["--json", os.path.join(d, "r.json"), "--jsonl", out, "--test", "tcp_bw",
                                                           "--sizes", "64K", "-n", "2000000", "--timeout-case", "120s"])
            self.assertEqual(rc, 1, output)
            self.assertLess(took, 1.0 + 0.5)
            doc = pp.load(os.path.join(d, "r.json"))  # the results file is still written
            self.assertEqual(doc["results"][0]["status"], "error")
            self.assertIn("case 1 measure", doc["results"][0]["message"])
            self.assertRegex(doc["results"][0]["message"], "peer closed|ECONNRESET")

    def test_client_killed_mid_case_and_the_server_serves_the_next(self):
        with pp.Server() as s:
            client = pp.start(["run", s.address, "--no-json", "--test", "tcp_bibw", "--sizes", "64K", "--duration", "60s"])
            time.sleep(2.0)
            self.assertIsNone(client.poll())
            client.kill()
            pp.stop(client)
            proc, took = pp.run(["run", s.address, "--no-json", "--transport", "tcp", "--sizes", "8", "-n", "50"], timeout=30)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertTrue(s.alive())
        self.assertIn("client dropped", s.log)

    def test_hung_client_costs_the_server_only_its_timeouts(self):
        with pp.Server() as s:
            client = pp.start(["run", s.address, "--no-json", "--test", "tcp_bw", "--sizes", "64K", "--duration", "60s",
                               "--timeout-case", "2s", "--timeout-handshake", "1s", "--timeout-connect", "1s"])
            try:
                time.sleep(1.5)
                client.send_signal(signal.SIGSTOP)
                start = time.monotonic()
                proc, _ = pp.run(["run", s.address, "--no-json", "--transport", "tcp", "--sizes", "8", "-n", "50", "--timeout-handshake", "15s"],
                                 timeout=60)
                took = time.monotonic() - start
            finally:
                client.send_signal(signal.SIGCONT)
                pp.stop(client, signal.SIGKILL)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            # case timeout (2 s) + the wait for the stopped client's next message (1 s + 1 s) + the new run
            self.assertLess(took, 10)

    def test_memory_type_this_build_lacks_is_skipped_with_the_reason(self):
        with pp.Server() as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", s.address, "--json", out, "--test", "tcp_lat", "--sizes", "8", "-n", "20",
                              "--mem", "cuda,host", "--mem", "host,host"], timeout=30)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            doc = pp.load(out)
            self.assertEqual(doc["results"][0]["status"], "skipped")
            self.assertIn("CUDA", doc["results"][0]["message"])
            self.assertEqual(doc["results"][1]["status"], "ok")


if __name__ == "__main__":
    pp.main()
