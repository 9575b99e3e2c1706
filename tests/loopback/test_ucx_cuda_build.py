"""The CUDA-enabled UCX that scripts/build-ucx-cuda makes, and pairperf on it. GPU sessions carry
this build to a machine that has no network, so it must be right before it gets there: configured
with CUDA, the same UCX version as the libucx-dev pairperf was built against, its CUDA module
present and tied to the driver's libraries, and pairperf running unchanged on it. Where no GPU
driver is loaded (CI), pairperf must say that the module is there but cannot load, not that UCX
lacks CUDA. Registered only where the CUDA toolkit is installed; scripts/test builds the UCX."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

PREFIX = os.environ.get("PAIRPERF_UCX_CUDA", os.path.join(pp.SOURCE_DIR, "build-ucx-cuda"))
MODULE = os.path.join(PREFIX, "lib", "ucx", "libuct_cuda.so.0")


def on_cuda_ucx(**extra):
    return pp.with_library_path(pp.clean_env(**extra), os.path.join(PREFIX, "lib"))


def driver_loads():
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


class CudaUcxBuild(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(MODULE):
            raise AssertionError(f"{MODULE} is missing: run scripts/build-ucx-cuda (scripts/test runs it "
                                 "where the CUDA toolkit is installed)")

    def test_configured_with_cuda_and_the_same_version_as_the_system_ucx(self):
        built = subprocess.run([os.path.join(PREFIX, "bin", "ucx_info"), "-v"], capture_output=True, text=True,
                               timeout=30, env=on_cuda_ucx())
        self.assertEqual(built.returncode, 0, built.stderr)
        self.assertIn("--with-cuda=", built.stdout)
        system = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libucx-dev"], capture_output=True,
                                text=True, timeout=30)
        self.assertIn(f"# Version {system.stdout.split('-')[0]}", built.stdout)

    def test_module_needs_the_drivers_libraries_not_a_stub(self):
        dyn = subprocess.run(["readelf", "-d", MODULE], capture_output=True, text=True, timeout=30).stdout
        self.assertIn("[libcuda.so.1]", dyn)
        self.assertIn("[libnvidia-ml.so.1]", dyn)
        # The link-time NVML stub must never be installed: the driver's library is used at run time.
        for root, _, files in os.walk(PREFIX):
            self.assertFalse([f for f in files if f.startswith("libnvidia-ml")], root)

    def test_pairperf_runs_on_it_and_finds_its_cuda_module(self):
        proc, _ = pp.run(["info", "--json"], timeout=60, env=on_cuda_ucx())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        ucx = json.loads(proc.stdout)["tool"]["libraries"]["ucx"]
        self.assertTrue(ucx["cuda"]["ucs_library"].startswith(os.path.realpath(PREFIX)), ucx["cuda"])
        self.assertEqual(ucx["cuda"]["module"], MODULE)
        if not driver_loads():
            self.assertFalse(ucx["cuda"]["cuda_copy"])
            self.assertIn("installed but cannot load: libcuda.so.1", ucx["cuda"]["why_not"])
        # The system UCX, for contrast, has no CUDA module at all.
        proc, _ = pp.run(["info", "--json"], timeout=60, env=pp.clean_env())
        system = json.loads(proc.stdout)["tool"]["libraries"]["ucx"]["cuda"]
        if not os.path.realpath(system["ucs_library"]).startswith(os.path.realpath(PREFIX)):
            self.assertIsNone(system["module"])
            self.assertIn("built without CUDA support", system["why_not"])

    def test_host_buffers_move_validated_over_it(self):
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "ucx", "--test", "tag_bw,put_bw,tag_lat", "--tls", "tcp", "--tls", "posix,sysv,cma",
                              "--sizes", "64,1M", "--validate", "--json", out, "-q"], timeout=300, env=on_cuda_ucx())
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            doc = pp.load(out)
        self.assertEqual(len(doc["results"]), 12)
        for r in doc["results"]:
            with self.subTest(case=r["case"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)

    @unittest.skipIf(driver_loads(), "a GPU driver is loaded here: tests/loopback/test_gpu.py covers the GPU run")
    def test_cuda_tls_without_a_driver_names_the_missing_library(self):
        proc, _ = pp.run(["run", "-t", "ucx", "--test", "tag_bw", "--tls", "cuda_copy,tcp", "--sizes", "64K", "--no-json"],
                         timeout=60, env=on_cuda_ucx())
        self.assertEqual(proc.returncode, 4, proc.stderr)  # its one case skipped: nothing was judged
        self.assertIn("skipped", proc.stdout)
        self.assertIn("does not offer cuda_copy", proc.stdout)
        self.assertIn("cannot load: libcuda.so.1", proc.stdout)


class GpuBundle(unittest.TestCase):
    """scripts/gpu-bundle packs what a GPU machine without Debian's packages needs; its pairperf
    must run on the bundled CUDA UCX, and scripts/gpu-check must refuse a machine with no GPU."""

    def test_bundle_runs_on_its_own_ucx(self):
        build = os.path.dirname(pp.BIN)
        if not os.path.exists(os.path.join(build, "pairperf_micro")):
            self.skipTest(f"{build} has no pairperf_micro (built without micro-benchmarks, as the sanitizer build is)")
        with pp.tmpdir() as d:
            out = os.path.join(d, "bundle")
            p = subprocess.run([os.path.join(pp.SOURCE_DIR, "scripts", "gpu-bundle"), "--build", build, "--ucx", PREFIX,
                                "--out", out], capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            libs = os.listdir(os.path.join(out, "lib"))
            self.assertIn("libfmt.so.9", libs)
            self.assertFalse([l for l in libs if l.startswith(("libstdc++", "libc.so", "libucp", "libucs"))], libs)
            wrapper = os.path.join(out, "bin", "pairperf")
            p = subprocess.run([wrapper, "info", "--json"], capture_output=True, text=True, timeout=60, env=pp.clean_env())
            self.assertEqual(p.returncode, 0, p.stderr)
            cuda = json.loads(p.stdout)["tool"]["libraries"]["ucx"]["cuda"]
            self.assertTrue(cuda["ucs_library"].startswith(os.path.join(out, "ucx", "lib")), cuda)
            p = subprocess.run([wrapper, "run", "-t", "ucx", "--test", "tag_bw", "--tls", "tcp", "--sizes", "1M", "--validate",
                                "--no-json", "-q"], capture_output=True, text=True, timeout=120, env=pp.clean_env())
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            if subprocess.run(["sh", "-c", "command -v nvidia-smi"], capture_output=True).returncode != 0:
                p = subprocess.run([os.path.join(pp.SOURCE_DIR, "scripts", "gpu-check"), "--bundle", out, "--out",
                                    os.path.join(d, "check")], capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 3, p.stdout + p.stderr)
                self.assertIn("not a GPU machine", p.stderr)


if __name__ == "__main__":
    pp.main()
