"""The Debian packages install with apt into a clean Debian 12 tree made from Debian's mirror
(mmdebstrap), and pairperf works there: info, a loopback run, report, and the MPI mesh under
mpirun. A Depends that dpkg-shlibdeps or we left out shows up here as a command that cannot
start. Skips, with the reason printed, without root, mmdebstrap or the mirror."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import shiplib  # noqa: E402
from shiplib import pp  # noqa: E402

REASON = shiplib.missing(("mmdebstrap", "mmdebstrap"), ("dpkg-shlibdeps", "dpkg-dev"),
                         ("unshare", "util-linux"))
HAVE_MPI = os.path.exists(os.path.join(shiplib.BUILD, "libexec", "pairperf-mpi"))


@unittest.skipIf(REASON is not None, REASON or "")
class DebInCleanDebian(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = pp.tmpdir()
        cls.root = os.path.join(cls.tmp.name, "root")
        extra = ["--with", "python3-matplotlib", "--with", "python3-jsonschema"] + (["--mpi"] if HAVE_MPI else [])
        why, cls.log = shiplib.make_rootfs(cls.root, *extra)
        if why:
            print(f"SKIP: {why}", flush=True)
            raise unittest.SkipTest(why)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_depends_are_computed_and_installed(self):
        r = subprocess.run(["chroot", self.root, "dpkg-query", "-W", "-f", "${Depends}", "pairperf"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        for lib in ("libucx0", "libibverbs1", "librdmacm1", "libfabric1", "libfmt9", "libc6", "python3"):
            self.assertIn(lib, r.stdout)
        self.assertNotIn("libopenmpi3", r.stdout, "MPI belongs to pairperf-mpi")

    def test_info(self):
        r = shiplib.in_root(self.root, "pairperf", "info", "--json")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        info = json.loads(r.stdout)
        self.assertIn("ucx", info["tool"]["transports"])
        self.assertIn("ofi", info["tool"]["transports"])
        self.assertIn("tcp;ofi_rxm", {p["provider"] for p in info["tool"]["libraries"]["ofi"]["providers"]})
        self.assertEqual(info["private_files"]["report"], "/usr/libexec/pairperf/report")
        if HAVE_MPI:
            self.assertEqual(info["private_files"]["pairperf-mpi"], "/usr/libexec/pairperf/pairperf-mpi")

    def test_loopback_run_and_report(self):
        script = ("pairperf run -t tcp,ucx,ofi --tls posix,sysv,cma --ofi-provider 'tcp;ofi_rxm' "
                  "--test tcp_lat,tcp_bw,tag_lat,tag_bw,fi_tag_lat --sizes 8,64K "
                  "-d 0.1s --json /tmp/r.json && pairperf report /tmp/r.json --out /tmp/pics && "
                  "ls /tmp/pics && cat /tmp/r.json")
        r = shiplib.in_root(self.root, "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("index.html", r.stdout)
        doc = json.loads(r.stdout[r.stdout.index("{"):])
        self.assertEqual(doc["outcome"]["exit_code"], 0, doc["outcome"])
        self.assertEqual(len(doc["results"]), 10)
        self.assertTrue(all(c["status"] == "ok" for c in doc["results"]))

    @unittest.skipUnless(HAVE_MPI, "built without MPI: no pairperf-mpi package")
    def test_mpirun_mesh_from_pairperf_mpi(self):
        r = shiplib.in_root(self.root, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                            "pairperf", "mesh", "--iface", "lo", "--test", "tcp_lat", "--one-way",
                            "--no-retest", "-d", "0.05s", "--json", "-")
        self.assertIn(r.returncode, (0, 3), r.stdout + r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(len(doc["mesh"]["nodes"]), 2)


if __name__ == "__main__":
    if REASON:
        print(f"SKIP: {REASON}", flush=True)
    pp.main()
