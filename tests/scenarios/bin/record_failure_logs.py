#!/usr/bin/python3
"""Failure logs from the real programs, for `pairperf explain`'s tests: torch.distributed jobs on
gloo (Debian's python3-torch and libgloo0), ucx_perftest (Debian's ucx-utils), fi_pingpong
(Debian's libfabric-bin) and pairperf itself, each run where it fails, between network namespaces:

  A (nodea) eth0 10.61.0.1 --- B (nodeb) eth0 10.61.0.2
  A ib0 10.59.0.1 --- C c0 10.59.0.2                      (a NIC that reaches only a dead end)

Each namespace has its own hostname (unshare --uts) and /etc/hosts (/etc/netns/NAME/hosts).

Usage (root): record_failure_logs.py OUTDIR [CASE...]. Writes OUTDIR/CASE/*.log, each a program's
own output (stdout and stderr, as a user's log holds them), and OUTDIR/manifest.json: per case
the logs, the commands, the versions of the programs, and the signatures explain must find
(`expect`) and its exit code. tests/fixtures/explain/recorded/ holds one recording;
scenarios.explain records again and checks both against explain."""
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))
from pairperf_tools import netns  # noqa: E402
from pairperf_tools.processes import stop  # noqa: E402

PY = "/usr/bin/python3"
JOB = os.path.join(HERE, "torch_job.py")
A_ADDR, B_ADDR = "10.61.0.1", "10.61.0.2"
HOSTNAMES = {"A": "nodea", "B": "nodeb"}
PAIRPERF = os.environ.get("PAIRPERF_BIN", os.path.join(SOURCE_DIR, "build", "pairperf"))
BOUND_S = 90  # no program here runs longer
NO_DNS = "10.99.0.53"  # no node has a route to it
# CPython as services open their sockets (Ray, vLLM's and SGLang's side channels): a client that
# looks up its peer by name, and a server that binds the address it was given.
PY_CONNECT = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)"
PY_LISTEN = "import socket, sys; socket.create_server((sys.argv[1], int(sys.argv[2])))"


class Topology(netns.Namespaces):
    """The namespaces above, made on entry and deleted (with their hosts files) on exit."""

    def __init__(self, tag):
        super().__init__()
        self.ns = {k: f"px{k}{tag}" for k in "ABC"}

    def __enter__(self):
        try:
            for k in "ABC":
                self.add(self.ns[k])
            self.link((self.ns["A"], "eth0", A_ADDR), (self.ns["B"], "eth0", B_ADDR))
            self.link((self.ns["A"], "ib0", "10.59.0.1"), (self.ns["C"], "c0", "10.59.0.2"))
            self.hosts(resolve_a=True)
        except Exception:
            self.close()
            raise
        return self

    def close(self):
        super().close()
        for k in "ABC":
            shutil.rmtree(os.path.join("/etc/netns", self.ns[k]), ignore_errors=True)

    def hosts(self, resolve_a):
        """Each node's /etc/hosts: nodeb everywhere; nodea only where resolve_a (else torch finds no
        address for A's hostname). Each node's resolver is a DNS server it has no route to, so a
        name outside the hosts file fails at once (EAI_AGAIN) and no query leaves the namespaces."""
        for k, names in (("A", {"nodea": A_ADDR if resolve_a else None, "nodeb": B_ADDR}),
                         ("B", {"nodeb": B_ADDR, "nodea": A_ADDR})):
            d = os.path.join("/etc/netns", self.ns[k])
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "hosts"), "w") as f:
                f.write("127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for n, a in names.items() if a))
            with open(os.path.join(d, "resolv.conf"), "w") as f:
                f.write(f"nameserver {NO_DNS}\n")

    def on(self, node, *command):
        """The prefix that runs `command` on a node: its namespace and its own hostname."""
        return netns.inside(self.ns[node], "unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"',
                            HOSTNAMES[node], *command)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UCX_", "FI_", "NCCL_", "GLOO_"))}
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def start(topo, node, command, env, path):
    f = open(path, "w")
    proc = subprocess.Popen(topo.on(node, *command), stdout=f, stderr=subprocess.STDOUT, env=env)
    proc.log_file = f
    return proc


def finish(proc, bound=BOUND_S):
    """The program's exit code (negative: the signal that ended it; the recorder sends SIGTERM to a
    program that outlives its bound). Its log holds only what it wrote."""
    try:
        proc.wait(timeout=bound)
    except subprocess.TimeoutExpired:
        stop(proc)
    proc.log_file.close()
    return proc.returncode


def wait_listening(topo, node, port, bound_s=10):
    until = time.monotonic() + bound_s
    while time.monotonic() < until:
        ss = subprocess.run(netns.inside(topo.ns[node], "ss", "-ltnH", f"sport = :{port}"),
                            capture_output=True, text=True, timeout=10)
        if ss.stdout.strip():
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} in {node} within {bound_s} s")


def torch_pair(topo, out, mode, port, a_env, b_env, timeout_s):
    """B is rank 0 (hosts the store), A rank 1."""
    b = start(topo, "B", [PY, JOB, mode, "0", "2", B_ADDR, str(port), str(timeout_s)], b_env,
              os.path.join(out, "nodeb-rank0.log"))
    time.sleep(0.3)
    a = start(topo, "A", [PY, JOB, mode, "1", "2", B_ADDR, str(port), str(timeout_s)], a_env,
              os.path.join(out, "nodea-rank1.log"))
    return [finish(a), finish(b)], ["nodeb-rank0.log", "nodea-rank1.log"]


def perftest(topo, out, port, a_env, b_env=None):
    server = start(topo, "B", ["ucx_perftest", "-p", str(port)], b_env or clean_env(UCX_TLS="tcp"),
                   os.path.join(out, "nodeb-server.log"))
    try:
        wait_listening(topo, "B", port)
        client = start(topo, "A", ["ucx_perftest", B_ADDR, "-p", str(port), "-t", "tag_bw", "-n", "1000"], a_env,
                       os.path.join(out, "nodea-client.log"))
        # After a refused connect, ucx_perftest 1.13 either dies of SIGPIPE at once or retries
        # until killed: 15 s is its bound.
        codes = [finish(client, 15)]
    finally:
        stop(server)
        server.log_file.close()
    return codes, ["nodeb-server.log", "nodea-client.log"]


def single(topo, out, node, command, env, name):
    return [finish(start(topo, node, command, env, os.path.join(out, name)), 60)], [name]


# name -> (what it shows, how to run it, the signatures explain must find, explain's exit code[,
# signatures it may find too: a line the real program prints or not, by timing])
CASES = {
    "gloo-nic-unreachable": (
        "A's GLOO_SOCKET_IFNAME names ib0, which B cannot reach (B on eth0)",
        lambda t, o: torch_pair(t, o, "allreduce", 29611, clean_env(GLOO_SOCKET_IFNAME="ib0"),
                                clean_env(GLOO_SOCKET_IFNAME="eth0"), 6),
        ["gloo.connect_timeout", "gloo.pair_error"], 3),
    "gloo-hostname-loopback": (
        "A's hostname resolves nowhere and GLOO_SOCKET_IFNAME is unset: torch falls back to loopback",
        lambda t, o: torch_pair(t, o, "allreduce", 29613, clean_env(), clean_env(GLOO_SOCKET_IFNAME="eth0"), 6),
        ["torch.hostname_loopback"], 0),  # a warning: two ranks still meet here
    "gloo-send-timeout": (
        "rank 0 sends a tensor rank 1 never receives; torch's timeout 2 s",
        lambda t, o: torch_pair(t, o, "unanswered-send", 29615, clean_env(GLOO_SOCKET_IFNAME="eth0"),
                                clean_env(GLOO_SOCKET_IFNAME="eth0"), 2),
        ["gloo.timed_out_waiting"], 3),
    "torch-store-timeout": (
        "rank 1 alone: nothing listens on MASTER_PORT at MASTER_ADDR",
        lambda t, o: single(t, o, "A", [PY, JOB, "allreduce", "1", "2", B_ADDR, "29617", "3"], clean_env(), "nodea-rank1.log"),
        ["torch.store_connect_timeout"], 3),
    "torch-rank-missing": (
        "rank 0 alone in a world of 2: rank 1 never comes",
        lambda t, o: single(t, o, "B", [PY, JOB, "allreduce", "0", "2", B_ADDR, "29621", "3"],
                            clean_env(GLOO_SOCKET_IFNAME="eth0"), "nodeb-rank0.log"),
        ["torch.socket_timeout"], 3),
    "torch-master-name-unanswered": (
        "rank 1 with MASTER_ADDR a name its hosts file lacks and its DNS server does not answer",
        lambda t, o: single(t, o, "A", [PY, JOB, "allreduce", "1", "2", "master.cluster.example", "29623", "3"],
                            clean_env(), "nodea-rank1.log"),
        ["torch.store_connect_timeout", "torch.c10d_gai_error"], 3),
    "python-name-unanswered": (
        "a Python client dials its peer by a name its hosts file lacks and its DNS server does not answer",
        lambda t, o: single(t, o, "A", [PY, "-c", PY_CONNECT, "master.cluster.example", "29625"], clean_env(),
                            "nodea-client.log"),
        ["net.name_lookup_unanswered"], 3),
    "python-bind-peer-address": (
        "B's server binds A's address (the peer's, given as its own)",
        lambda t, o: single(t, o, "B", [PY, "-c", PY_LISTEN, A_ADDR, "29627"], clean_env(), "nodeb-server.log"),
        ["os.address_not_available"], 3),
    "gloo-healthy": (
        "a working job on eth0 (no failure)",
        lambda t, o: torch_pair(t, o, "allreduce", 29619, clean_env(GLOO_SOCKET_IFNAME="eth0"),
                                clean_env(GLOO_SOCKET_IFNAME="eth0"), 6),
        [], 0),
    "ucx-wrong-nic": (
        "ucx_perftest on A with UCX_NET_DEVICES=ib0 towards B (UCX_TLS=tcp)",
        lambda t, o: perftest(t, o, 13611, clean_env(UCX_TLS="tcp", UCX_NET_DEVICES="ib0")),
        ["ucx.connect_failed", "ucx.backlog_advice", "ucx.destination_unreachable"], 3,
        # Only when the client outlives its server (under load): its own control socket breaks.
        ["ucx.perftest_control_lost"]),
    "ucx-no-such-device": (
        "ucx_perftest with UCX_NET_DEVICES naming a device A lacks",
        lambda t, o: perftest(t, o, 13613, clean_env(UCX_TLS="tcp", UCX_NET_DEVICES="nosuch0")),
        ["ucx.device_not_available", "ucx.no_usable_transports", "ucx.perftest_failed"], 3,
        # When the client fails after its control connection (timing): its peer sees the reset.
        ["ucx.perftest_control_lost"]),
    "ucx-transport-unavailable": (
        "ucx_perftest with UCX_TLS=rc on a node without an RDMA device",
        lambda t, o: perftest(t, o, 13615, clean_env(UCX_TLS="rc")),
        ["ucx.transport_not_available", "ucx.no_usable_transports", "ucx.perftest_failed"], 3,
        # When the client fails after its control connection (timing): its peer sees the reset.
        ["ucx.perftest_control_lost"]),
    "ucx-healthy": (
        "ucx_perftest over eth0 (no failure)",
        lambda t, o: perftest(t, o, 13617, clean_env(UCX_TLS="tcp", UCX_NET_DEVICES="eth0")),
        [], 0),
    "fi-refused": (
        "fi_pingpong client with no server",
        lambda t, o: single(t, o, "A", ["fi_pingpong", "-p", "tcp", "-P", "47611", B_ADDR], clean_env(), "nodea-client.log"),
        ["libfabric.pingpong_connect"], 3),
    "fi-no-endpoint": (
        "fi_pingpong over the tcp provider with its default datagram endpoint, which tcp does not offer",
        lambda t, o: fi_pair(t, o),
        ["libfabric.getinfo_failed", "libfabric.ctrl_read"], 3),
    "pairperf-refused": (
        "pairperf run towards B, where no pairperf server listens",
        lambda t, o: single(t, o, "A", [PAIRPERF, "run", f"{B_ADDR}:18611", "-t", "tcp", "--no-json"], clean_env(), "nodea-run.log"),
        ["pairperf.step_failed"], 3),
}


def fi_pair(topo, out):
    server = start(topo, "B", ["fi_pingpong", "-p", "tcp", "-B", "47613"], clean_env(), os.path.join(out, "nodeb-server.log"))
    try:
        wait_listening(topo, "B", 47613)
        client = start(topo, "A", ["fi_pingpong", "-p", "tcp", "-P", "47613", B_ADDR], clean_env(),
                       os.path.join(out, "nodea-client.log"))
        codes = [finish(client, 30)]
    finally:
        codes = locals().get("codes", []) + [finish(server, 10)]  # it ends when its peer has gone
    return codes, ["nodeb-server.log", "nodea-client.log"]


def versions():
    def first_line(cmd):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            return (r.stdout or r.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return None
    return {"torch": first_line([PY, "-c", "import torch; print(torch.__version__)"]),
            "python3-torch": first_line(["dpkg-query", "-W", "-f", "${Version}", "python3-torch"]),
            "libgloo0": first_line(["dpkg-query", "-W", "-f", "${Version}", "libgloo0"]),
            "ucx": first_line(["ucx_info", "-v"]),
            "libfabric": first_line(["fi_info", "--version"]),
            "pairperf": first_line([PAIRPERF, "--version"])}


def record(topo, outdir, names=None):
    manifest = {"topology": __doc__.split("\n\n")[1].strip(), "versions": versions(), "cases": {}}
    for name, (what, run, expect, code, *maybe) in CASES.items():
        if names and name not in names:
            continue
        out = os.path.join(outdir, name)
        os.makedirs(out, exist_ok=True)
        topo.hosts(resolve_a=name != "gloo-hostname-loopback")
        started = time.monotonic()
        codes, logs = run(topo, out)
        manifest["cases"][name] = {"what": what, "logs": logs, "program_exit_codes": codes,
                                   "expect": expect, "may_also": maybe[0] if maybe else [], "explain_exit": code,
                                   "seconds": round(time.monotonic() - started, 1)}
        print(f"{name}: {what}: exit codes {codes} ({manifest['cases'][name]['seconds']} s)", flush=True)
    topo.hosts(resolve_a=True)
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


def main(argv):
    if len(argv) < 1:
        print(__doc__)
        return 2
    if os.geteuid() != 0:
        print("record_failure_logs.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    with Topology(str(os.getpid() % 100000)) as topo:
        record(topo, argv[0], set(argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
