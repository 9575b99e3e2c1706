"""Every manifest in deploy/kubernetes validates against the Kubernetes API's schemas
(kubernetes-models from the npm registry, pinned by deploy/kubernetes/validate/package-lock.json),
and the check fails on a manifest that breaks them. Skips, with the reason printed, without npm
or the registry."""
import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import pairperf_testlib as pp  # noqa: E402

DEPLOY = os.path.join(pp.SOURCE_DIR, "deploy", "kubernetes")
TOOL = os.path.join(DEPLOY, "validate")
REASON = None if shutil.which("npm") and shutil.which("node") else \
    "npm is not installed (scripts/setup installs nodejs and npm)"
OFFLINE = re.compile(r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|network request")


@unittest.skipIf(REASON is not None, REASON or "")
class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = pp.tmpdir()
        cls.tool = os.path.join(cls.tmp.name, "validate")
        os.makedirs(cls.tool)
        for f in ("package.json", "package-lock.json", "validate.mjs"):
            shutil.copy2(os.path.join(TOOL, f), cls.tool)
        r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=cls.tool,
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            why = OFFLINE.search(r.stdout + r.stderr)
            if why:
                print(f"SKIP: the npm registry cannot be reached: {why.group(0)}", flush=True)
                raise unittest.SkipTest(why.group(0))
            raise AssertionError("npm ci failed:\n" + r.stdout + r.stderr)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def validate(self, *paths):
        return subprocess.run(["node", os.path.join(self.tool, "validate.mjs")] + list(paths),
                              capture_output=True, text=True, timeout=120)

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
        self.assertIn("backoffLimit must be integer", r.stderr)

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
