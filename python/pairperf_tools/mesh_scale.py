"""Times `pairperf mesh` under Open MPI on namespace clusters of 2, 4, 6 and 8 nodes (root), against
one pair alone, and prints the time model: total = rounds x per-round time + retests.

Usage: scripts/mesh-scale [--nodes 2,4,6,8] [--pairperf BIN]"""
import argparse
import os
import sys
import tempfile

from . import documents, netns

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))


def main(argv):
    ap = argparse.ArgumentParser(prog="mesh-scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="2,4,6,8")
    ap.add_argument("--pairperf", default=os.path.join(ROOT, "build", "pairperf"))
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("mesh-scale: needs root (network namespaces)", file=sys.stderr)
        return 2
    rows = []
    for n in [int(x) for x in a.nodes.split(",")]:
        with netns.Cluster(f"s{n}", n) as c, tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "mesh.json")
            p = c.mpirun(a.pairperf, ["mesh", "--iface", "eth0", "--duration", "0.2s", "--no-retest", "--json", out],
                         os.path.join(d, "hosts"))
            if p.returncode not in (0, 3):  # 3: findings (e.g. an asymmetric pair on a busy host)
                print(p.stdout[-2000:] + p.stderr[-2000:], file=sys.stderr)
                return 1
            doc = documents.read(out)
        t = doc["timing_s"]
        rows.append((n, len(t["rounds"]), sum(t["rounds"]) / len(t["rounds"]), sum(t["rounds"]), t["total"]))
        print(f"{n} nodes: {len(t['rounds'])} rounds, {sum(t['rounds']) / len(t['rounds']):.2f} s a round, "
              f"rounds {sum(t['rounds']):.2f} s, total {t['total']:.2f} s", flush=True)
    single = rows[0][2] if rows and rows[0][0] == 2 else None
    print("\nnodes  rounds  s/round  rounds s  total s" + ("  round / single pair" if single else ""))
    for n, r, per, rs, tot in rows:
        print(f"{n:5}  {r:6}  {per:7.2f}  {rs:8.2f}  {tot:7.2f}" + (f"  {per / single:19.2f}" if single else ""))
    return 0
