"""doctor's UCX verdicts against the real program: `ucx_perftest` (tag_bw, UCX_TLS=tcp; Debian's
ucx-utils, the same libucp pairperf links) between network namespaces, row by row beside
`pairperf doctor` with the same UCX_* environment on each side.

  A good0 10.71.1.1 --- B good0 10.71.1.2
  A jumbo0 10.71.2.1 (MTU 9000) --- C dead0 10.71.2.2   (a NIC that reaches only a dead end)

For every value of A's UCX_NET_DEVICES (unset, each interface, a list, `all`, a name A lacks): the
program's outcome, doctor's most severe UCX_NET_DEVICES finding and, where the program failed,
whether it works with doctor's fix. Asserted: doctor says `fails` exactly when ucx_perftest fails
(doctor runs UCX with each side's own environment, as the application would), and its fix makes
every failing run work. The table is printed.

Needs root (namespaces), ucx_perftest, and pairperf built with UCX; elsewhere it skips with the
reason printed."""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_tools import netns

TAG = str(os.getpid() % 100000)
NS = {k: f"pu{k}{TAG}" for k in "ABC"}
B_ADDR = "10.71.1.2"
ORDER = {None: 0, "advice": 1, "fragile": 2, "fails": 3}


def why_not_runnable():
    if shutil.which("ucx_perftest") is None:
        return "needs ucx_perftest (Debian: apt-get install ucx-utils)"
    why = netns.unavailable(TAG)
    if why:
        return why
    if not pp.has_transport("ucx"):
        return "this pairperf was built without UCX"
    return None


REASON = why_not_runnable()
if REASON:
    print(f"SKIP: {REASON}", flush=True)

# (A's UCX_NET_DEVICES or None, expected most severe UCX_NET_DEVICES finding)
ROWS = [(None, "fails"), ("good0", None), ("jumbo0", "fails"), ("good0,jumbo0", "fails"),
        ("all", "fails"), ("nosuch0", "fails")]


def env_of(devices, **extra):
    vars = {"UCX_TLS": "tcp", "GLOO_SOCKET_IFNAME": "good0", "NCCL_SOCKET_IFNAME": "good0", **extra}
    if devices is not None:
        vars["UCX_NET_DEVICES"] = devices
    return pp.clean_env(**vars)


def listening(ns, port, bound_s=10):
    """Waits (at most bound_s) until a TCP socket listens on `port` in namespace ns."""
    until = time.monotonic() + bound_s
    while time.monotonic() < until:
        ss = subprocess.run(netns.inside(ns, "ss", "-ltnH", f"sport = :{port}"), capture_output=True, text=True, timeout=10)
        if ss.stdout.strip():
            return
        time.sleep(0.05)
    raise AssertionError(f"ucx_perftest did not listen on port {port} within {bound_s} s")


PERFTEST_BOUND_S = 30  # a 1000-message tag_bw that connects ends in about a second, under load too


def perftest(a_env, port):
    """ucx_perftest tag_bw from A to B; returns (it completed, the client's last lines)."""
    server = subprocess.Popen(netns.inside(NS["B"], "ucx_perftest", "-p", str(port)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env_of(None))
    try:
        listening(NS["B"], port)
        try:
            client = subprocess.run(netns.inside(NS["A"], "ucx_perftest", B_ADDR, "-p", str(port), "-t", "tag_bw", "-n",
                                                 "1000"), capture_output=True, text=True, timeout=PERFTEST_BOUND_S, env=a_env)
        except subprocess.TimeoutExpired as e:
            # ucx_perftest 1.13 retries a connection that cannot be made until it is killed (or dies of
            # SIGPIPE at once): no result within the bound is the application failing to connect.
            partial = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr))
            return False, f"no result within {PERFTEST_BOUND_S} s (killed): {partial.strip()[-300:]}"
        out = (client.stdout + client.stderr).strip()
        return client.returncode == 0 and "Final:" in out, out[-300:]
    finally:
        server.kill()
        server.communicate()


def doctor(a_env):
    with pp.Server("--timeout-idle", "60s", listen="::", prefix=netns.inside(NS["B"]), env=env_of(None)) as s:
        return pp.doctor_json(f"{B_ADDR}:{s.port}", prefix=netns.inside(NS["A"]), env=a_env)


@unittest.skipIf(REASON is not None, REASON or "")
class UcxAgreesWithUcxPerftest(pp.WithNamespaces):
    @classmethod
    def build(cls, nets):
        for k in "ABC":
            nets.add(NS[k])
        nets.link((NS["A"], "good0", "10.71.1.1"), (NS["B"], "good0", B_ADDR))
        nets.link((NS["A"], "jumbo0", "10.71.2.1"), (NS["C"], "dead0", "10.71.2.2"))
        for ns, name in ((NS["A"], "jumbo0"), (NS["C"], "dead0")):
            netns.sh("ip", "-n", ns, "link", "set", name, "mtu", "9000")

    def test_doctor_fails_exactly_when_ucx_perftest_fails_and_its_fix_works(self):
        table = []
        for i, (devices, expected) in enumerate(ROWS):
            a_env = env_of(devices)
            works, out = perftest(a_env, 13400 + 2 * i)
            proc, doc = doctor(a_env)
            self.assertIsNotNone(doc, f"{devices}: doctor wrote no report\n{proc.stdout}\n{proc.stderr}")
            ucx = [f for f in doc["findings"] if f["subject"] == "UCX_NET_DEVICES"]
            worst = max((f["severity"] for f in ucx), key=lambda s: ORDER[s], default=None)
            probe = doc["applications"]["ucx"]["result"]
            fixed = None
            if not works:
                fix = {}
                for f in ucx:
                    if f["severity"] == "fails":
                        for side, var, value in re.findall(r"on the (client|server): (\w+)=(\S+?)(?:[;)]|$)", f["fix"]):
                            if side == "client":
                                fix[var] = value
                fixed_env = env_of(fix.get("UCX_NET_DEVICES", devices))
                fixed, fixed_out = perftest(fixed_env, 13401 + 2 * i)
            shown = "unset" if devices is None else devices
            table.append((shown, "works" if works else "fails", worst or "none", probe["status"],
                          "-" if fixed is None else ("works" if fixed else "FAILS")))
            print(f"row {i + 1}: {table[-1]}", flush=True)
            detail = f"UCX_NET_DEVICES={shown}: ucx_perftest {'works' if works else 'fails'}: {out}\nfindings: {ucx}\nprobe: {probe['status']} {probe.get('message')}"
            self.assertEqual(worst, expected, detail)
            self.assertEqual(worst == "fails", not works, detail)
            self.assertEqual(probe["status"] == "ok", works, detail)
            if fixed is not None:
                self.assertTrue(fixed, f"doctor's fix did not make ucx_perftest work: {fixed_out}\n{detail}")
        print("\n| A's UCX_NET_DEVICES | ucx_perftest | doctor (UCX_NET_DEVICES) | doctor's UCX probe | ucx_perftest with doctor's fix |")
        print("|---|---|---|---|---|")
        for row in table:
            print("| " + " | ".join(str(c) for c in row) + " |")


if __name__ == "__main__":
    unittest.main(verbosity=2)
