"""scripts/build-image makes an OCI archive from the .deb without a registry, and the Kubernetes
manifests in deploy/kubernetes run their own commands in that image's root file system
(scripts/kube-local, since `podman run` and a cluster are not available here):
- two pods on one node, host-memory twin of the GPU case: the broken variant (own IPC and PID
  namespaces) fails its expectation with exit 3 because UCX falls back to tcp, and the fixed
  variant (hostIPC, hostPID) passes on shared memory;
- the server DaemonSet on three nodes and the mesh Job finding them through the headless Service;
- two pods on two nodes over the pod network.
Skips, with the reason printed, without root, mmdebstrap, podman or Debian's mirror."""
import json
import os
import subprocess
import sys
import tarfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import shiplib  # noqa: E402
from shiplib import pp  # noqa: E402

DEPLOY = os.path.join(pp.SOURCE_DIR, "deploy", "kubernetes")
REASON = shiplib.missing(("mmdebstrap", "mmdebstrap"), ("podman", "podman"),
                         ("dpkg-shlibdeps", "dpkg-dev"), ("ip", "iproute2"), ("nsenter", "util-linux"))
if REASON is None:
    try:
        import yaml  # noqa: F401
    except ImportError:
        REASON = "python3-yaml is not installed (scripts/setup installs it)"
CUDA_UCX = os.path.join(pp.SOURCE_DIR, "build-ucx-cuda", "lib", "ucx", "libuct_cuda.so.0")
HOST_TWIN = ["--set-env", "PAIRPERF_MEM=host,host", "--set-env", "PAIRPERF_EXPECT=transport!=tcp"]


def unpack_oci(archive, root):
    """The image's root file system from its OCI archive: index -> manifest -> layers."""
    with tarfile.open(archive) as t:
        index = json.load(t.extractfile("index.json"))
        blob = lambda d: t.extractfile("blobs/sha256/" + d.split(":")[1])  # noqa: E731
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        config = json.load(blob(manifest["config"]["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as lt:
                lt.extractall(root, numeric_owner=True)
    return config


@unittest.skipIf(REASON is not None, REASON or "")
class ImageAndManifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = pp.tmpdir()
        out = os.path.join(cls.tmp.name, "images")
        # Both variants from one tree where the CUDA UCX is built (scripts/test builds it where the
        # CUDA toolkit is installed); the host variant alone elsewhere.
        cls.cuda_ucx = os.path.exists(CUDA_UCX)
        variants = ["--all"] if cls.cuda_ucx else []
        r = shiplib.script("build-image", *variants, "--build", shiplib.BUILD, "--out", out, timeout=1200)
        if r.returncode != 0:
            why = shiplib.OFFLINE.search(r.stdout + r.stderr)
            if why:
                print(f"SKIP: Debian's mirror cannot be reached: {why.group(0)}", flush=True)
                raise unittest.SkipTest(why.group(0))
            raise AssertionError("scripts/build-image failed:\n" + r.stdout + r.stderr)
        cls.build_output = r.stdout
        print(r.stdout.strip(), flush=True)
        cls.archives = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".oci.tar"))
        host = [a for a in cls.archives if not a.endswith("-cuda.oci.tar")]
        assert len(host) == 1 and len(cls.archives) == 1 + cls.cuda_ucx, cls.archives
        cls.archive = host[0]
        cls.root = os.path.join(cls.tmp.name, "root")
        os.makedirs(cls.root)
        cls.config = unpack_oci(cls.archive, cls.root)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def kube(self, *manifests, args=(), nodes=2):
        result = os.path.join(self.tmp.name, "kube.json")
        claims = os.path.join(self.tmp.name, "claims")
        os.makedirs(claims, exist_ok=True)
        cmd = [os.path.join(shiplib.SCRIPTS, "kube-local"), "--root", self.root, "--nodes", str(nodes),
               "--secret", "pairperf/token=test-token", "--results", claims, "--timeout", "240",
               "--json", result] + list(args) + [os.path.join(DEPLOY, m) for m in manifests]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if os.path.exists(result):
            self.assertEqual(pp.schema_errors(result), [])
        jobs = pp.load(result)["jobs"] if os.path.exists(result) else {}
        return r, jobs, claims

    def test_archive_is_an_image_of_the_package(self):
        self.assertIn("localhost/pairperf:", self.build_output)
        self.assertEqual(self.config["config"]["Entrypoint"], ["pairperf"])
        r = shiplib.in_root(self.root, "pairperf", "--version")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = shiplib.in_root(self.root, "dpkg-query", "-W", "pairperf")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertLess(os.path.getsize(self.archive), 200 << 20)

    def test_cuda_variant_carries_ucx_built_with_cuda(self):
        if not self.cuda_ucx:
            self.skipTest("no CUDA-enabled UCX built here (scripts/build-ucx-cuda; scripts/test builds "
                          "it where the CUDA toolkit is installed)")
        archive = [a for a in self.archives if a.endswith("-cuda.oci.tar")][0]
        self.assertIn("localhost/pairperf:", self.build_output)
        self.assertRegex(self.build_output, r"localhost/pairperf:\S+-cuda -> ")
        root = os.path.join(self.tmp.name, "cuda-root")
        os.makedirs(root)
        env = unpack_oci(archive, root)["config"]["Env"]
        self.assertIn("LD_LIBRARY_PATH=/opt/ucx-cuda/lib", env)
        r = shiplib.in_root(root, "pairperf", "info", "--json",
                            args=["--env", "LD_LIBRARY_PATH=/opt/ucx-cuda/lib"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        cuda = json.loads(r.stdout)["tool"]["libraries"]["ucx"]["cuda"]
        self.assertEqual(cuda["module"], "/opt/ucx-cuda/lib/ucx/libuct_cuda.so.0", cuda)
        # No driver here: the module is there and says why it cannot load.
        self.assertIn("libcuda.so.1", cuda["why_not"])
        # The host image is the same tree without the CUDA UCX.
        self.assertFalse(os.path.exists(os.path.join(self.root, "opt", "ucx-cuda")))
        self.assertNotIn("LD_LIBRARY_PATH=/opt/ucx-cuda/lib", self.config["config"]["Env"])

    def test_two_pods_one_node_broken_misses_its_expectation(self):
        r, jobs, _ = self.kube("two-pods-same-node-broken.yaml", args=HOST_TWIN, nodes=1)
        out = r.stdout + r.stderr
        self.assertEqual(jobs.get("pairperf-pair-broken-client"), 3, out)
        self.assertIn("tcp/eth0", out)
        self.assertIn("different IPC namespaces", out)
        self.assertIn("hostIPC: true", out)  # the fix, named

    def test_two_pods_one_node_fixed_uses_shared_memory(self):
        r, jobs, _ = self.kube("two-pods-same-node-fixed.yaml", args=HOST_TWIN, nodes=1)
        out = r.stdout + r.stderr
        self.assertEqual(jobs.get("pairperf-pair-fixed-client"), 0, out)
        self.assertNotIn("tcp/eth0", out)
        self.assertRegex(out, r"(sysv|posix|cma)/memory")

    def test_mesh_job_finds_the_daemonset_through_the_service(self):
        r, jobs, claims = self.kube("namespace.yaml", "server-daemonset.yaml", "mesh-job.yaml", nodes=3)
        out = r.stdout + r.stderr
        code = jobs.get("pairperf-mesh")
        doc = pp.load(os.path.join(claims, "pairperf-results", "mesh.json"))
        self.assertEqual(sorted(doc["mesh"]["nodes"]), ["node-1", "node-2", "node-3"])
        pairs = doc["mesh"]["pairs"]
        self.assertEqual(len(pairs), 6)  # every pair, both directions
        verdicts = [(p["client_name"], p["server_name"], p["verdict"]) for p in pairs]
        print(f"mesh job exit {code}: {verdicts}", flush=True)
        # Every pair measured: "contention" (slow in its round, fine when retested alone),
        # "slow link" (slow alone too) and "noisy" (slow alone while its processes waited for a
        # CPU: three nodes on this 2-core host) are measurements of a busy host, not failures;
        # "error" or "unreachable" would be.
        self.assertTrue(all(v in ("ok", "contention", "slow link", "noisy") for *_, v in verdicts),
                        verdicts)
        # The exit code is the one contract's reading of those verdicts: a slow link misses (3);
        # noisy pairs alone make the mesh inconclusive (4), and it says why.
        kinds = {v for *_, v in verdicts}
        failing = [f for f in doc.get("findings", []) if f.get("severity") == "fails"]
        self.assertEqual(doc["outcome"]["exit_code"], code, out)
        if "slow link" in kinds or failing:  # failing: an asymmetric link on a busy host
            self.assertEqual(code, 3, out)
        elif "noisy" in kinds:
            self.assertEqual(code, 4, out)
            self.assertIn("stayed noisy measured alone", out)
        else:
            self.assertEqual(code, 0, out)

    def test_two_nodes_pod_network(self):
        r, jobs, _ = self.kube("two-nodes-pod-network.yaml", nodes=2)
        self.assertEqual(jobs.get("pairperf-pod-network-client"), 0, r.stdout + r.stderr)

    def test_the_runner_refuses_what_it_does_not_model(self):
        bad = os.path.join(self.tmp.name, "typo.yaml")
        with open(os.path.join(DEPLOY, "two-pods-same-node-fixed.yaml")) as f:
            text = f.read().replace("hostIPC: true", "hostIpc: true")
        with open(bad, "w") as f:
            f.write(text)
        r = subprocess.run([os.path.join(shiplib.SCRIPTS, "kube-local"), "--root", self.root, bad],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("hostIpc", r.stderr)


if __name__ == "__main__":
    if REASON:
        print(f"SKIP: {REASON}", flush=True)
    pp.main()
