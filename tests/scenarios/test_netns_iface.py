"""Two network namespaces joined by two veth pairs: --iface picks the path, provenance shows it,
and an interface that cannot reach the server is a status with its errno, not a hang.

Needs root (ip netns); anywhere else every test skips with the reason printed."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_tools import netns

TAG = str(os.getpid() % 100000)
NS_A, NS_B = f"ppa{TAG}", f"ppb{TAG}"
# (client iface, server iface, client address, server address)
LINKS = [(f"va0x{TAG}", f"vb0x{TAG}", "10.201.1.1", "10.201.1.2"), (f"va1x{TAG}", f"vb1x{TAG}", "10.201.2.1", "10.201.2.2")]


REASON = netns.unavailable(TAG)
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
class TwoLinks(pp.WithNamespaces):
    @classmethod
    def build(cls, nets):
        nets.add(NS_A)
        nets.add(NS_B)
        for a, b, addr_a, addr_b in LINKS:
            nets.link((NS_A, a, addr_a), (NS_B, b, addr_b))

    def client(self, server, *args):
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, took = pp.run(["run", f"{LINKS[0][3]}:{server.port}", "--json", out, "--test", "tcp_lat", "--sizes", "64",
                                 "-n", "50", "--timeout-connect", "1s"] + list(args),
                                prefix=("ip", "netns", "exec", NS_A), timeout=60)
            doc = pp.load(out) if os.path.exists(out) else None
            if doc is not None:
                self.assertEqual(pp.schema_errors(out), [])
            return proc, doc, took

    def test_iface_picks_the_path_and_provenance_shows_it(self):
        with pp.Server(listen="::", prefix=("ip", "netns", "exec", NS_B)) as s:
            for a, b, addr_a, addr_b in LINKS:
                with self.subTest(iface=a):
                    proc, doc, _ = self.client(s, "--iface", a)
                    self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                    r = doc["results"][0]
                    self.assertEqual(r["provenance"]["lanes"], [{"transport": "tcp", "device": a, "kind": "network"}])
                    self.assertTrue(r["provenance"]["client"]["local"].startswith(addr_a + ":"), r["provenance"]["client"])
                    self.assertTrue(r["provenance"]["client"]["remote"].startswith(addr_b + ":"))
                    self.assertEqual(r["provenance"]["server"]["iface"], b)
                    self.assertEqual(r["provenance"]["client"]["bind"], "device")
            # The control connection itself went over the first link.
            self.assertEqual(doc["context"]["control_iface"], LINKS[0][0])

    def test_iface_all_marks_what_cannot_reach(self):
        with pp.Server(listen="::", prefix=("ip", "netns", "exec", NS_B)) as s:
            proc, doc, took = self.client(s, "--iface", "all")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)  # an unreachable case is not ok
        by_iface = {r["case"]["iface"]: r for r in doc["results"]}
        self.assertEqual(set(by_iface), {"lo", LINKS[0][0], LINKS[1][0]})
        self.assertEqual(by_iface[LINKS[0][0]]["status"], "ok")
        self.assertEqual(by_iface[LINKS[1][0]]["status"], "ok")
        lo = by_iface["lo"]
        self.assertEqual(lo["status"], "unreachable", lo)
        self.assertIn("data connect", lo["message"])
        self.assertIn("interface lo", lo["message"])
        self.assertLess(took, 30)

    def test_peer_link_down_is_unreachable_within_the_connect_timeout(self):
        a, b, _, addr_b = LINKS[1]
        netns.sh("ip", "-n", NS_B, "link", "set", b, "down")
        try:
            with pp.Server(listen="::", prefix=("ip", "netns", "exec", NS_B)) as s:
                proc, doc, took = self.client(s, "--iface", a)
        finally:
            netns.sh("ip", "-n", NS_B, "link", "set", b, "up")
        self.assertEqual(proc.returncode, 1)
        r = doc["results"][0]
        self.assertEqual(r["status"], "unreachable", r)
        # The server no longer advertises the downed link's address, so the client tries the control
        # address through the chosen interface, and says so.
        self.assertNotIn(addr_b, r["message"])
        self.assertIn(f"peer {LINKS[0][3]}:", r["message"])
        self.assertIn(f"interface {a}", r["message"])
        self.assertIn("timeout", r["message"])
        self.assertLess(took, 15)


if __name__ == "__main__":
    pp.main()
