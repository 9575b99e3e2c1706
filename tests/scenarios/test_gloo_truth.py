"""doctor's gloo verdicts against the real program: a torch.distributed job on the gloo backend
(tests/scenarios/bin/gloo_job.py; Debian's python3-torch links the same libgloo0 as pairperf's gloo
transport) run between network namespaces, beside `pairperf doctor` with the same environment and hostname
on each side. The rows are independent: three copies of the topology below (lanes) run them side
by side, a third each (a row mostly waits on torch's timeouts and imports).

  S: bridge br0      A eth0 10.88.0.1, 192.168.88.1   B eth0 10.88.0.2   B eth1 192.168.88.2
                     D eth0 192.168.88.3, 10.88.0.3 (a third node, for the three-node row)
  A ib0 10.87.0.1, 10.89.0.1 --- C c0 10.87.0.2      (a NIC that reaches only a dead end)

Each namespace gets its own hostname (unshare --uts) and /etc/hosts (/etc/netns/NAME/hosts); B runs
with GLOO_SOCKET_IFNAME=NCCL_SOCKET_IFNAME=eth0 unless a row says otherwise. For every row: the
job's outcome, doctor's most severe gloo finding, and, where the job failed, whether the job works
with doctor's fix applied. The assertion: doctor says `fails` exactly when the job fails, and its fix
makes every failing job work. The table is printed (it is the evidence the closing note quotes).

Needs root (namespaces), /usr/bin/python3 with torch.distributed's gloo, and pairperf built with
gloo; anywhere else it skips with the reason printed."""
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp
from pairperf_tools import netns

TAG = str(os.getpid() % 100000)
LANES = 3
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gloo_job.py")
PY = "/usr/bin/python3"
B_ADDR = "10.88.0.2"
JOB_TIMEOUT_S = 8  # torch's store and process-group timeout: a failing listener waits this long
HOSTNAMES = {"A": "nodea", "B": "nodeb", "D": "noded"}


def why_not_runnable():
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    why = netns.unavailable(TAG)
    if why:
        return why
    probe = subprocess.run([PY, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return "needs python3-torch with gloo (Debian: apt-get install python3-torch)"
    if not pp.has_transport("gloo"):
        return "this pairperf was built without the gloo transport (libgloo-dev)"
    return None


REASON = why_not_runnable()
if REASON:
    print(f"SKIP: {REASON}", flush=True)


def env_of(**vars):
    return pp.clean_env(OMP_NUM_THREADS="1", **vars)


B_ENV = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0", "UCX_NET_DEVICES": "eth0"}
# A: NCCL (and UCX, which these rows are not about) on eth0 unless a row says otherwise.
A_BASE = {"NCCL_SOCKET_IFNAME": "eth0", "UCX_NET_DEVICES": "eth0"}
D_ENV = {"GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"}

# (name, A's hostname address or None (does not resolve), A's variables, B's variables, nodes, expected
# most severe gloo finding of doctor A -> B)
ROWS = [
    ("hostname -> 10.87.0.1 (ib0)", "10.87.0.1", {}, {}, 2, "fails"),
    ("hostname -> 10.89.0.1 (ib0)", "10.89.0.1", {}, {}, 2, "fragile"),
    ("hostname -> 10.88.0.1 (eth0)", "10.88.0.1", {}, {}, 2, "advice"),
    ("hostname -> 127.0.1.1", "127.0.1.1", {}, {}, 2, "fragile"),
    ("hostname does not resolve", None, {}, {}, 2, "fragile"),
    ("GLOO_SOCKET_IFNAME=ib0", "10.88.0.1", {"GLOO_SOCKET_IFNAME": "ib0"}, {}, 2, "fails"),
    ("GLOO_SOCKET_IFNAME=eth0", "10.88.0.1", {"GLOO_SOCKET_IFNAME": "eth0"}, {}, 2, None),
    ("GLOO_SOCKET_IFNAME=eth0,ib0", "10.88.0.1", {"GLOO_SOCKET_IFNAME": "eth0,ib0"}, {}, 2, "fails"),
    ("GLOO_SOCKET_IFNAME=e (one character)", "10.88.0.1", {"GLOO_SOCKET_IFNAME": "e"}, {}, 2, "advice"),
    ("hostname -> 127.0.1.1, B's gloo on 192.168.88.2 (sorts above)", "127.0.1.1", {},
     {"GLOO_SOCKET_IFNAME": "eth1", "NCCL_SOCKET_IFNAME": "eth1"}, 2, "fails"),
    ("hostname -> 127.0.1.1, a third node D (192.168.88.3) joins", "127.0.1.1", {}, {}, 3, "fragile"),
]
ORDER = {None: 0, "advice": 1, "fragile": 2, "fails": 3}


class Topo:
    """One copy of the topology (lane `lane`): its namespaces, and what runs on its nodes."""

    def __init__(self, lane):
        self.lane = lane
        self.ns = {k: f"pg{k}{lane}x{TAG}" for k in "SABCD"}

    def build(self, nets):
        ns = self.ns
        for k in "SABCD":
            nets.add(ns[k])
        netns.sh("ip", "-n", ns["S"], "link", "add", "br0", "type", "bridge")
        netns.sh("ip", "-n", ns["S"], "link", "set", "br0", "up")
        for i, (node, name, addrs) in enumerate([("A", "eth0", ["10.88.0.1", "192.168.88.1"]),
                                                  ("B", "eth0", ["10.88.0.2"]),
                                                  ("B", "eth1", ["192.168.88.2"]),
                                                  ("D", "eth0", ["192.168.88.3", "10.88.0.3"])]):
            port = f"pgp{i}{self.lane}x{TAG}"
            nets.link((ns["S"], port, None), (ns[node], name, addrs[0]))
            for extra in addrs[1:]:
                netns.sh("ip", "-n", ns[node], "addr", "add", f"{extra}/24", "dev", name)
            netns.sh("ip", "-n", ns["S"], "link", "set", port, "master", "br0")
        nets.link((ns["A"], "ib0", "10.87.0.1"), (ns["C"], "c0", "10.87.0.2"))
        netns.sh("ip", "-n", ns["A"], "addr", "add", "10.89.0.1/24", "dev", "ib0")

    def cleanup(self):
        for name in self.ns.values():
            shutil.rmtree(os.path.join("/etc/netns", name), ignore_errors=True)

    def on(self, node, *command):
        """The prefix that runs `command` on a node: its namespace, its own hostname."""
        return netns.inside(self.ns[node], "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
                            HOSTNAMES[node], *command)

    def write_hosts(self, node, mapping):
        d = os.path.join("/etc/netns", self.ns[node])
        os.makedirs(d, exist_ok=True)
        lines = ["127.0.0.1 localhost"] + [f"{addr} {name}" for name, addr in mapping.items() if addr]
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def run_job(self, nodes, envs, port):
        """The torch job over `nodes` (B is rank 0 and hosts the store; then A, then D); returns
        (every rank exited 0, each rank's output)."""
        order = ["B", "A", "D"][:nodes]
        procs = []
        for rank, node in enumerate(order):
            procs.append(subprocess.Popen(self.on(node, PY, JOB, str(rank), str(nodes), B_ADDR, str(port),
                                                  str(JOB_TIMEOUT_S)),
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=envs[node]))
        outs = []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=JOB_TIMEOUT_S * 4 + 60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                out += "\n(killed: the job outlived its bound)"
            outs.append((p.returncode, out.strip()[-400:]))
        return all(rc == 0 for rc, _ in outs), outs

    def doctor(self, a_env, b_env):
        with pp.Server("--timeout-idle", "60s", listen="::", prefix=self.on("B"), env=b_env) as s:
            return pp.doctor_json(f"{B_ADDR}:{s.port}", "--no-ucx", prefix=self.on("A"), env=a_env)

    def row(self, i):
        """Row i of ROWS on this lane: (the table's row, what the assertions need)."""
        name, a_host, a_vars, b_vars, nodes, expected = ROWS[i]
        self.write_hosts("A", {"nodea": a_host, "nodeb": B_ADDR})
        self.write_hosts("B", {"nodeb": B_ADDR})
        self.write_hosts("D", {"noded": "192.168.88.3"})
        a_vars = {**A_BASE, **a_vars}
        b_vars = {**B_ENV, **b_vars}
        envs = {"A": env_of(**a_vars), "B": env_of(**b_vars), "D": env_of(**D_ENV)}
        works, outs = self.run_job(nodes, envs, 29400 + 2 * i)
        proc, doc = self.doctor(envs["A"], envs["B"])
        if doc is None:
            return None, {"name": name, "detail": f"{name}: doctor wrote no report\n{proc.stdout}\n{proc.stderr}"}
        gloo = [f for f in doc["findings"] if f["subject"] == "GLOO_SOCKET_IFNAME"]
        worst = max((f["severity"] for f in gloo), key=lambda s: ORDER[s], default=None)
        app = doc["applications"]["gloo"]["result"]
        fixed, fixed_outs = None, None
        fix_from = [f for f in gloo if f["severity"] in ("fails", "fragile")]
        if not works or nodes > 2:
            # Doctor's fix lines ("on the client: GLOO_SOCKET_IFNAME=eth0"), applied to each side.
            fixed_vars = {"A": dict(a_vars), "B": dict(b_vars)}
            for f in fix_from:
                for side, var, value in re.findall(r"on the (client|server): (\w+)=(\S+?)(?:[;)]|$)", f["fix"]):
                    fixed_vars["A" if side == "client" else "B"][var] = value
            fixed_envs = {"A": env_of(**fixed_vars["A"]), "B": env_of(**fixed_vars["B"]), "D": envs["D"]}
            fixed, fixed_outs = self.run_job(nodes, fixed_envs, 29401 + 2 * i)
        table_row = (name, "works" if works else "fails", worst or "none", app.get("status"),
                     "-" if fixed is None else ("works" if fixed else "FAILS"), doc["exit_code"])
        print(f"row {i + 1} (lane {self.lane}): {table_row}", flush=True)
        detail = (f"{name}: job {'works' if works else 'fails'} {outs}\ndoctor gloo findings: "
                  f"{json.dumps(gloo, indent=1)}\napplication: {app.get('status')} {app.get('message')}")
        return table_row, {"name": name, "detail": detail, "worst": worst, "expected": expected, "nodes": nodes,
                           "works": works, "app": app.get("status"), "exit_code": doc["exit_code"], "fixed": fixed,
                           "fixed_outs": fixed_outs, "outs": outs}


@unittest.skipIf(REASON is not None, REASON or "")
class GlooAgreesWithTorch(pp.WithNamespaces):
    @classmethod
    def build(cls, nets):
        cls.topos = [Topo(lane) for lane in range(LANES)]
        for t in cls.topos:
            t.build(nets)

    @classmethod
    def cleanup(cls):
        for t in getattr(cls, "topos", []):
            t.cleanup()

    def test_doctor_fails_exactly_when_the_torch_job_fails_and_its_fix_works(self):
        def lane_rows(t):
            return [(i, *t.row(i)) for i in range(t.lane, len(ROWS), LANES)]

        with ThreadPoolExecutor(LANES) as pool:
            done = sorted(r for rows in pool.map(lane_rows, self.topos) for r in rows)
        print("\n| A's configuration | real gloo job | doctor (gloo) | doctor's gloo probe | job with doctor's fix | doctor exit |")
        print("|---|---|---|---|---|---|")
        for _, table_row, _ in done:
            if table_row is not None:
                print("| " + " | ".join(str(c) for c in table_row) + " |")
        for _, table_row, r in done:
            with self.subTest(row=r["name"]):
                self.assertIsNotNone(table_row, r["detail"])
                detail = r["detail"]
                self.assertEqual(r["worst"], r["expected"], detail)
                if r["nodes"] == 2:
                    self.assertEqual(r["worst"] == "fails", not r["works"], detail)
                    self.assertEqual(r["app"] == "ok", r["works"], detail)
                    self.assertEqual(r["exit_code"] == 3, not r["works"], detail)
                else:
                    self.assertFalse(r["works"], f"{r['name']}: the third node did not break the job {r['outs']}")
                if r["fixed"] is not None:
                    self.assertTrue(r["fixed"], f"{r['name']}: doctor's fix did not make the job work: "
                                                f"{r['fixed_outs']}\n{detail}")

    def test_mesh_names_the_node_others_cannot_reach_and_the_pairs_the_order_breaks(self):
        # Row 11's nodes: A's hostname resolves to 127.0.1.1; D (192.168.88.3) sorts above it and
        # must connect to it, B (10.88.0.2) sorts below and A connects to B.
        t = self.topos[0]
        t.write_hosts("A", {"nodea": "127.0.1.1", "nodeb": B_ADDR})
        t.write_hosts("B", {"nodeb": B_ADDR})
        t.write_hosts("D", {"noded": "192.168.88.3"})
        envs = {"A": env_of(**A_BASE), "B": env_of(**B_ENV), "D": env_of(**D_ENV)}
        drive = ("--token", "g1oo", "--allow-drive", "10.88.0.0/24", "--timeout-idle", "120s")
        with pp.Server(*drive, listen="::", prefix=t.on("A"), env=envs["A"]) as sa, \
                pp.Server(*drive, listen="::", prefix=t.on("B"), env=envs["B"]) as sb, \
                pp.Server(*drive, listen="::", prefix=t.on("D"), env=envs["D"]) as sd:
            hosts = f"10.88.0.1:{sa.port},{B_ADDR}:{sb.port},10.88.0.3:{sd.port}"
            for transport, code in (("gloo", 1), ("", 3)):  # gloo's own connection; the rule over TCP
                with pp.tmpdir() as d:
                    out = os.path.join(d, "mesh.json")
                    args = ["mesh", "--hosts", hosts, "--token", "g1oo", "--duration", "0.05s", "--no-retest",
                            "--timeout-connect", "3s", "--json", out] + (["--transport", transport] if transport else [])
                    proc, _ = pp.run(args, prefix=t.on("B"), timeout=240, env=envs["B"])
                    doc = pp.load(out) if os.path.exists(out) else None
                shown = f"mesh --transport {transport or '(tcp)'}:\n{proc.stdout}\n{proc.stderr}"
                print(shown, flush=True)
                self.assertIsNotNone(doc, shown)
                self.assertEqual(proc.returncode, code, shown)
                m = doc["mesh"]
                self.assertEqual(m["nodes"], ["nodea", "nodeb", "noded"], shown)
                if transport:
                    for p in m["pairs"]:
                        ends = {m["nodes"][p["client"]], m["nodes"][p["server"]]}
                        self.assertEqual(p["verdict"] == "ok", ends != {"nodea", "noded"}, shown)
                gloo = [f for f in doc["findings"] if f["subject"] == "GLOO_SOCKET_IFNAME" and f["severity"] == "fails"]
                self.assertEqual([f["side"] for f in gloo], ["nodea"], shown)
                self.assertIn("127.0.1.1", gloo[0]["problem"])
                self.assertIn("not reached by noded", gloo[0]["problem"])
                self.assertIn("with nodeb it works only because", gloo[0]["problem"])
                self.assertEqual(gloo[0]["fix"], "on nodea: GLOO_SOCKET_IFNAME=eth0")


if __name__ == "__main__":
    unittest.main(verbosity=2)
