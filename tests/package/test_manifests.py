"""Every manifest in deploy/kubernetes validates against the Kubernetes API's schemas
(kubernetes-validate from PyPI, its bundled schemas, offline; scripts/setup pins it into
.deps/kubernetes-validate), strictly (a field the API does not have fails), and the check fails on a
manifest that breaks them. Skips, with the reason printed, where scripts/setup could not install it."""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import pairperf_testlib as pp  # noqa: E402

DEPLOY = os.path.join(pp.SOURCE_DIR, "deploy", "kubernetes")
TOOL = os.path.join(DEPLOY, "validate", "validate.py")
DEPS = os.path.join(pp.SOURCE_DIR, ".deps", "kubernetes-validate")
PY = "/usr/bin/python3"
REASON = None if os.path.exists(os.path.join(DEPS, "kubernetes_validate")) else \
    f"kubernetes-validate is not installed in {DEPS} (scripts/setup installs it from PyPI)"


@unittest.skipIf(REASON is not None, REASON or "")
class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = pp.tmpdir()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def validate(self, *paths):
        env = dict(os.environ, PYTHONPATH=DEPS)
        return subprocess.run([PY, TOOL] + list(paths), capture_output=True, text=True, timeout=120, env=env)

    def test_every_manifest_is_valid(self):
        r = self.validate(DEPLOY)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        names = sorted(f for f in os.listdir(DEPLOY) if f.endswith(".yaml"))
        for name in names:
            self.assertIn(name, r.stdout)
        self.assertRegex(r.stdout, r"\b(1[5-9]|[2-9]\d) object\(s\) valid, 0 invalid")

    def test_a_broken_manifest_fails(self):
        with open(os.path.join(DEPLOY, "mesh-job.yaml")) as f:
            text = f.read()
        bad = os.path.join(self.tmp.name, "bad.yaml")
        with open(bad, "w") as f:
            f.write(text.replace("backoffLimit: 0", 'backoffLimit: "none"'))
        r = self.validate(bad)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("spec.backoffLimit: 'none' is not of type 'integer'", r.stderr)

    def test_a_field_the_api_lacks_fails(self):
        # The API server drops an unknown field silently: hostIpc (for hostIPC) would leave the pod
        # without the host's IPC namespace, and cuda_ipc without its fast path.
        with open(os.path.join(DEPLOY, "two-pods-same-node-fixed.yaml")) as f:
            text = f.read()
        self.assertIn("hostIPC: true", text)
        bad = os.path.join(self.tmp.name, "typo.yaml")
        with open(bad, "w") as f:
            f.write(text.replace("hostIPC: true", "hostIpc: true", 1))
        r = self.validate(bad)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("hostIpc", r.stderr)

    def test_device_plugin_resources_are_the_documented_ones(self):
        # Device-plugin resource names live in one place: deploy/kubernetes/README.md.
        with open(os.path.join(DEPLOY, "README.md")) as f:
            documented = set(re.findall(r"`([a-z0-9.-]+\.[a-z]+/[a-z0-9_.-]+|rdma/[a-z0-9_]+)`", f.read()))
        used = set()
        for name in os.listdir(DEPLOY):
            if name.endswith(".yaml"):
                with open(os.path.join(DEPLOY, name)) as f:
                    used |= set(re.findall(r"\b((?:nvidia\.com|rdma)/[a-z0-9_.-]+):", f.read()))
        self.assertTrue(used, "no manifest requests a device")
        self.assertLessEqual(used, documented, f"undocumented device resources: {used - documented}")


if __name__ == "__main__":
    if REASON:
        print(f"SKIP: {REASON}", flush=True)
    pp.main()
