"""A server safe to leave running: what a peer may send (bad numbers, bad addresses, huge
requests, silence, hang-ups, reflection through drive), what many peers at once do, and how it
stops. Each test ends by serving a real client: the server survived."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp


def config(**timeouts):
    t = {"connect": 3, "handshake": 5, "case": 20, "idle": 60}
    t.update(timeouts)
    return {"iterations": None, "duration_s": 0.1, "min_iterations": 10, "max_iterations": 1000, "warmup_iterations": None,
            "window": 32, "repeat": 1, "validate": False, "progress": "busy", "streams": 1, "send_buffer_bytes": 0,
            "recv_buffer_bytes": 0, "ucx": [], "timeouts_s": t}


def case(transport="tcp", test="tcp_lat", pattern="pingpong", size=8):
    return {"index": 0, "transport": transport, "test": test, "pattern": pattern, "tls": "", "iface": "",
            "memory": ["host", "host"], "size_bytes": size}


def session(port, token=""):
    """A control connection past hello."""
    c = pp.connect(port)
    c.sendall(pp.frame(pp.hello(token=token)))
    reply = pp.read_frame(c)
    while reply is not None and reply["type"] == "queued":  # the last session is still ending
        reply = pp.read_frame(c, timeout=10)
    assert reply is not None and reply["type"] == "hello", reply
    return c


def ask(port, message, token=""):
    """Sends one request after hello and returns the server's reply."""
    with session(port, token) as c:
        c.sendall(pp.frame(message))
        return pp.read_frame(c, timeout=15)


class Requests(unittest.TestCase):
    """Every field of every message is checked before the server acts on it."""

    def serves(self, server, seconds=20):
        start = time.monotonic()
        proc, _ = pp.run(["run", server.address, "--no-json", "--sizes", "8", "-n", "20", "--test", "tcp_lat"], timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr + server.log)
        self.assertLess(time.monotonic() - start, seconds)
        self.assertTrue(server.alive())

    def test_validate_with_size_zero_is_refused_not_a_crash(self):
        # Was SIGFPE: an integer division by the size when sizing validation's buffers.
        with pp.Server() as s:
            cfg = config()
            cfg["validate"] = True
            reply = ask(s.port, {"type": "case", "config": cfg, "case": case(size=0), "address": "00", "regions": {}})
            self.assertEqual(reply["type"], "error", reply)
            self.assertIn("size_bytes must be at least 1", reply["message"])
            self.serves(s)

    def test_numbers_that_would_overflow_are_refused_by_name(self):
        with pp.Server() as s:
            for size, why in ((2 ** 64, "size_bytes must be a whole number"), (1.5e300, "size_bytes must be a whole number"),
                              (-1, "size_bytes must be a whole number"), (2 ** 31, "size_bytes = 2147483648 is above")):
                reply = ask(s.port, {"type": "case", "config": config(), "case": case(size=size), "address": "00", "regions": {}})
                self.assertEqual(reply["type"], "error", reply)
                self.assertIn(why, reply["message"])
            for t, why in (({"connect": 1e300}, "timeouts_s.connect must be a number of seconds"),
                           ({"case": -5}, "timeouts_s.case must be a number of seconds")):
                reply = ask(s.port, {"type": "case", "config": config(**t), "case": case(), "address": "00", "regions": {}})
                self.assertEqual(reply["type"], "error", reply)
                self.assertIn(why, reply["message"])
            self.serves(s)

    @unittest.skipUnless(pp.has_transport("ucx"), "this pairperf was built without UCX")
    def test_a_bad_ucx_address_is_refused_and_one_that_aborts_ucx_ends_only_its_session(self):
        with pp.Server() as s:
            ucx = case("ucx", "tag_lat")
            reply = ask(s.port, {"type": "case", "config": config(), "case": ucx, "address": "ff" * 64, "regions": {}})
            self.assertEqual(reply["type"], "error", reply)
            self.assertIn("is not one this UCX", reply["message"])
            header = reply["message"].split("reads (header 0x")[1][:2]
            # Past the header check UCX parses the rest unchecked: whatever it does (an abort in
            # ucp_address_unpack, an error), the session ends and the server does not.
            reply = ask(s.port, {"type": "case", "config": config(), "case": ucx, "address": header + "ff" * 63, "regions": {}})
            self.assertIn(reply["type"] if reply else "closed", ("error", "ready", "closed"), reply)
            self.serves(s)

    @unittest.skipUnless(pp.has_transport("ucx"), "this pairperf was built without UCX")
    def test_a_ucx_shared_memory_client_killed_mid_case_leaves_the_server_serving(self):
        # UCX's cma lane reads the dead client's memory (process_vm_readv: No such process) and
        # aborts: that ended the whole server in 2 of 3 runs; now it ends one session process.
        for attempt in range(3):
            with pp.Server() as s:
                client = pp.start(["run", s.address, "--no-json", "--transport", "ucx", "--tls", "posix,sysv,cma",
                                   "--test", "tag_bw", "--sizes", "1M", "-n", "10000000", "--timeout-case", "30s"])
                try:
                    time.sleep(1.5)
                    self.assertIsNone(client.poll(), "the client ended before it was killed")
                    client.kill()
                    client.wait(timeout=10)
                finally:
                    pp.stop(client)
                self.serves(s, seconds=15)

    def test_client_timeouts_are_capped_by_the_servers_and_a_hang_up_frees_it(self):
        # A case asking for a day-long data connect, then a hang-up: the next client is served at
        # once (the server caps the wait, and notices the hang-up).
        with pp.Server("--timeout-connect", "5s") as s:
            with session(s.port) as c:
                c.sendall(pp.frame({"type": "case", "config": config(connect=86400), "case": case("tcp", "tcp_lat"),
                                    "address": '{"port": 9, "addresses": []}'.encode().hex(), "regions": {}}))
                pp.read_frame(c, timeout=10)
            self.serves(s, seconds=8)

    def test_memory_and_iteration_limits_refuse_with_the_reason(self):
        with pp.Server("--max-case-memory", "256M", "--max-iterations", "1000000") as s:
            proc, _ = pp.run(["run", s.address, "--no-json", "--sizes", "1G", "-n", "10", "--test", "tcp_bw"], timeout=60)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("more than it allows (--max-case-memory 256M)", proc.stdout)
            # The client's own plan does not matter: the measured phase asks for 2^40 iterations.
            proc, _ = pp.run(["run", s.address, "--no-json", "--sizes", "8", "-n", str(2 ** 40), "--test", "tcp_lat"],
                             timeout=60)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("1099511627776 iterations are more than this server allows (--max-iterations 1000000)",
                          proc.stdout)
            self.serves(s)


    def test_a_server_serves_only_its_transports_and_describes_only_their_libraries(self):
        if not pp.has_transport("ucx"):
            self.skipTest("no UCX transport in this build: no second transport to refuse")
        with pp.Server("--transport", "tcp") as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", s.address, "--json", out, "-t", "ucx", "--tls", "tcp", "--test", "tag_lat",
                              "--sizes", "8", "-n", "100"], timeout=60)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            doc = pp.load(out)
            self.assertIn("server refused: this server serves only tcp (its --transport), not ucx",
                          doc["results"][0]["message"])
            # Neither UCX nor libfabric was loaded or probed to say hello.
            self.assertEqual(set(doc["context"]["server_tool"]["libraries"]), set(), doc["context"]["server_tool"])
            self.serves(s)
        proc, _ = pp.run(["server", "--transport", "tcp,carrier-pigeon", "--port", "0"], timeout=30)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("--transport carrier-pigeon: no such transport", proc.stderr)


class Exposure(unittest.TestCase):
    def test_without_a_token_it_listens_on_loopback_only_and_with_one_everywhere(self):
        for extra, where in (([], "127.0.0.1:"), (["--token", "t0k"], "*:")):
            proc = pp.start(["server", "--port", "0", "--once", "--timeout-idle", "1s"] + extra)
            try:
                proc.wait(timeout=20)
            finally:
                log = pp.stop(proc)
            self.assertIn(f"listening on {where}", log)

    def test_drive_is_refused_unless_allowed_towards_that_target(self):
        with pp.Server() as target:
            drive = {"type": "drive", "target": target.address, "config": config(), "cases": [case()]}
            with pp.Server() as s:
                reply = ask(s.port, drive)
            self.assertEqual(reply["type"], "error")
            self.assertIn("does not drive measurements towards other hosts", reply["message"])
            with pp.Server("--token", "k", "--allow-drive", "10.0.0.0/8") as s:
                reply = ask(s.port, drive, token="k")
                self.assertIn("is not in this server's --allow-drive list (10.0.0.0/8)", reply["message"])
                # A case's own target counts as much as the drive's.
                sneaky = dict(drive, target="10.1.2.3:1", cases=[dict(case(), target="127.0.0.1:9")])
                reply = ask(s.port, sneaky, token="k")
                self.assertIn("target 127.0.0.1", reply["message"])
            with pp.Server("--token", "k", "--allow-drive", "127.0.0.0/8") as s:
                reply = ask(s.port, drive, token="k")
            self.assertEqual(reply["type"], "driven", reply)
            self.assertEqual(reply["results"][0]["status"], "ok", reply)
        proc, _ = pp.run(["server", "--allow-drive", "*"], timeout=20)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("--allow-drive needs a token", proc.stderr)

    def test_before_the_token_the_peer_learns_only_the_protocol_version(self):
        with pp.Server("--token", "right") as s:
            with pp.connect(s.port) as c:
                c.sendall(pp.frame(pp.hello(token="wrong")))
                reply = pp.read_frame(c)
        self.assertEqual(set(reply), {"type", "reason", "protocol"}, reply)

    def test_the_token_stays_out_of_results_and_can_come_from_a_file(self):
        with pp.tmpdir() as d:
            secret = os.path.join(d, "token")
            with open(secret, "w") as f:
                f.write("hunter2\n")
            with pp.Server("--token-file", secret) as s:
                out = os.path.join(d, "r.json")
                proc, _ = pp.run(["run", s.address, "--token", "hunter2", "--json", out, "--sizes", "8", "-n", "10",
                                  "--test", "tcp_lat"], timeout=60)
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                with open(out) as f:
                    text = f.read()
            self.assertNotIn("hunter2", text)
            self.assertIn("(redacted)", text)
            self.assertNotIn("hunter2", s.log)


class Concurrency(unittest.TestCase):
    def test_two_hundred_idle_sockets_do_not_delay_a_client(self):
        with pp.Server() as s:
            idle = []
            try:
                for _ in range(200):
                    idle.append(pp.connect(s.port))
                half = session(s.port)  # said hello, then silent: it holds the session, not the door
                start = time.monotonic()
                proc, _ = pp.run(["run", s.address, "--no-json", "--sizes", "8", "-n", "20", "--test", "tcp_lat"],
                             timeout=60)
                took = time.monotonic() - start
            finally:
                for c in idle:
                    c.close()
            half.close()
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # The silent session loses its turn one handshake bound (5 s) after the client queued.
        self.assertLess(took, 10, s.log)
        self.assertIn("idle between requests while other clients wait", s.log)

    def test_clients_queue_and_beyond_the_queue_are_told_to_retry_keeping_their_place(self):
        def hello_again(ticket):
            c = pp.connect(s.port)
            c.sendall(pp.frame(dict(pp.hello(), ticket=ticket)))
            return c, pp.read_frame(c)

        with pp.Server("--max-queue", "1") as s:
            first = session(s.port)
            try:
                with pp.connect(s.port) as second, pp.connect(s.port) as third, pp.connect(s.port) as fourth:
                    second.sendall(pp.frame(pp.hello()))
                    self.assertEqual(pp.read_frame(second), {"type": "queued", "position": 1})
                    third.sendall(pp.frame(pp.hello()))
                    busy = pp.read_frame(third)
                    self.assertEqual(busy["type"], "busy", busy)
                    # The expected wait: what is left of the session (a client without a budget
                    # counts as 5 s), not a constant; one client ahead in line.
                    self.assertTrue(1 <= busy["retry_after_s"] <= 5, busy)
                    self.assertEqual(busy["position"], 2, busy)
                    fourth.sendall(pp.frame(pp.hello()))
                    later = pp.read_frame(fourth)
                    self.assertEqual((later["type"], later["position"]), ("busy", 3), later)
                    self.assertGreater(later["ticket"], busy["ticket"])
                    first.sendall(pp.frame({"type": "bye"}))
                    self.assertEqual(pp.read_frame(second, timeout=10)["type"], "hello")
                    # Room for one again: the fourth comes back first, but the third's ticket is
                    # older, so the room is the third's; then the third is queued ahead of it.
                    c4, again = hello_again(later["ticket"])
                    c4.close()
                    self.assertEqual((again["type"], again["position"], again["ticket"]), ("busy", 2, later["ticket"]), again)
                    c3, admitted = hello_again(busy["ticket"])
                    self.assertEqual(admitted, {"type": "queued", "position": 1})
                    c4, again = hello_again(later["ticket"])
                    c4.close()
                    self.assertEqual((again["type"], again["position"]), ("busy", 2), again)
                    c3.close()
            finally:
                first.close()
        self.assertIn("queued at position 1", s.log)
        self.assertIn(f"ticket {busy['ticket']}, place 2 in line", s.log)
        self.assertIn(f"queued at position 1 (ticket {busy['ticket']})", s.log)


class Signals(unittest.TestCase):
    def test_clients_vanishing_at_random_points_leave_no_process_file_or_memory_behind(self):
        # scripts/server-soak for 8 s (the rerunnable study runs minutes: docs/testing.md quotes 120 s):
        # clients SIGKILLed while connecting, in the hello and mid-case, raw sockets that hang
        # up or send half a frame; then a normal client is served.
        from pairperf_tools import server_soak
        r = server_soak.soak(pp.BIN, 8, 2, seed=7, log=lambda m: print("\n" + m, flush=True))
        self.assertGreater(r["clients_killed"], 5, r)
        self.assertEqual(r["leaks"], [], r)
        self.assertTrue(r["server_alive"], r)
        self.assertEqual(r["last_client_exit"], 0, r)

    def test_sigterm_ends_the_server_within_a_second_and_tells_its_client(self):
        with pp.Server() as s:
            with session(s.port) as c:
                c.sendall(pp.frame({"type": "case", "config": config(connect=30), "case": case(),
                                    "address": '{"port": 9, "addresses": []}'.encode().hex(), "regions": {}}))
                time.sleep(0.3)
                start = time.monotonic()
                s.proc.send_signal(signal.SIGTERM)
                s.proc.wait(timeout=10)
                took = time.monotonic() - start
                frames = []
                while (f := pp.read_frame(c, timeout=5)) is not None:
                    frames.append(f)
        self.assertLess(took, 1.5)
        self.assertEqual(s.proc.returncode, 0)
        self.assertTrue(any("shutting down" in f.get("message", "") for f in frames), frames)


if __name__ == "__main__":
    pp.main()
