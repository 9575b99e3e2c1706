"""`pairperf doctor` on loopback: the report, its JSON, the variable findings of both sides, and
bounded failure when the server is not there. (The multi-interface and namespace cases are in
tests/scenarios/test_doctor_netns.py, as root.)"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp


class Doctor(unittest.TestCase):
    def doctor(self, server, *args, env=None, prefix=()):
        with pp.tmpdir() as d:
            out = os.path.join(d, "doctor.json")
            # --noise-threshold 100: about reach and variables; noise has its own test below.
            proc, took = pp.run(["doctor", server.address, "--json", out, "--duration", "0.1s", "--noise-threshold", "100"] + list(args),
                                timeout=120, env=env or pp.clean_env(), prefix=prefix)
            doc = pp.load(out) if os.path.exists(out) else None
            if doc is not None:
                self.assertEqual(pp.schema_errors(out), [])
        return proc, doc, took

    def test_a_healthy_local_pair_reaches_over_loopback_with_the_fast_path(self):
        # One CPU each, so the path verdict is not judged on probes that share a CPU (noisy).
        apart = os.cpu_count() >= 2
        with pp.Server(env=pp.clean_env(), prefix=("taskset", "-c", "1") if apart else ()) as s:
            proc, doc, took = self.doctor(s, prefix=("taskset", "-c", "0") if apart else ())
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(doc["schema"], "pairperf.doctor")
        self.assertEqual(doc["findings"], [])
        # The server listens on 127.0.0.1 only: one cell, lo to 127.0.0.1, measured.
        self.assertEqual(len(doc["tcp"]), 1, doc["tcp"])
        cell = doc["tcp"][0]
        self.assertEqual((cell["local_iface"], cell["peer_address"], cell["peer_iface"]), ("lo", "127.0.0.1", "lo"))
        self.assertTrue(cell["reachable"])
        self.assertEqual(cell["result"]["provenance"]["lanes"], [{"transport": "tcp", "device": "lo", "kind": "network"}])
        self.assertGreater(cell["result"]["bandwidth_Bps"]["receiver"], 1e8)
        # Loopback reaches, but is never recommended for a multi-node variable.
        self.assertEqual(doc["client"]["reaching"], ["lo"])
        self.assertIsNone(doc["client"]["recommended"])
        self.assertNotIn("export UCX_NET_DEVICES=lo", proc.stdout)
        self.assertIn("no interface to name in UCX_NET_DEVICES", proc.stdout)
        self.assertTrue(doc["pair"]["same_host"] and doc["pair"]["same_ipc_namespace"])
        self.assertIn("Interface matrix", proc.stdout)
        self.assertIn("No findings.", proc.stdout)
        if pp.has_transport("ucx"):
            self.assertEqual(doc["ucx"][0]["result"]["status"], "ok", doc["ucx"])
            self.assertEqual(doc["verdict"]["verdict"], "fast path", doc["verdict"])
            self.assertEqual(doc["verdict"]["expected"], "shared memory")
            self.assertIn("-> fast path", proc.stdout)
        self.assertLess(took, 60)

    def test_a_variable_naming_an_interface_the_server_lacks_is_a_finding(self):
        with pp.Server(env=pp.clean_env(GLOO_SOCKET_IFNAME="ppnosuch0", NCCL_SOCKET_IFNAME="lo")) as s:
            proc, doc, _ = self.doctor(s, "--no-ucx", env=pp.clean_env(GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="lo"))
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        gloo = [f for f in doc["findings"] if f["subject"] == "GLOO_SOCKET_IFNAME"]
        self.assertEqual(len(gloo), 1, doc["findings"])
        self.assertEqual(gloo[0]["side"], "server")
        self.assertIn("ppnosuch0", gloo[0]["problem"])
        # The fix never names loopback (only lo reaches on one host): it says what to name instead.
        self.assertIn("only loopback reached the peer from the server", gloo[0]["fix"])
        self.assertEqual(doc["server"]["variables"]["GLOO_SOCKET_IFNAME"], "ppnosuch0")
        self.assertIn("Findings (1: 1 fails, 0 fragile, 0 advice)", proc.stdout)

    def test_a_variable_set_on_one_side_only_is_advice_not_a_failure(self):
        # The pair works (both sides pick loopback): an inconsistency to report, not exit 3.
        with pp.Server(env=pp.clean_env()) as s:
            proc, doc, _ = self.doctor(s, "--no-ucx", env=pp.clean_env(NCCL_SOCKET_IFNAME="lo"))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        pair = [f for f in doc["findings"] if f["side"] == "pair"]
        self.assertEqual([f["subject"] for f in pair], ["NCCL_SOCKET_IFNAME"], doc["findings"])
        self.assertIn("not on the server", pair[0]["problem"])
        self.assertEqual(pair[0]["severity"], "advice")
        self.assertIn("advice  [pair] NCCL_SOCKET_IFNAME", proc.stdout)

    def test_json_on_stdout(self):
        with pp.Server(env=pp.clean_env()) as s:
            proc, _ = pp.run(["doctor", s.address, "--json", "-", "--no-ucx", "--duration", "0.1s"], timeout=60, env=pp.clean_env())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertEqual(doc["schema"], "pairperf.doctor")
        self.assertEqual(doc["ucx"], [])

    def test_no_server_is_exit_1_naming_the_step_and_address_quickly(self):
        port = pp.free_port()
        proc, took = pp.run(["doctor", f"127.0.0.1:{port}"], timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("control connect", proc.stderr)
        self.assertIn(f"127.0.0.1:{port}", proc.stderr)
        self.assertIn("ECONNREFUSED", proc.stderr)
        self.assertLess(took, 10)
        # The document says so too, for a job that reads it rather than stderr: valid, exit 1,
        # why, this side's facts, and nothing probed. On stdout as in a file.
        with pp.tmpdir() as d:
            out = os.path.join(d, "doctor.json")
            proc, _ = pp.run(["doctor", f"127.0.0.1:{port}", "--json", out], timeout=60)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertEqual(pp.schema_errors(out), [])
            doc = pp.load(out)
        self.assertEqual(doc["exit_code"], 1)
        self.assertIn("ECONNREFUSED", doc["server_unreachable"])
        self.assertIn("client", doc["context"])
        self.assertEqual((doc["tcp"], doc["findings"], doc["verdict"]), ([], [], None))
        proc, _ = pp.run(["doctor", f"127.0.0.1:{port}", "--json", "-"], timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("ECONNREFUSED", json.loads(proc.stdout)["server_unreachable"])

    def test_bad_values_exit_2(self):
        for args, text in ((["--probe-timeout", "0s"], "must be at least 1 ns"), (["--size", "0"], "at least 1 byte"),
                           (["--units", "MB"], "GB or GiB"), (["--duration", "soon"], "invalid duration")):
            with self.subTest(args=args):
                proc, took = pp.run(["doctor", "127.0.0.1:1"] + args, timeout=30)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(text, proc.stderr)
                self.assertLess(took, 5)

    def test_without_a_peer_it_starts_a_local_server(self):
        proc, took = pp.run(["doctor", "--no-ucx", "--duration", "0.1s", "--json", "-"], timeout=60, env=pp.clean_env())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        doc = json.loads(proc.stdout)
        self.assertTrue(doc["tcp"][0]["reachable"])
        self.assertEqual(doc["scope"], "this host")
        self.assertLess(took, 20)

    def test_without_a_peer_it_says_it_checked_this_host_only_and_never_recommends_loopback(self):
        # Before: "export UCX_NET_DEVICES=lo NCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo" and
        # "No findings", which breaks a multi-node job it is pasted into.
        proc, _ = pp.run(["doctor", "--no-ucx", "--duration", "0.1s"], timeout=60, env=pp.clean_env())
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("this host only", proc.stdout)
        self.assertIn("`pairperf server` on another node and `pairperf doctor NODE`", proc.stdout)
        self.assertNotIn("export UCX_NET_DEVICES", proc.stdout)
        self.assertNotIn("=lo", proc.stdout)
        self.assertIn("No findings on this host", proc.stdout)

    def test_a_path_probed_on_one_shared_cpu_is_retried_and_inconclusive(self):
        if not pp.has_transport("ucx"):
            self.skipTest("built without UCX: no path probe")
        # The local server inherits the CPU: client and server busy-poll on one CPU and wait for
        # each other half the time. The doctor measures again, then refuses to call it fast. On a
        # quiet host the waiting is the doctor's own (contended by its own processes); on a busy
        # CI host other processes' load may come first (noisy): either way not clean.
        proc, _ = pp.run(["doctor", "--duration", "0.1s"], timeout=120, env=pp.clean_env(), prefix=("taskset", "-c", "0"))
        self.assertEqual(proc.returncode, 4, proc.stdout + proc.stderr)
        self.assertIn("the path probe was not clean", proc.stderr)
        self.assertRegex(proc.stderr, r"not clean \((noisy|contended by its own processes): ")
        self.assertIn("(not clean: not a verdict to trust)", proc.stdout)
        self.assertIn("No findings, but inconclusive", proc.stdout)


if __name__ == "__main__":
    pp.main()
