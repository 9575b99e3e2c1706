"""Times `pairperf mesh` under Open MPI on namespace clusters (root), fits the time model to the
measured rounds and prints what it predicts for 1,024 nodes with each schedule.

Each cluster runs the default mesh (tcp_lat 8 B + tcp_bw 1 MiB at --duration, both directions, no
retests). The model, fitted by least squares to the steady rounds (every round but the first, which
also pays each process's first hello):

  round_s(k) = a + b x (k - 1)          k = pairs measured at once in a round (n/2)
  total(n)   = launch + first + rounds(n) x round_s

`a` is one pair's round (its cases, their set-up and one barrier); `b` is what each further
concurrent pair adds. On this VM every pair shares the same two cores, so b is CPU contention; on
a cluster each pair has its own nodes and a round costs `a` (plus a barrier that grows with log2 n,
part of `a` here). The 1,024-node figures use one pair's round measured alone (or `a` where no
2-node cluster ran, whichever is larger), and `a + b x 511` (this VM's contention) beside them as a
bound no cluster reaches. Rounds: all-pairs n-1 per direction (circle method), ring 2
(n even) per direction, one-to-all n-1 per direction.

Usage: scripts/mesh-scale [--nodes 2,4,8,16] [--duration 0.2s] [--pairperf BIN] [--json FILE]"""
import argparse
import json
import os
import sys
import tempfile

from . import documents, netns

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
TARGET_NODES = 1024


def fit_line(xs, ys):
    """Least squares y = a + b x; b = 0 for a single point."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def schedule_rounds(nodes, pattern, both=True):
    """Rounds of mesh_schedule (mesh/mesh.cpp) for an even node count."""
    one = nodes - 1 if pattern in ("all-pairs", "one-to-all") else (1 if nodes == 2 else 2)
    return 2 * one if both else one


def measure(binary, n, duration):
    with netns.Cluster(f"s{n}", n) as c, tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "mesh.json")
        p = c.mpirun(binary, ["mesh", "--iface", "eth0", "--duration", duration, "--no-retest", "--json", out],
                     os.path.join(d, "hosts"))
        if p.returncode not in (0, 3):  # 3: findings (e.g. an asymmetric pair on a busy host)
            raise RuntimeError(f"mesh of {n} nodes exited {p.returncode}: {p.stdout[-2000:]}{p.stderr[-2000:]}")
        return documents.read(out)["timing_s"]


def main(argv):
    ap = argparse.ArgumentParser(prog="mesh-scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="2,4,8,16")
    ap.add_argument("--duration", default="0.2s", help="pairperf mesh --duration (the default's)")
    ap.add_argument("--pairperf", default=os.path.join(ROOT, "build", "pairperf"))
    ap.add_argument("--json", help="write the measured rounds and the model here")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("mesh-scale: needs root (network namespaces)", file=sys.stderr)
        return 2
    sizes = [int(x) for x in a.nodes.split(",")]
    if any(n < 2 or n % 2 for n in sizes):
        print("mesh-scale: --nodes takes even counts of at least 2", file=sys.stderr)
        return 2
    rows = []
    for n in sizes:
        try:
            t = measure(a.pairperf, n, a.duration)
        except RuntimeError as e:
            print(f"mesh-scale: {e}", file=sys.stderr)
            return 1
        rounds = t["rounds"]
        steady = rounds[1:] or rounds
        row = {"nodes": n, "pairs_per_round": n // 2, "rounds": len(rounds), "first_round_s": rounds[0],
               "steady_round_s": sum(steady) / len(steady), "rounds_s": sum(rounds), "total_s": t["total"],
               "launch_s": t["total"] - sum(rounds)}
        rows.append(row)
        print(f"{n} nodes: {len(rounds)} rounds, first {rounds[0]:.2f} s, then {row['steady_round_s']:.3f} s a round, "
              f"total {t['total']:.2f} s", flush=True)

    a_s, b_s = fit_line([r["pairs_per_round"] - 1 for r in rows], [r["steady_round_s"] for r in rows])
    first_extra = max(0.0, sum(r["first_round_s"] - r["steady_round_s"] for r in rows) / len(rows))
    launch = max(r["launch_s"] for r in rows)
    print(f"\nmeasured (--duration {a.duration}, both directions, tcp_lat 8 B + tcp_bw 1 MiB, no retests):")
    print("nodes  pairs/round  rounds  first s  steady s/round  model s/round  total s")
    for r in rows:
        model = a_s + b_s * (r["pairs_per_round"] - 1)
        print(f"{r['nodes']:5}  {r['pairs_per_round']:11}  {r['rounds']:6}  {r['first_round_s']:7.2f}  {r['steady_round_s']:14.3f}  "
              f"{model:13.3f}  {r['total_s']:7.2f}")
    print(f"\nfit: round = {a_s:.3f} s + {b_s:.3f} s x (concurrent pairs - 1); first round +{first_extra:.2f} s; launch up to {launch:.2f} s")
    contended = a_s + b_s * (TARGET_NODES // 2 - 1)
    # One pair's round as measured alone where there is such a row (the fit's intercept may sit
    # below it), else the intercept.
    single = next((r["steady_round_s"] for r in rows if r["pairs_per_round"] == 1), None)
    per_round = max(a_s, single) if single is not None else a_s
    model = {"a_s": a_s, "b_s": b_s, "round_s": per_round, "first_extra_s": first_extra, "launch_s": launch, "predictions": []}
    print(f"\n{TARGET_NODES} nodes (a cluster: each pair on its own nodes, a round = {per_round:.3f} s, "
          f"{'one pair measured alone' if single is not None else 'the intercept'}):")
    print("schedule               rounds   minutes   (this VM's contention: minutes)")
    for pattern, both in (("all-pairs", True), ("all-pairs", False), ("ring", True), ("one-to-all", True)):
        n_rounds = schedule_rounds(TARGET_NODES, pattern, both)
        total = launch + first_extra + n_rounds * per_round
        worst = launch + first_extra + n_rounds * contended
        label = f"{pattern} {'both ways' if both else '--one-way'}"
        print(f"{label:22} {n_rounds:6}   {total / 60:7.1f}   ({worst / 60:.0f})")
        model["predictions"].append({"schedule": pattern, "both_directions": both, "rounds": n_rounds,
                                     "total_s": total, "contended_total_s": worst})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"measured": rows, "model": model, "duration": a.duration}, f, indent=2)
    return 0
