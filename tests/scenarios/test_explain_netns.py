"""`pairperf explain` against the real programs, live: tests/scenarios/bin/record_failure_logs.py
runs torch.distributed on gloo, ucx_perftest, fi_pingpong and pairperf where they fail between
network namespaces (its docstring draws the topology), and explain must find in each log exactly
the signatures the recording expects, with its exit code and nothing unexplained (the same check
loopback.explain makes on the committed recording, so a library whose messages change is caught
here). Then --check: on node A, explain runs the check its diagnosis suggests (pairperf doctor
towards the address in the log) against a pairperf server on B, with A's environment as the job
had it: the check confirms the diagnosis (exit 3) while the job's variable is wrong, and does not
reproduce it once the variable names the interface that reaches B.

Needs root (namespaces), python3-torch, ucx_perftest, fi_pingpong, and pairperf built with gloo
and UCX; elsewhere it skips with the reason printed."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "bin"))
import unittest

import pairperf_testlib as pp
import record_failure_logs as rec
from pairperf_tools import netns

TAG = str(os.getpid() % 100000)


def why_not_runnable():
    for tool, package in (("ucx_perftest", "ucx-utils"), ("fi_pingpong", "libfabric-bin"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"needs {tool} (Debian: apt-get install {package})"
    why = netns.unavailable(TAG)
    if why:
        return why
    probe = subprocess.run([rec.PY, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return "needs python3-torch with gloo (Debian: apt-get install python3-torch)"
    for t in ("gloo", "ucx"):
        if not pp.has_transport(t):
            return f"this pairperf was built without the {t} transport"
    return None


REASON = why_not_runnable()
if REASON:
    print(f"SKIP: {REASON}", flush=True)


def explain_json(args, prefix=(), env=None, timeout=300):
    with pp.tmpdir() as d:
        out = os.path.join(d, "explain.json")
        proc, _ = pp.run(["explain", "--json", out] + list(args), prefix=prefix, env=env, timeout=timeout)
        return proc, (pp.load(out) if os.path.exists(out) else None)


@unittest.skipIf(REASON is not None, REASON or "")
class ExplainAgreesWithTheRealPrograms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.topo = rec.Topology(TAG).__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.topo.close()

    def test_live_failures_get_the_recorded_diagnoses(self):
        with pp.tmpdir() as d:
            manifest = rec.record(self.topo, d)
            print(json.dumps(manifest["versions"]), flush=True)
            for name, case in manifest["cases"].items():
                logs = [os.path.join(d, name, log) for log in case["logs"]]
                proc, doc = explain_json(logs)
                self.assertIsNotNone(doc, proc.stderr)
                ids = sorted(x["id"] for x in doc["diagnoses"])
                shown = (f"{name}: programs exited {case['program_exit_codes']}; explain exit {proc.returncode}, "
                         f"{ids}, unexplained {doc['unexplained']}")
                print(shown, flush=True)
                # Exactly the recording's signatures, and those a line printed or not by timing.
                self.assertLessEqual(set(case["expect"]), set(ids), shown + "\n" + proc.stdout)
                self.assertLessEqual(set(ids), set(case["expect"]) | set(case["may_also"]), shown + "\n" + proc.stdout)
                self.assertEqual(proc.returncode, case["explain_exit"], shown)
                self.assertEqual(doc["unexplained"], [], shown)
                # A failing program's log never reads as healthy, nor a healthy one's as failing.
                self.assertEqual(any(c != 0 for c in case["program_exit_codes"]), proc.returncode != 0, shown)

    def check(self, log, a_env):
        """explain --check on A for a recorded log, against a pairperf server on B."""
        env = rec.clean_env(**a_env)
        with pp.Server("--timeout-idle", "120s", listen="::", prefix=self.topo.on("B"),
                       env=rec.clean_env(GLOO_SOCKET_IFNAME="eth0", NCCL_SOCKET_IFNAME="eth0", UCX_NET_DEVICES="eth0")) as s:
            proc, doc = explain_json(["--check", "--port", str(s.port), log], prefix=self.topo.on("A"), env=env)
        self.assertIsNotNone(doc, proc.stdout + proc.stderr)
        self.assertEqual(pp.schema_errors_of(doc), [])
        runs = [(c["command"], c["result"]["exit_code"], c["result"]["outcome"])
                for d in doc["diagnoses"] for c in d["checks"] if "result" in c]
        print(f"{os.path.basename(os.path.dirname(log))} with {a_env}: explain exit {proc.returncode}, checks {runs}", flush=True)
        return proc, doc, runs

    def test_check_confirms_the_diagnosis_where_the_variable_is_wrong(self):
        fixtures = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "explain", "recorded")
        gloo_log = os.path.join(fixtures, "gloo-nic-unreachable", "nodea-rank1.log")  # Connect timeout [10.61.0.2]
        ucx_log = os.path.join(fixtures, "ucx-wrong-nic", "nodea-client.log")          # refused by 10.61.0.2
        right = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0", "UCX_NET_DEVICES": "eth0"}
        # The UCX job ran with UCX_TLS=tcp: its check runs with it too (doctor then also finds the
        # one-host pair on TCP, a `fails` finding on "path" that is not this failure's subject).
        for log, var, job in ((gloo_log, "GLOO_SOCKET_IFNAME", {}), (ucx_log, "UCX_NET_DEVICES", {"UCX_TLS": "tcp"})):
            proc, doc, runs = self.check(log, {**right, **job, var: "ib0"})
            self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
            self.assertTrue(doc["checked"])
            port = runs[0][0].rsplit(":", 1)[1]
            self.assertEqual([(c, o) for c, _, o in runs], [(f"pairperf doctor 10.61.0.2:{port}", "confirmed")], proc.stdout)
            self.assertIn("--check: exit 3, confirmed", proc.stdout)
            # Confirmed for the job's reason: doctor's failing finding on that variable, with its fix.
            self.assertRegex(proc.stdout, rf"\n\s+{var}: [^\n]*{var}=ib0")
            self.assertIn(f"fix: on the client: {var}=eth0", proc.stdout)
            proc, doc, runs = self.check(log, {**right, **job})
            self.assertEqual(proc.returncode, 3, proc.stdout)  # the log still shows the failure
            # Not reproduced; or inconclusive when doctor's path probes were noisy twice (a busy
            # host): never confirmed, and no failing finding on the variable.
            self.assertIn(runs[0][2], ("not reproduced", "inconclusive"), proc.stdout)
            self.assertNotRegex(proc.stdout, rf"\n\s+{var}: ", proc.stdout)

    def test_check_that_cannot_run_exits_1(self):
        # No pairperf server on B at this port: the check itself fails, and explain says so.
        log = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "explain", "recorded", "torch-store-timeout", "nodea-rank1.log")
        proc, doc = explain_json(["--check", "--port", "18599", "--check-timeout", "60s", log],
                                 prefix=self.topo.on("A"), env=rec.clean_env())
        runs = [c["result"] for d in doc["diagnoses"] for c in d["checks"] if "result" in c]
        print(proc.stdout, runs, flush=True)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual([r["outcome"] for r in runs], ["failed"])
        self.assertIn("cannot reach the pairperf server", runs[0]["output_tail"])


if __name__ == "__main__":
    pp.main()
