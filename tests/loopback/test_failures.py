"""Failure paths: every one ends with a clear message within its bound, and the server survives."""
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp


def finished(path):
    """Cases a results stream (--jsonl) holds so far."""
    try:
        with open(path) as f:
            return sum(1 for line in f if '"status"' in line)
    except OSError:
        return 0


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

    def server_on(self, port):
        """`pairperf server` on a port of the test's choosing (a restarted server keeps its port)."""
        proc = subprocess.Popen([pp.BIN, "server", "--listen", "127.0.0.1", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    return proc
            time.sleep(0.05)
        proc.kill()
        raise AssertionError(f"the server did not listen on {port} within 10 s")

    def sweep_losing_its_server(self, restart_after, *extra):
        """A five-case sweep whose server is killed once two cases are in the stream, and started
        again on the same port `restart_after` seconds later (None: never). Returns (exit code,
        seconds from the kill to the client's exit, output, results document)."""
        port = pp.free_port()
        server = self.server_on(port)
        with pp.tmpdir() as d:
            out, lines = os.path.join(d, "r.json"), os.path.join(d, "r.jsonl")
            client = pp.start(["run", f"127.0.0.1:{port}", "--json", out, "--jsonl", lines, "--transport", "tcp",
                               "--test", "tcp_lat", "--sizes", "8,64,512,4K,32K", "--duration", "0.3s"] + list(extra))
            try:
                deadline = time.monotonic() + 30
                while finished(lines) < 2:
                    self.assertLess(time.monotonic(), deadline, "two cases within 30 s")
                    time.sleep(0.02)
                server.kill()
                server.wait()
                killed = time.monotonic()
                if restart_after is not None:
                    time.sleep(restart_after)
                    server = self.server_on(port)
                client.wait(timeout=60)
                took = time.monotonic() - killed
            finally:
                output = pp.stop(client)
                server.kill()
                server.wait()
            self.assertEqual(pp.schema_errors(out), [])
            return client.returncode, took, output, pp.load(out)

    def test_a_restarted_server_is_reached_again_and_the_sweep_goes_on(self):
        rc, took, output, doc = self.sweep_losing_its_server(1.0)
        statuses = [r["status"] for r in doc["results"]]
        print(f"\nserver killed after 2 cases, back after 1 s: {statuses}, exit {rc}, {took:.1f} s", flush=True)
        self.assertEqual(len(statuses), 5, output)
        self.assertEqual(statuses[:2], ["ok", "ok"], output)
        # The case the kill cut short is an error naming it (none when it landed between two cases);
        # every case after it ran against the restarted server.
        self.assertLessEqual(statuses.count("error"), 1, output)
        after = statuses[statuses.index("error") + 1:] if "error" in statuses else statuses[2:]
        self.assertEqual(after, ["ok"] * len(after), output)
        self.assertEqual(len(doc["context"]["reconnects"]), 1, doc["context"].get("reconnects"))
        self.assertGreaterEqual(doc["context"]["reconnects"][0]["waited_s"], 0.5)
        self.assertIn("the server answered again after", output)
        self.assertEqual(rc, 1 if "error" in statuses else 0, output)

    def test_a_server_that_stays_gone_costs_the_rest_after_the_reconnect_bound(self):
        rc, took, output, doc = self.sweep_losing_its_server(None, "--reconnect", "2s")
        statuses = [r["status"] for r in doc["results"]]
        self.assertEqual(rc, 1, output)
        self.assertEqual(statuses[:2], ["ok", "ok"], output)
        not_run = [r.get("message", "") for r in doc["results"] if r.get("message", "").startswith("not run")]
        self.assertTrue(not_run, output)
        self.assertIn("the server did not answer again within 2.00 s", not_run[0])
        self.assertIn("ECONNREFUSED", not_run[0])
        self.assertNotIn("reconnects", doc["context"])
        self.assertLess(took, 2 + 3, output)

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
