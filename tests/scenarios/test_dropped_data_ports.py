"""Data ports dropped by a firewall, the control port open: UCX over tcp blocks inside
ucp_ep_create in a connect() that no pairperf timeout reaches. The case must still end within
its bounds, as an error naming the stage, and the next case and the server go on.

Needs root (a network namespace of its own, iptables in it); elsewhere it skips, saying why."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_tools import netns

TAG = str(os.getpid() % 100000)
NS = f"ppdrop{TAG}"
REASON = netns.unavailable(TAG)
if REASON is None and subprocess.run(["which", "iptables"], capture_output=True).returncode != 0:
    REASON = "iptables is not installed"
if REASON is None and not pp.has_transport("ucx"):
    REASON = "this pairperf was built without UCX"
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
class DroppedDataPorts(unittest.TestCase):
    def setUp(self):
        self.nets = netns.Namespaces()
        self.addCleanup(self.nets.close)
        self.nets.add(NS)

    def test_a_blocked_ucx_connect_ends_within_its_bounds_and_the_sweep_goes_on(self):
        inside = netns.inside(NS)
        with pp.Server(prefix=inside) as s, pp.tmpdir() as d:
            # Every new TCP connection but the control port's is dropped (no reset: connect() waits).
            netns.sh(*inside, "iptables", "-A", "INPUT", "-p", "tcp", "--dport", str(s.port), "-j", "ACCEPT")
            netns.sh(*inside, "iptables", "-A", "INPUT", "-p", "tcp", "--syn", "-j", "DROP")
            out = os.path.join(d, "r.json")
            start = time.monotonic()
            proc, _ = pp.run(["run", s.address, "--json", out, "--transport", "ucx", "--tls", "tcp",
                              "--test", "tag_lat", "--sizes", "8,64", "-n", "10", "--timeout-connect", "2s",
                              "--timeout-handshake", "2s"], prefix=inside, timeout=120)
            took = time.monotonic() - start
            doc = pp.load(out)
            self.assertTrue(s.alive())
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        # Each case: its data-connect stage bound (connect + handshake = 4 s) and 2 s of grace,
        # then a new control connection for the next (the server ends the stuck session then).
        self.assertLess(took, 2 * (4 + 2) + 10, proc.stdout + proc.stderr)
        for r in doc["results"]:
            self.assertIn(r["status"], ("error", "unreachable"), r)
            self.assertTrue("data connect" in r["message"] or "wireup" in r["message"], r["message"])
        self.assertIn("did not end within its bound", doc["results"][0]["message"])
        print(doc["results"][0]["message"], f"({took:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    pp.main()
