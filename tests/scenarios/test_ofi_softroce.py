"""The libfabric (OFI) transport on libfabric's verbs provider: scripts/softroce-vm boots Debian's
kernel under qemu with Soft-RoCE (rxe0) and runs tests/softroce/ofi_suite.sh there: every OFI test
over verbs;ofi_rxm with --validate, --iface on the RDMA netdev, and the error that names
FI_UNIVERSE_SIZE when rxm sizes its completion queue beyond rxe's limit.

Skips with the reason printed where the VM cannot run (no qemu, no rxe provider, the kernel
package cannot be fetched), or where the binary was built without libfabric."""
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

SUITE = os.path.join(pp.SOURCE_DIR, "tests", "softroce", "ofi_suite.sh")
# pairperf dlopen()s libfabric, so the VM's packing (an ELF's ldd closure) must be told of it.
LIBFABRIC = next(iter(glob.glob("/usr/lib/*/libfabric.so.1") + glob.glob("/lib/*/libfabric.so.1")), None)
TESTS = ["fi_tag_lat", "fi_tag_bw", "fi_tag_bibw", "fi_write_lat", "fi_write_bw", "fi_read_lat", "fi_read_bw"]


def why_not_runnable():
    if not pp.has_transport("ofi"):
        return "this pairperf was built without the libfabric (OFI) transport"
    if why := pp.softroce_vm_unavailable():
        return why
    if not LIBFABRIC:
        return "libfabric1 is not installed"
    return None


REASON = why_not_runnable()
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
class OfiInSoftRoce(pp.SoftRoceSuite):
    SUITE = SUITE
    TIMEOUT = 400
    EXTRA_ADDS = (LIBFABRIC,)

    def test_the_vm_suite_passed(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout[-4000:] + self.proc.stderr[-2000:])

    def test_every_test_and_size_over_verbs_with_validation(self):
        rs = self.results("all")
        self.assertEqual({r["case"]["test"] for r in rs}, set(TESTS))
        self.assertEqual(len(rs), len(TESTS) * 3)
        for r in rs:
            with self.subTest(test=r["case"]["test"], size=r["case"]["size_bytes"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertGreater(r["validation"]["messages_checked"], 0)
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertEqual(r["provenance"]["lanes"], [{"transport": "verbs;ofi_rxm", "device": "rxe0", "kind": "rdma"}])
                for side in ("client", "server"):
                    d = r["provenance"][side]
                    self.assertEqual((d["provider"], d["domain"], d["protocol"]), ("verbs;ofi_rxm", "rxe0", "FI_PROTO_RXM"))
                    # verbs needs local registration and keys from the provider: both paths ran.
                    self.assertIn("FI_MR_LOCAL", d["mr_mode"])
                    self.assertIn("FI_MR_PROV_KEY", d["mr_mode"])
                    self.assertTrue(d["source"].startswith("fi_sockaddr_in://10.11.0.1:"), d["source"])

    def test_iface_pins_the_rdma_netdev(self):
        r = self.results("iface")[0]
        self.assertEqual(r["status"], "ok", r.get("message"))
        self.assertEqual(r["provenance"]["client"]["source_chosen_by"], "--iface rxenet0")

    def test_a_completion_queue_too_large_for_the_device_names_the_fix(self):
        r = self.results("universe")[0]
        self.assertEqual(r["status"], "error")
        self.assertIn("fi_enable", r["message"])
        self.assertIn("FI_UNIVERSE_SIZE=16", r["message"])


if __name__ == "__main__":
    pp.main()
