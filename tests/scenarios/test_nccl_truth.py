"""doctor's NCCL verdicts against real NCCL, configuration by configuration, with every NCCL version on
this machine (the CUDA toolkit's libnccl.so.2, and the pinned wheels scripts/setup puts under .deps/).

Node A (the client) gets its interfaces in the order each configuration lists them (the kernel's
ifindex, which NCCL's search follows): eth0 reaches node B (10.88.0.0/24, fd88::/64); ib0, bond0.118
and enp141s0 lead to a dead end (node D); docker0 and virbr0 are bridges. B (the server) has eth0 only.
For every configuration and every library, on each side:
  - NCCL itself (tests/scenarios/bin/nccl_oracle.py: ctypes, ncclGetUniqueId, NCCL's own "Bootstrap:
    Using" line) names its bootstrap interface, and the other node opens a TCP connection to the
    socket NCCL's bootstrap listens on there: NCCL's choice works or fails;
  - `pairperf doctor` from A to a server on B, both with the configuration's environment and
    PAIRPERF_NCCL_LIBRARY naming every library, reports each side's interface and verdict per library.
They must agree on the interface and on works/fails, and NCCL's rule (the fallback where no library is
present) must name the interface the newest library names. The table is printed.

Needs root (namespaces) and at least one libnccl.so.2; anywhere else it skips with the reason."""
import glob
import json
import os
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import pairperf_testlib as pp
from pairperf_tools import netns

TAG = str(os.getpid() % 100000)
NS = {k: f"pn{k}{TAG}" for k in "ABD"}
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ORACLE = os.path.join(ROOT, "tests", "scenarios", "bin", "nccl_oracle.py")
PY = "/usr/bin/python3"
B4, B6 = "10.88.0.2", "fd88::2"


def libraries():
    """{version: path} of every NCCL here: the dynamic loader's, the CUDA toolkit's, .deps/'s wheels."""
    found = []
    ld = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    found += [l.split("=>")[-1].strip() for l in ld.splitlines() if "libnccl.so.2 " in l]
    found += glob.glob("/usr/local/cuda*/lib*/libnccl.so.2") + glob.glob(os.path.join(ROOT, ".deps", "*", "nvidia", "nccl", "lib", "libnccl.so.2"))
    out = {}
    for path in found:
        probe = subprocess.run([PY, ORACLE, path, "--hold", "0"], capture_output=True, text=True, timeout=60)
        try:
            version = json.loads(probe.stdout.splitlines()[0])["version"]
        except (IndexError, KeyError, ValueError):
            continue
        out.setdefault(version, os.path.realpath(path))
    return out


def why_not_runnable():
    why = netns.unavailable(TAG)
    if why:
        return why
    if not os.path.exists(PY):
        return f"needs {PY}"
    if not LIBS:
        return "no libnccl.so.2 here (the CUDA toolkit, or scripts/setup's nvidia-nccl wheels under .deps/)"
    return None


LIBS = libraries() if os.geteuid() == 0 else {}
REASON = why_not_runnable()
if REASON:
    print(f"SKIP: {REASON}", flush=True)
else:
    print(f"NCCL versions: {', '.join(f'{v} ({p})' for v, p in sorted(LIBS.items()))}", flush=True)
    if len(LIBS) < 2:
        print("note: only one NCCL version here (scripts/setup installs the pinned wheels)", flush=True)

# A's interfaces: name -> (kind, IPv4 or None). Kinds: peer (to B, with fd88::1 too), dead (to D),
# dead6 (to D, IPv6 link-local only), nocarrier (to D, D's end down), down (to D, A's end down),
# bridge (no ports: no carrier), bridge+ (a port up: carrier).
ETH = ("eth0", "peer", "10.88.0.1")
IB = ("ib0", "dead", "10.87.0.1")
BOND = ("bond0.118", "dead", "10.86.0.1")
ENP = ("enp141s0", "dead", "10.85.0.1")
DOCKER = ("docker0", "bridge", "172.17.0.1")
FULL = [ETH, IB, BOND, ENP, DOCKER]

# (name, A's interfaces in creation order, A's variables, B's variables)
CONFIGS = [
    ("no variables: ib0 first by NCCL's ib rule", FULL, {}, {}),
    ("no ib* interface", [ETH, BOND, ENP, DOCKER], {}, {}),
    ("enp141s0 created before eth0", [ENP, ETH], {}, {}),
    ("eth0 created before enp141s0", [ETH, ENP], {}, {}),
    ("enp141s0 first, NO-CARRIER", [("enp141s0", "nocarrier", "10.85.0.1"), ETH], {}, {}),
    ("ib0 down (has an address)", [("ib0", "down", "10.87.0.1"), ETH], {}, {}),
    ("ib0 with only an IPv6 link-local address", [ETH, ("ib0", "dead6", None)], {}, {}),
    ("same, NCCL_SOCKET_FAMILY=AF_INET", [ETH, ("ib0", "dead6", None)], {"NCCL_SOCKET_FAMILY": "AF_INET"}, {}),
    ("NCCL_SOCKET_FAMILY=AF_INET6, NCCL_SOCKET_IFNAME=eth0", FULL, {"NCCL_SOCKET_FAMILY": "AF_INET6", "NCCL_SOCKET_IFNAME": "eth0"}, {}),
    ("eth0 IPv6 only", [("eth0", "peer", None)], {}, {}),
    ("NCCL_SOCKET_IFNAME=^eth", FULL, {"NCCL_SOCKET_IFNAME": "^eth"}, {}),
    ("NCCL_SOCKET_IFNAME=^=eth0", FULL, {"NCCL_SOCKET_IFNAME": "^=eth0"}, {}),
    ("NCCL_SOCKET_IFNAME=^ib,docker,lo", FULL, {"NCCL_SOCKET_IFNAME": "^ib,docker,lo"}, {}),
    ("NCCL_SOCKET_IFNAME=eth0", FULL, {"NCCL_SOCKET_IFNAME": "eth0"}, {}),
    ("NCCL_SOCKET_IFNAME=eth (a prefix)", FULL, {"NCCL_SOCKET_IFNAME": "eth"}, {}),
    ("NCCL_SOCKET_IFNAME==eth0 (exact)", FULL, {"NCCL_SOCKET_IFNAME": "=eth0"}, {}),
    ("NCCL_SOCKET_IFNAME==eth (exact, no such name)", FULL, {"NCCL_SOCKET_IFNAME": "=eth"}, {}),
    ("NCCL_SOCKET_IFNAME=ib0,eth0 (eth0 has the lower ifindex)", FULL, {"NCCL_SOCKET_IFNAME": "ib0,eth0"}, {}),
    ("NCCL_SOCKET_IFNAME=enp", FULL, {"NCCL_SOCKET_IFNAME": "enp"}, {}),
    ("NCCL_SOCKET_IFNAME=bond", FULL, {"NCCL_SOCKET_IFNAME": "bond"}, {}),
    ("NCCL_SOCKET_IFNAME=e (one character, ignored)", FULL, {"NCCL_SOCKET_IFNAME": "e"}, {}),
    ("NCCL_SOCKET_IFNAME=nonexistent", FULL, {"NCCL_SOCKET_IFNAME": "nonexistent"}, {}),
    ("NCCL_COMM_ID on eth0's subnet", FULL, {"NCCL_COMM_ID": f"{B4}:29500"}, {}),
    ("NCCL_COMM_ID on enp141s0's subnet", FULL, {"NCCL_COMM_ID": "10.85.0.9:29500"}, {}),
    ("NCCL_COMM_ID on no subnet of A", FULL, {"NCCL_COMM_ID": "10.99.0.1:29500"}, {}),
    ("docker0 first, with a port (carrier)", [("docker0", "bridge+", "172.17.0.1"), ETH], {}, {}),
    ("virbr0 first, with a port (carrier)", [("virbr0", "bridge+", "192.168.122.1"), ETH], {}, {}),
    ("B: NCCL_SOCKET_IFNAME=ib (B has none)", FULL, {"NCCL_SOCKET_IFNAME": "eth0"}, {"NCCL_SOCKET_IFNAME": "ib"}),
    ("B: NCCL_SOCKET_IFNAME=^eth (B falls back to lo)", [ETH, ENP], {}, {"NCCL_SOCKET_IFNAME": "^eth"}),
]


def sysctl(ns, *settings):
    for s in settings:
        netns.sh(*netns.inside(ns, "sysctl", "-qw", s))


def clear_far_ends():
    """The ends that the last A left in B and D (a namespace's veths go when it is freed, which the
    kernel may do later than `ip netns del` returns)."""
    for ns in (NS["B"], NS["D"]):
        for line in netns.sh("ip", "-n", ns, "-o", "link", "show").stdout.splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name != "lo":
                subprocess.run(["ip", "-n", ns, "link", "del", name], capture_output=True, timeout=20)


def build_a(nets, interfaces):
    """Namespace A with `interfaces` made in order; B's eth0 (and D's ends) come with them."""
    a, b, d = NS["A"], NS["B"], NS["D"]
    clear_far_ends()
    nets.add(a)
    sysctl(a, "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0")
    for k, (name, kind, v4) in enumerate(interfaces):
        if kind == "peer":
            nets.link((a, name, v4), (b, "eth0", B4 if v4 else None))
            netns.sh("ip", "-n", a, "addr", "add", "fd88::1/64", "dev", name, "nodad")
            netns.sh("ip", "-n", b, "addr", "add", f"{B6}/64", "dev", "eth0", "nodad")
        elif kind.startswith("bridge"):
            netns.sh("ip", "-n", a, "link", "add", name, "type", "bridge")
            netns.sh("ip", "-n", a, "addr", "add", f"{v4}/24", "dev", name)
            netns.sh("ip", "-n", a, "link", "set", name, "up")
            if kind == "bridge+":
                port = f"bp{k}"
                netns.sh("ip", "link", "add", port, "netns", a, "type", "veth", "peer", "name", f"d{k}{TAG}", "netns", d)
                sysctl(a, f"net.ipv6.conf.{port}.disable_ipv6=1")
                netns.sh("ip", "-n", a, "link", "set", port, "master", name)
                netns.sh("ip", "-n", a, "link", "set", port, "up")
                netns.sh("ip", "-n", d, "link", "set", f"d{k}{TAG}", "up")
        else:
            far = f"d{k}{TAG}"
            netns.sh("ip", "link", "add", name, "netns", a, "type", "veth", "peer", "name", far, "netns", d)
            if v4:
                netns.sh("ip", "-n", a, "addr", "add", f"{v4}/24", "dev", name)
            if kind != "down":
                netns.sh("ip", "-n", a, "link", "set", name, "up")
            if kind != "nocarrier":
                netns.sh("ip", "-n", d, "link", "set", far, "up")
    # Link-local addresses and carrier settle within a moment; bounded.
    for _ in range(50):
        out = netns.sh("ip", "-n", a, "-br", "addr").stdout
        if "tentative" not in out:
            break
        time.sleep(0.1)


def oracle(node, other, library, env):
    """NCCL on `node`: (interface, address, works), works meaning `other` connects to its bootstrap's
    socket; interface None where ncclGetUniqueId failed."""
    p = subprocess.Popen(netns.inside(NS[node], PY, ORACLE, library, "--hold", "20"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline()
        out = json.loads(line) if line.strip() else {"rc": -1, "error": p.stderr.read()}
        works = False
        listen = out.get("listen")
        if out.get("rc") == 0 and listen:
            host = f"('{listen['address']}', {listen['port']}, 0, {listen['scope']})" if listen["family"] == 10 \
                else f"('{listen['address']}', {listen['port']})"
            code = (f"import socket; s = socket.socket({listen['family']}); s.settimeout(1); s.connect({host})")
            works = subprocess.run(netns.inside(NS[other], PY, "-c", code), capture_output=True,
                                   timeout=30).returncode == 0
        return (out.get("iface") if out.get("rc") == 0 else None), out.get("address", ""), works, out
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()


def doctor(a_env, b_env, ipv6):
    with pp.Server("--timeout-idle", "60s", listen="::", prefix=netns.inside(NS["B"]), env=b_env) as s:
        return pp.doctor_json(f"[{B6}]:{s.port}" if ipv6 else f"{B4}:{s.port}", "--no-ucx", "--probe-timeout", "0.5s",
                              prefix=netns.inside(NS["A"]), env=a_env)


@unittest.skipIf(REASON is not None, REASON or "")
class NcclAgreesWithDoctor(unittest.TestCase):
    def test_doctor_names_nccls_interface_and_its_outcome_in_every_configuration(self):
        versions = sorted(LIBS, key=lambda v: tuple(int(x) for x in v.split(".")))
        newest = versions[-1]
        nccl_rule = "2.30.7"
        table, problems = [], []
        with netns.Namespaces() as base:
            base.add(NS["B"])
            base.add(NS["D"])
            sysctl(NS["B"], "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.all.accept_dad=0")
            for i, (name, interfaces, a_vars, b_vars) in enumerate(CONFIGS):
                with netns.Namespaces() as nets:
                    made = time.monotonic()
                    build_a(nets, interfaces)
                    print(f"  topology took {time.monotonic() - made:.1f} s", flush=True)
                    all_libs = ":".join(LIBS[v] for v in versions)
                    a_env = pp.clean_env(PAIRPERF_NCCL_LIBRARY=all_libs, **a_vars)
                    b_env = pp.clean_env(PAIRPERF_NCCL_LIBRARY=all_libs, **b_vars)
                    truth = {}
                    started = time.monotonic()
                    for v in versions:
                        truth[("client", v)] = oracle("A", "B", LIBS[v], pp.clean_env(**a_vars))
                        truth[("server", v)] = oracle("B", "A", LIBS[v], pp.clean_env(**b_vars))
                    asked = time.monotonic()
                    ipv6 = not any(kind == "peer" and v4 for _, kind, v4 in interfaces)
                    proc, doc = doctor(a_env, b_env, ipv6)
                    print(f"  NCCL itself took {asked - started:.1f} s, doctor {time.monotonic() - asked:.1f} s",
                          flush=True)
                self.assertIsNotNone(doc, f"{name}: doctor wrote no report\n{proc.stdout}\n{proc.stderr}")
                said = {(n["side"], n["version"]): n for n in doc["nccl"] if n["source"] == "library"}
                row = [name]
                for v in versions:
                    for side in ("client", "server"):
                        iface, address, works, raw = truth[(side, v)]
                        d = said.get((side, v))
                        agree = d is not None and (d["iface"] or None) == iface and \
                            (d["outcome"] == "reaches") == works and d["outcome"] in ("reaches", "fails")
                        if side == "client":
                            row.append(f"{iface or '(none)'} {'works' if works else 'fails'}")
                            row.append(f"{(d or {}).get('iface') or '(none)'} {(d or {}).get('outcome')}")
                        if not agree:
                            problems.append(f"{name} [{side}, NCCL {v}]: NCCL {iface}:{address} "
                                            f"{'works' if works else 'fails'}; doctor {json.dumps(d)}\n"
                                            f"  NCCL's log: {raw.get('log')}")
                b_iface, _, b_works, _ = truth[("server", newest)]
                b_said = said.get(("server", newest)) or {}
                row.append(f"{b_iface or '(none)'} {'works' if b_works else 'fails'} / "
                           f"{b_said.get('iface') or '(none)'} {b_said.get('outcome')}")
                # The rule (used where no library answers) against the newest library, on A.
                rule = doc["client"].get("nccl_rule") if isinstance(doc.get("client"), dict) else None
                row.append(f"{(rule or {}).get('iface') or '(none)'}")
                if (rule or {}).get("iface", "") != (truth[("client", newest)][0] or ""):
                    problems.append(f"{name}: NCCL {newest}'s rule says {rule}, NCCL {newest} itself "
                                    f"{truth[('client', newest)][0]}")
                row.append("yes" if not any(p.startswith(name + " ") or p.startswith(name + ":") for p in problems) else "NO")
                table.append(row)
                print(f"config {i + 1}: {row}", flush=True)
        head = ["configuration"] + [c for v in versions for c in (f"NCCL {v} (A)", f"doctor {v} (A)")] + \
            [f"B: NCCL {newest} / doctor", f"rule {nccl_rule} (A)", "agree"]
        print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        for row in table:
            print("| " + " | ".join(row) + " |")
        self.assertEqual(problems, [], "\n".join(problems))


class NoNcclAnswer(unittest.TestCase):
    """A library that is missing or is not NCCL gives no verdict of its own: doctor says why, in an
    advice finding, and judges by NCCL's rule, naming the version the rule follows."""

    def test_a_missing_or_foreign_library_falls_back_to_the_rule_with_the_reason(self):
        libc = [l.split("=>")[-1].strip() for l in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True)
                .stdout.splitlines() if "libc.so.6 " in l][:1]
        cases = [("/nonexistent/libnccl.so.2", "cannot load /nonexistent/libnccl.so.2")] + \
            ([(libc[0], "has no ncclGetVersion or ncclGetUniqueId: not NCCL")] if libc else [])
        for library, reason in cases:
            with pp.tmpdir() as d:
                out = os.path.join(d, "doctor.json")
                proc, _ = pp.run(["doctor", "--no-ucx", "--duration", "0.1s", "--noise-threshold", "100", "--json", out],
                                 env=pp.clean_env(PAIRPERF_NCCL_LIBRARY=library))
                doc = pp.load(out) if os.path.exists(out) else None
            shown = f"{library}: {proc.stdout}\n{proc.stderr}"
            self.assertIsNotNone(doc, shown)
            for side in ("client", "server"):
                mine = [n for n in doc["nccl"] if n["side"] == side]
                self.assertEqual([n["source"] for n in mine], ["library", "rule"], shown)
                self.assertEqual(mine[0]["outcome"], "unknown", shown)
                self.assertIn(reason, mine[0]["why"], shown)
                self.assertEqual(mine[1]["version"], "2.30.7", shown)
            advice = [f for f in doc["findings"] if f["subject"] == "NCCL_SOCKET_IFNAME"]
            self.assertTrue(advice and all(f["severity"] == "advice" for f in advice), shown)
            self.assertIn(reason, advice[0]["problem"], shown)
            self.assertIn("PAIRPERF_NCCL_LIBRARY", advice[0]["fix"], shown)
            self.assertIn("no libnccl answered; NCCL 2.30.7's rule", proc.stdout + proc.stderr, shown)


if __name__ == "__main__":
    unittest.main(verbosity=2)
