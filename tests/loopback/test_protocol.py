"""The control protocol from the outside: raw frames against the real server, and the real client
against a scripted server (a refusal, and an echo that corrupts bytes)."""
import json
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp


class ServerSide(unittest.TestCase):
    """Whatever a client sends, the server answers or drops it, and serves the next client."""

    def assert_serves_a_real_client(self, server):
        proc, _ = pp.run(["run", server.address, "--no-json", "--sizes", "8", "-n", "20", "--test", "tcp_lat"], timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_protocol_version_mismatch_is_refused_clearly(self):
        with pp.Server() as s:
            with pp.connect(s.port) as c:
                c.sendall(pp.frame(pp.hello(protocol=99)))
                reply = pp.read_frame(c)
            self.assertEqual(reply["type"], "refused")
            self.assertIn("version 99 is not supported", reply["reason"])
            self.assertIn(f"speaks version {pp.PROTOCOL}", reply["reason"])
            self.assert_serves_a_real_client(s)

    def test_nccls_answer_comes_only_to_a_hello_that_asks(self):
        # doctor and mesh ask ("want": ["nccl"]) and grant the time; a plain run's hello costs no
        # NCCL probe. A library named that does not exist answers with the reason, within the grant.
        env = pp.clean_env(PAIRPERF_NCCL_LIBRARY="/nonexistent/libnccl.so.2")
        for want, budget in ((None, None), (["nccl"], 2.0)):
            with pp.Server(env=env) as s, pp.connect(s.port) as c:
                h = pp.hello()
                if want:
                    h["want"], h["nccl_budget_s"] = want, budget
                c.sendall(pp.frame(h))
                reply = pp.read_frame(c, timeout=10)
                self.assertEqual(reply["type"], "hello", reply)
                host = reply["host"]  # a message is its body with its "type" (core/control.cpp)
                if not want:
                    self.assertNotIn("nccl", host)
                    continue
                answers = host["nccl"]["answers"]
                self.assertEqual(host["nccl"]["searched"], "PAIRPERF_NCCL_LIBRARY")
                self.assertEqual([a["library"] for a in answers], ["/nonexistent/libnccl.so.2"], answers)
                self.assertFalse(answers[0]["ran"])
                self.assertIn("cannot load /nonexistent/libnccl.so.2", answers[0]["error"])

    def test_wrong_token_is_refused(self):
        with pp.Server("--token", "s3cret") as s:
            with pp.connect(s.port) as c:
                c.sendall(pp.frame(pp.hello(token="guess")))
                self.assertEqual(pp.read_frame(c)["type"], "refused")
            proc, _ = pp.run(["run", s.address, "--no-json", "--transport", "tcp", "--sizes", "8", "-n", "10", "--token", "nope"], timeout=30)
            self.assertEqual(proc.returncode, 1)
            self.assertIn("peer refused: wrong or missing --token", proc.stderr)
            proc, _ = pp.run(["run", s.address, "--no-json", "--sizes", "8", "-n", "10", "--token", "s3cret", "--test", "tcp_lat"],
                             timeout=30)
            self.assertEqual(proc.returncode, 0, proc.stderr)

    def check_bad_bytes(self, payload, expect_in_error, close_after=False):
        with pp.Server() as s:
            with pp.connect(s.port) as c:
                c.sendall(payload)
                if close_after:
                    c.shutdown(socket.SHUT_WR)
                reply = pp.read_frame(c)
                if expect_in_error is None:
                    self.assertIsNone(reply)
                else:
                    self.assertEqual(reply["type"], "error", reply)
                    self.assertIn(expect_in_error, reply["message"])
                    self.assertIsNone(pp.read_frame(c))  # and then the server hangs up
            self.assert_serves_a_real_client(s)
            self.assertTrue(s.alive())

    def test_garbage_is_refused(self):
        self.check_bad_bytes(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "exceeds")

    def test_oversized_frame_is_refused(self):
        self.check_bad_bytes(b"\x00\x10\x00\x01" + b"{" * 64, "exceeds")

    def test_malformed_json_is_refused(self):
        self.check_bad_bytes(pp.frame(b"{not json"), "not valid JSON")

    def test_frame_without_type_is_refused(self):
        self.check_bad_bytes(pp.frame({"hello": 1}), "'type'")

    def test_truncated_frame_then_close_is_survived(self):
        self.check_bad_bytes(pp.frame(pp.hello())[:7], None, close_after=True)

    def test_a_probe_is_not_logged_but_a_cut_hello_is(self):
        # A Kubernetes tcpSocket readiness probe connects and closes every few seconds: no log
        # line for it. A client that starts a hello and goes away is still worth one.
        with pp.Server() as s:
            for _ in range(3):
                with pp.connect(s.port):
                    pass
            with pp.connect(s.port) as c:
                c.sendall(pp.frame(pp.hello())[:7])
            self.assert_serves_a_real_client(s)
        self.assertEqual(s.log.count("dropped"), 1, s.log)
        self.assertIn("mid-message", s.log)

    def test_unknown_message_type_is_refused(self):
        with pp.Server() as s:
            with pp.connect(s.port) as c:
                c.sendall(pp.frame(pp.hello()))
                self.assertEqual(pp.read_frame(c)["type"], "hello")
                c.sendall(pp.frame({"type": "teleport"}))
                reply = pp.read_frame(c)
                self.assertEqual(reply["type"], "error")
                self.assertIn("unknown message type 'teleport'", reply["message"])
            self.assert_serves_a_real_client(s)

    def test_stop_outside_a_timed_phase_is_refused(self):
        with pp.Server() as s:
            with pp.connect(s.port) as c:
                c.sendall(pp.frame(pp.hello()))
                self.assertEqual(pp.read_frame(c)["type"], "hello")
                c.sendall(pp.frame({"type": "stop", "iterations": 10}))
                reply = pp.read_frame(c)
                self.assertEqual(reply["type"], "error")
                self.assertIn("unexpected message 'stop'", reply["message"])
            self.assert_serves_a_real_client(s)

    def test_run_without_case_and_malformed_case_get_errors_not_crashes(self):
        with pp.Server() as s:
            with pp.connect(s.port) as c:
                c.sendall(pp.frame(pp.hello()))
                hello = pp.read_frame(c)
                self.assertIn("interfaces", hello["host"])
                c.sendall(pp.frame({"type": "run", "phase": "measure", "iterations": 10}))
                reply = pp.read_frame(c)
                self.assertEqual(reply["type"], "error")
                self.assertIn("'run' without a case", reply["message"])
                c.sendall(pp.frame({"type": "case", "case": {"transport": "tcp"}}))
                reply = pp.read_frame(c)
                self.assertEqual(reply["type"], "error")
                self.assertIn("malformed case message", reply["message"])
                c.sendall(pp.frame({"type": "bye"}))
            self.assert_serves_a_real_client(s)


class ScriptedServer:
    """A minimal server written from the protocol description, for the client's side of things."""

    def __init__(self, refuse=None, corrupt=False):
        self.refuse = refuse
        self.corrupt = corrupt
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.listener.settimeout(20)
        self.port = self.listener.getsockname()[1]
        self.error = None
        self.sockets = []
        self.thread = threading.Thread(target=self.serve, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.thread.join(timeout=20)
        self.listener.close()

    def serve(self):
        try:
            ctl, _ = self.listener.accept()
            with ctl:
                pp.read_frame(ctl)
                if self.refuse:
                    ctl.sendall(pp.frame({"type": "refused", "reason": self.refuse}))
                    return
                ctl.sendall(pp.frame({"type": "hello", "protocol": 1, "host": {"hostname": "scripted"}, "env": {}}))
                self.serve_cases(ctl)
        except Exception as e:  # reported by the test
            self.error = e

    def serve_cases(self, ctl):
        try:
            self.serve_loop(ctl)
        finally:
            for sock in self.sockets:
                sock.close()

    def serve_loop(self, ctl):
        data = None
        data_listener = None
        while True:
            msg = pp.read_frame(ctl, timeout=20)
            if msg is None or msg["type"] == "bye":
                return
            if msg["type"] == "case":
                size = msg["case"]["size_bytes"]
                data_listener = socket.socket()
                self.sockets.append(data_listener)
                data_listener.bind(("127.0.0.1", 0))
                data_listener.listen(1)
                address = json.dumps({"port": data_listener.getsockname()[1], "addresses": []}).encode().hex()
                regions = {"recv_slots": 0, "send_slots": 0, "list": []}  # no one-sided tests here
                ctl.sendall(pp.frame({"type": "ready", "address": address, "regions": regions}))
            elif msg["type"] == "run":
                if data is None:
                    data_listener.settimeout(10)
                    data, _ = data_listener.accept()
                    self.sockets.append(data)
                    data.settimeout(10)
                    pp.recv_exact(data, 8)  # stream header
                ctl.sendall(pp.frame({"type": "running"}))
                n = msg["iterations"]
                for _ in range(n):
                    payload = bytearray(pp.recv_exact(data, size))
                    if self.corrupt:
                        payload[size // 2] ^= 0xFF
                    data.sendall(payload)
                ctl.sendall(pp.frame({"type": "results", "provenance": {},
                                      "outcome": {"elapsed_s": 0.01, "send_elapsed_s": 0, "recv_span_s": 0,
                                                  "messages_sent": n, "messages_received": n},
                                      "validation": {"messages_checked": n, "corrupt_bytes": 0}}))


class ClientSide(unittest.TestCase):
    def test_refusal_reaches_the_user(self):
        with ScriptedServer(refuse="control protocol version 1 is not supported; this server speaks version 2") as s:
            proc, _ = pp.run(["run", f"127.0.0.1:{s.port}", "--no-json", "--transport", "tcp", "--sizes", "8"], timeout=30)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("hello failed", proc.stderr)
        self.assertIn("peer refused", proc.stderr)
        self.assertIn("speaks version 2", proc.stderr)

    def test_corrupt_bytes_are_counted_and_fail_the_case(self):
        with ScriptedServer(corrupt=True) as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", f"127.0.0.1:{s.port}", "--json", out, "--test", "tcp_lat", "--sizes", "1K", "-n", "10",
                              "--warmup", "2", "--validate"], timeout=60)
            self.assertIsNone(s.error)
            self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
            r = pp.load(out)["results"][0]
        self.assertEqual(r["status"], "fail")
        # one corrupt byte in each of the 12 echoes the client checked (2 warm-up + 10 measured)
        self.assertEqual(r["validation"]["corrupt_bytes"], 12)
        self.assertIn("12 corrupt bytes", r["message"])

    def test_the_same_echo_without_corruption_passes(self):
        with ScriptedServer(corrupt=False) as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", f"127.0.0.1:{s.port}", "--json", out, "--test", "tcp_lat", "--sizes", "1K", "-n", "10",
                              "--warmup", "2", "--validate"], timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertEqual(pp.load(out)["results"][0]["validation"]["corrupt_bytes"], 0)


if __name__ == "__main__":
    pp.main()
