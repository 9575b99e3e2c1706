"""GPU buffers end to end. Where this host has a usable GPU and a UCX with cuda_copy, cuda
buffers move through UCX (both sides GPU, and host to GPU), bytes are validated, and the row
says fast path or fallback. Everywhere, the cases say why when they cannot run (no driver, no
device, no CUDA build), `--gpu` refuses bad values, and a UCX_TLS without cuda_copy is refused
with the reason. The GPU-only part skips with the reason printed."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp


def info():
    proc, _ = pp.run(["info", "--json"], timeout=30)
    return json.loads(proc.stdout)


INFO = info()
CUDA = INFO["memory_types"]["cuda"]
UCX_CUDA = "ucx" in INFO["tool"]["transports"] and "cuda_copy" in INFO["tool"]["libraries"].get("ucx", {}).get("transports", [])
GPU_REASON = None
if CUDA != "available":
    GPU_REASON = f"no GPU to use here: {CUDA}"
elif not UCX_CUDA:
    GPU_REASON = "this host's UCX has no cuda_copy (Debian's UCX is built without CUDA)"
if GPU_REASON:
    print(f"SKIP (GPU transfers): {GPU_REASON}", flush=True)


class Everywhere(unittest.TestCase):
    def test_cuda_cases_say_why_they_cannot_run(self):
        if CUDA == "available":
            self.skipTest("this host has a GPU")
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "ucx,tcp", "--test", "tag_bw,tcp_bw", "--mem", "cuda,cuda", "--mem", "host,cuda",
                              "--sizes", "64K", "--json", out, "-q"], timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            doc = pp.load(out)
        self.assertTrue(doc["results"])
        for r in doc["results"]:
            self.assertEqual(r["status"], "skipped", r)
            self.assertIn("cuda memory:", r["message"])
            self.assertIn(CUDA, r["message"])

    def test_bad_gpu_values_exit_2(self):
        for spec in ("fast", "-2", "0,GPU"):
            with self.subTest(spec=spec):
                proc, took = pp.run(["run", "--gpu", spec, "--sizes", "8", "--no-json"], timeout=30)
                if spec == "0,GPU":  # "GPU" is a UUID prefix: accepted, matched later
                    continue
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("--gpu", proc.stderr)
        proc, _ = pp.run(["server", "--gpu", "nope", "--port", "0"], timeout=30)
        self.assertEqual(proc.returncode, 2)


@unittest.skipIf(GPU_REASON is not None, GPU_REASON or "")
class OnAGpu(unittest.TestCase):
    def test_gpu_buffers_through_ucx_validated_with_a_path_verdict(self):
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "ucx", "--test", "tag_bw,tag_lat", "--mem", "cuda,cuda", "--mem", "host,cuda",
                              "--sizes", "8,1M", "--validate", "--json", out, "-q"], timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            doc = pp.load(out)
        for r in doc["results"]:
            with self.subTest(case=r["case"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertIn(r["gpu_path"]["verdict"], ("fast path", "fallback", "unknown"))

    def test_tls_without_cuda_copy_is_refused(self):
        proc, _ = pp.run(["run", "-t", "ucx", "--test", "tag_bw", "--mem", "cuda,cuda", "--tls", "tcp", "--sizes", "64K",
                          "--no-json"], timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("has no cuda_copy", proc.stdout)


if __name__ == "__main__":
    pp.main()
