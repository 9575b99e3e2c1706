"""The verbs transport on real verbs: scripts/softroce-vm boots Debian's kernel under qemu with
Soft-RoCE (rxe0) and runs tests/softroce/verbs_suite.sh there (every verbs test, several sizes,
--validate, with and without --rdma-cm, several QPs, a lower MTU, event progress, --iface).
The results come back as JSON and are checked here.

Skips with the reason printed where the VM cannot run (no qemu, no rxe provider, the kernel
package cannot be fetched), or where the binary was built without verbs."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

SUITE = os.path.join(pp.SOURCE_DIR, "tests", "softroce", "verbs_suite.sh")
TESTS = ["write_lat", "write_bw", "write_bibw", "read_lat", "read_bw", "send_lat", "send_bw"]


def why_not_runnable():
    proc, _ = pp.run(["info", "--json"], timeout=30)
    if "verbs" not in json.loads(proc.stdout)["tool"]["transports"]:
        return "this pairperf was built without the verbs transport"
    if why := pp.softroce_vm_unavailable():
        return why
    return None


REASON = why_not_runnable()
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
class VerbsInSoftRoce(pp.SoftRoceSuite):
    SUITE = SUITE
    TIMEOUT = 500

    def test_the_vm_suite_passed(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout[-4000:] + self.proc.stderr[-2000:])

    def test_every_test_and_size_with_validation(self):
        rs = self.results("all")
        self.assertEqual({r["case"]["test"] for r in rs}, set(TESTS))
        self.assertEqual(len(rs), len(TESTS) * 4)
        for r in rs:
            with self.subTest(test=r["case"]["test"], size=r["case"]["size_bytes"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertGreater(r["validation"]["messages_checked"], 0)
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertEqual(r["provenance"]["lanes"], [{"transport": "rc", "device": "rxe0:1", "kind": "rdma"}])
                d = r["provenance"]["client"]
                self.assertEqual((d["device"], d["link_layer"], d["gid_type"]), ("rxe0", "Ethernet", "RoCE v2"))
                self.assertEqual(d["gid_chosen_by"], "RoCE v2, IPv4-mapped")
                self.assertTrue(d["gid"].startswith("0000:0000:0000:0000:0000:ffff:"), d["gid"])
                self.assertEqual(d["path_mtu_bytes"], d["active_mtu_bytes"])  # queried, not hard-coded
                self.assertEqual(d["connection"], "control channel")
                if r["case"]["pattern"] == "pingpong":
                    self.assertGreater(r["latency_s"]["p50"], 0)
                else:
                    b = r["bandwidth_Bps"]
                    self.assertGreater(b["receiver"] or b["sender"], 0)
        inline = [r for r in rs if r["case"]["size_bytes"] <= 64]
        self.assertTrue(all(r["provenance"]["client"]["max_inline_bytes"] >= 64 for r in inline))

    def test_rdma_cm(self):
        rs = self.results("rdma_cm")
        self.assertEqual(len(rs), len(TESTS) * 2)
        for r in rs:
            with self.subTest(test=r["case"]["test"], size=r["case"]["size_bytes"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertEqual(r["provenance"]["client"]["connection"], "rdma_cm")

    def test_several_qps_keep_order_and_bytes(self):
        for r in self.results("qps"):
            with self.subTest(test=r["case"]["test"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertEqual(r["provenance"]["client"]["data_qps"], 3)
                self.assertEqual(r["provenance"]["client"]["signal_every"], 4)

    def test_mtu_lowered_and_event_progress(self):
        (r,) = self.results("mtu")
        self.assertEqual(r["status"], "ok", r.get("message"))
        self.assertEqual(r["provenance"]["client"]["path_mtu_bytes"], 512)
        for r in self.results("event"):
            self.assertEqual(r["status"], "ok", r.get("message"))
            self.assertEqual(r["provenance"]["client"]["progress"], "event")

    def test_a_time_budget_on_receives_posted_ahead(self):
        # send_lat is timed: the server posts each next receive before it answers (RC has no
        # unexpected queue), so the phase's end fills the one left posted with the closing message;
        # the measured phase after the pilot and the next case would fail if it stayed.
        rs = self.results("timed")
        self.assertEqual(len(rs), 6)
        for r in rs:
            with self.subTest(test=r["case"]["test"], size=r["case"]["size_bytes"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertGreater(r["iterations"], 10)
                if r["case"]["test"] == "send_lat":
                    self.assertGreaterEqual(r["elapsed_s"], 0.3)
                    self.assertLess(r["elapsed_s"], 0.6)

    def test_iface_maps_to_the_rdma_device(self):
        (r,) = self.results("iface")
        self.assertEqual(r["status"], "ok", r.get("message"))
        self.assertEqual(r["provenance"]["client"]["gid_netdev"], "rxenet0")
        (s,) = self.results("noiface")
        self.assertEqual(s["status"], "skipped")
        self.assertIn("no RDMA device on lo", s["message"])


class NoDeviceHere(unittest.TestCase):
    """This host has no RDMA device: verbs cases are skipped with the reason, info says so."""

    def test_skipped_with_the_reason(self):
        if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
            self.skipTest("this host has RDMA devices")
        proc, _ = pp.run(["info", "--json"], timeout=30)
        if "verbs" not in json.loads(proc.stdout)["tool"]["transports"]:
            self.skipTest("built without verbs")
        proc, took = pp.run(["run", "-t", "verbs", "--sizes", "8", "--no-json", "-n", "10"], timeout=60)
        self.assertEqual(proc.returncode, 4, proc.stderr)  # every case skipped: inconclusive
        self.assertIn("7 skipped", proc.stdout)
        self.assertIn("no RDMA device on this host", proc.stdout)
        proc, _ = pp.run(["info"], timeout=30)
        self.assertIn("unavailable here: no RDMA device", proc.stdout)
        proc, _ = pp.run(["run", "--sizes", "8", "--no-json", "-n", "10", "-t", "tcp"], timeout=60)
        self.assertEqual(proc.returncode, 0)


if __name__ == "__main__":
    pp.main()
