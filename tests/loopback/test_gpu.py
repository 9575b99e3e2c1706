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
            self.assertEqual(proc.returncode, 4, proc.stderr)  # nothing measured: inconclusive, never green
            self.assertIn("nothing was measured", proc.stderr)
            doc = pp.load(out)
        self.assertTrue(doc["results"])
        for r in doc["results"]:
            self.assertEqual(r["status"], "skipped", r)
            self.assertIn("cuda memory:", r["message"])
            self.assertIn(CUDA, r["message"])

    def test_info_reads_a_saved_topology_and_names_the_nearest_nics(self):
        fixture = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "topo", "h20x8.txt")
        proc, _ = pp.run(["info", "--topo-file", fixture, "--json"], timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        topo = json.loads(proc.stdout)["gpu_topology"]
        self.assertTrue(topo["available"])
        self.assertEqual(len(topo["gpus"]), 8)
        self.assertEqual(topo["links"][0][1], "NV18")
        self.assertIn("nearest NIC: NIC0 ibp14s0 (PIX)", topo["summary"][0])
        proc, _ = pp.run(["info", "--topo-file", fixture], timeout=30)
        self.assertIn("GPU5: NV18 to all 7 other GPUs; nearest NIC: NIC3 ibp192s0 (PIX)", proc.stdout)
        # Without a file, nvidia-smi is asked; where there is none the reason is given.
        topo = INFO["gpu_topology"]
        if not topo["available"]:
            self.assertTrue(topo["reason"])
        for bad, why in (("/nonexistent/topo.txt", "cannot read it"), (os.path.join(pp.SOURCE_DIR, "README.md"), "no GPU matrix")):
            proc, _ = pp.run(["info", "--topo-file", bad], timeout=30)
            self.assertEqual(proc.returncode, 2)
            self.assertIn(why, proc.stderr)

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


FAKE_NVML_DIR = os.environ.get("PAIRPERF_FAKE_NVML_DIR", "")
FAKE_NVML_REASON = None if FAKE_NVML_DIR and os.path.exists(os.path.join(FAKE_NVML_DIR, "libnvidia-ml.so.1")) else \
    "no fake NVML was built (nvml.h was not found when the build was configured)"
# Two H100 pairs joined by NVLink; each GPU's peer is the other one's bus id.
PAIR_A = ("GPU-aaaaaaaa-0000-0000-0000-000000000001,00000000:18:00.0,NVIDIA H100 80GB HBM3,00000000:2A:00.0|00000000:2A:00.0;"
          "GPU-bbbbbbbb-0000-0000-0000-000000000002,00000000:2A:00.0,NVIDIA H100 80GB HBM3,00000000:18:00.0|00000000:18:00.0")
PAIR_C = ("GPU-cccccccc-0000-0000-0000-000000000003,00000000:9A:00.0,NVIDIA H100 80GB HBM3,00000000:AB:00.0;"
          "GPU-dddddddd-0000-0000-0000-000000000004,00000000:AB:00.0,NVIDIA H100 80GB HBM3,00000000:9A:00.0")


def fake_nvml_env(gpus):
    return pp.with_library_path(pp.clean_env(PAIRPERF_FAKE_NVML=gpus), FAKE_NVML_DIR)


@unittest.skipIf(FAKE_NVML_REASON is not None, FAKE_NVML_REASON or "")
class WithFakeNvml(unittest.TestCase):
    """pairperf's NVML reader and doctor's GPU verdicts end to end, against a test double of the
    driver's libnvidia-ml.so.1 built from the real nvml.h (tests/fakes/fake_nvml.c)."""

    def test_info_lists_the_gpus_nvml_reports(self):
        proc, _ = pp.run(["info", "--json"], timeout=30, env=fake_nvml_env(PAIR_A))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(pp.schema_errors_of(json.loads(proc.stdout)), [])
        gpus = json.loads(proc.stdout)["host"]["gpus"]
        self.assertTrue(gpus["available"], gpus)
        self.assertEqual(gpus["driver"], "580.00.00-fake")
        self.assertEqual([g["uuid"] for g in gpus["gpus"]], ["GPU-aaaaaaaa-0000-0000-0000-000000000001",
                                                             "GPU-bbbbbbbb-0000-0000-0000-000000000002"])
        self.assertEqual(gpus["gpus"][0]["bus_id"], "0000:18:00.0")  # the short form, lower case
        self.assertEqual(gpus["gpus"][0]["nvlink_peers"], ["0000:2a:00.0", "0000:2a:00.0"])
        self.assertEqual(gpus["gpus"][1]["name"], "NVIDIA H100 80GB HBM3")
        proc, _ = pp.run(["info", "--json"], timeout=30, env=fake_nvml_env(""))
        gpus = json.loads(proc.stdout)["host"]["gpus"]
        self.assertFalse(gpus["available"])
        self.assertIn("Driver Not Loaded", gpus["reason"])

    def test_doctor_explains_two_containers_that_see_different_gpus(self):
        with pp.Server(env=fake_nvml_env(PAIR_C)) as server, pp.tmpdir() as d:
            out = os.path.join(d, "doctor.json")
            proc, _ = pp.run(["doctor", server.address, "--iface", "lo", "--json", out, "-q"], timeout=180,
                             env=fake_nvml_env(PAIR_A))
            self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
            doc = pp.load(out)
        self.assertEqual(doc["gpus"]["expected"], "cuda_ipc impossible")
        text = json.dumps(doc["findings"])
        self.assertIn("each side sees only its own GPUs (client GPU-aaaaaaaa, GPU-bbbbbbbb; server GPU-cccccccc, GPU-dddddddd)", text)
        self.assertIn("NVIDIA_VISIBLE_DEVICES=all", text)
        if CUDA != "available":  # the GPU path itself cannot be measured here, and doctor says why
            self.assertIn("GPU buffers could not go through UCX: skipped", text)

    def test_doctor_expects_cuda_ipc_over_nvlink_when_both_see_both_gpus(self):
        with pp.Server(env=fake_nvml_env(PAIR_A)) as server, pp.tmpdir() as d:
            out = os.path.join(d, "doctor.json")
            pp.run(["doctor", server.address, "--iface", "lo", "--no-ucx", "--json", out, "-q"], timeout=180,
                   env=fake_nvml_env(PAIR_A))
            doc = pp.load(out)
        self.assertEqual(doc["gpus"]["expected"], "cuda_ipc over NVLink", doc["gpus"])
        self.assertNotIn("GPUs", [f["subject"] for f in doc["findings"]])


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
                tls = r["case"].get("tls", "")
                if tls and "cuda_copy" not in tls.split(","):
                    # The default axis's host-only sets (tcp; posix,sysv,cma): UCX cannot move GPU
                    # memory without cuda_copy, and the row says so instead of failing.
                    self.assertEqual(r["status"], "skipped", r)
                    self.assertIn("cuda_copy", r["message"])
                    continue
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                mixed = r["case"]["memory"][0] != r["case"]["memory"][1]
                self.assertIn(r["gpu_path"]["verdict"], ("host-GPU copy",) if mixed else ("fast path", "fallback", "unknown"))

    def test_cuda_ipc_is_the_fast_path_and_cuda_copy_tcp_a_fallback(self):
        """Two processes on one GPU (issue 5): with cuda_ipc the rows are the fast path and pass
        --expect transport=cuda_ipc; without it GPU data goes over tcp, a fallback, and fails it."""
        wanted = {"cuda_ipc,cuda_copy,tcp": ("fast path", 0), "cuda_copy,tcp": ("fallback", 3)}
        for tls, (verdict, code) in wanted.items():
            with self.subTest(tls=tls), pp.tmpdir() as d:
                out = os.path.join(d, "r.json")
                proc, _ = pp.run(["run", "-t", "ucx", "--test", "tag_bw", "--mem", "cuda,cuda", "--tls", tls,
                                  "--sizes", "1M,16M", "-n", "100", "--validate", "--expect", "transport=cuda_ipc",
                                  "--json", out, "-q"], timeout=300)
                self.assertEqual(proc.returncode, code, proc.stdout + proc.stderr)
                for r in pp.load(out)["results"]:
                    # A missed --expect makes the row a failure (exit 3); the transfer itself ran.
                    self.assertEqual(r["status"], "ok" if code == 0 else "fail", r.get("message"))
                    self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                    self.assertEqual(r["gpu_path"]["verdict"], verdict, r["gpu_path"])
                    self.assertEqual(r["verdict"]["pass"], code == 0, r["verdict"])

    def test_rma_with_cuda_memory_runs_or_says_why(self):
        """UCX's v1 protocols (the default before 1.16) take the initiator's buffer for host
        memory: put/get on cuda are refused there with the way out, and run on v2."""
        version = INFO["tool"]["libraries"]["ucx"]["version"].split(".")
        v2_default = (int(version[0]), int(version[1])) >= (1, 16)
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "ucx", "--test", "put_bw,get_bw", "--mem", "cuda,cuda",
                              "--tls", "cuda_ipc,cuda_copy,tcp", "--sizes", "64K", "-n", "100", "--json", out, "-q"],
                             timeout=300, env=pp.clean_env())
            # Every case skipped is nothing measured: inconclusive (4), never green.
            self.assertEqual(proc.returncode, 0 if v2_default else 4, proc.stdout + proc.stderr)
            for r in pp.load(out)["results"]:
                if v2_default:
                    self.assertEqual(r["status"], "ok", r.get("message"))
                else:
                    self.assertEqual(r["status"], "skipped", r)
                    self.assertIn("--ucx PROTO_ENABLE=y", r["message"])
            proc, _ = pp.run(["run", "-t", "ucx", "--test", "put_bw,get_bw", "--mem", "cuda,cuda",
                              "--tls", "cuda_ipc,cuda_copy,tcp", "--ucx", "PROTO_ENABLE=y", "--sizes", "64K,4M",
                              "-n", "100", "--validate", "--json", out, "-q"], timeout=300, env=pp.clean_env())
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            for r in pp.load(out)["results"]:
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)

    def test_doctor_between_two_processes_that_share_a_gpu(self):
        """Both sides see this host's GPUs (one environment): doctor expects cuda_ipc and its GPU
        probe, with UCX's default transports, is the fast path."""
        env = pp.clean_env()
        with pp.Server(env=env) as server:
            proc, doc = pp.doctor_json(server.address, "--iface", "lo", env=env, timeout=300)
        self.assertIsNotNone(doc, proc.stdout + proc.stderr)
        self.assertIn(doc["gpus"]["expected"], ("cuda_ipc within one GPU", "cuda_ipc over NVLink", "cuda_ipc over PCIe"), doc["gpus"])
        rows = [c for c in doc["path"] if c["case"]["memory"] == ["cuda", "cuda"]]
        self.assertEqual(len(rows), 1, doc["path"])
        self.assertEqual(rows[0]["status"], "ok", rows[0].get("message"))
        self.assertEqual(rows[0]["gpu_path"]["verdict"], "fast path", rows[0]["gpu_path"])
        self.assertNotIn("GPU path", [f["subject"] for f in doc["findings"]], doc["findings"])

    def test_tls_without_cuda_copy_is_refused(self):
        proc, _ = pp.run(["run", "-t", "ucx", "--test", "tag_bw", "--mem", "cuda,cuda", "--tls", "tcp", "--sizes", "64K",
                          "--no-json"], timeout=120)
        self.assertEqual(proc.returncode, 4, proc.stderr)  # its only case skipped: nothing measured
        self.assertIn("has no cuda_copy", proc.stdout)


if __name__ == "__main__":
    pp.main()
