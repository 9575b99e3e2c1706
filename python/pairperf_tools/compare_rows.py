"""compare-peers' rows and their report: each compared metric from both tools' alternating
rounds (medians, ratio against its target), the levels a shared machine runs at from one run to
the next (modes, same-level rounds), how a UCX gap splits against the bare loop, and the table and
the pairperf.peer_ratios document they print."""
import json
import math
import statistics
import typing


class Row(typing.NamedTuple):
    """One compared metric: the two medians, their ratio against its target, and where the tools
    ran in alternating rounds, each round's value (in the metric's unit), so the spread and the
    ratio of each round's pair (the same minutes of the same machine) are shown beside it."""
    metric: str
    pairperf: float
    peer: str
    peer_value: float
    ratio: float
    target: str
    meets: bool
    pairperf_rounds: typing.Optional[list] = None
    peer_rounds: typing.Optional[list] = None


def judged(target, ratio):
    op, bound = target.split()
    return {"<=": ratio <= float(bound), ">=": ratio >= float(bound), "<": ratio < float(bound),
            ">": ratio > float(bound)}[op]


def rounds_row(metric, mine, peer, theirs, scale, target):
    """A row from both tools' rounds: medians compared; the rounds kept, scaled to the unit."""
    m, t = statistics.median(mine), statistics.median(theirs)
    return Row(metric, m * scale, peer, t * scale, m / t, target, judged(target, m / t),
               [v * scale for v in mine], [v * scale for v in theirs])


MODE_GAP = 1.5  # a gap this wide (x) between the sorted rounds of both tools splits two modes


def modes(row):
    """Where the rounds of both tools fall into two levels (this VM's TCP runs at about 2 or about
    6 GB/s from one run to the next, whichever tool runs): the split at the widest gap between the
    sorted values, in log space, when it is MODE_GAP or wider, and each mode's medians and ratio.
    None with one level (or no rounds)."""
    if not row.pairperf_rounds or not row.peer_rounds:
        return None
    values = sorted(v for v in row.pairperf_rounds + row.peer_rounds if v > 0)
    if len(values) < 4:
        return None
    gap, at = max((math.log(b / a), i) for i, (a, b) in enumerate(zip(values, values[1:])))
    if gap < math.log(MODE_GAP):
        return None
    split = math.sqrt(values[at] * values[at + 1])
    out = []
    for name, keep in (("low", lambda v: v < split), ("high", lambda v: v >= split)):
        mine = [v for v in row.pairperf_rounds if keep(v)]
        theirs = [v for v in row.peer_rounds if keep(v)]
        m = statistics.median(mine) if mine else None
        t = statistics.median(theirs) if theirs else None
        out.append({"mode": name, "split": split, "pairperf": m, "pairperf_rounds": len(mine), "peer_value": t,
                    "peer_rounds": len(theirs), "ratio": m / t if m and t else None})
    return out


def level_bounds(values):
    """Where this VM's levels part among the values (its TCP stream runs at about 2 or about 6
    GB/s, a shared-memory round trip at about 0.08, 0.16 or 0.6 us, from one run to the next):
    the geometric mean across every gap of MODE_GAP or wider between neighbours in sorted order."""
    ordered = sorted(v for v in values if v > 0)
    return [math.sqrt(a * b) for a, b in zip(ordered, ordered[1:]) if b / a >= MODE_GAP]


def level_of(value, bounds):
    return sum(value >= b for b in bounds)


def same_level_rounds(*series):
    """The indices of the rounds in which every tool ran at the same level of the machine: only
    their ratios compare the tools rather than the levels they happened to meet."""
    bounds = level_bounds([v for s in series for v in s])
    return [i for i, values in enumerate(zip(*series)) if len({level_of(v, bounds) for v in values}) == 1]


def same_level_ratios(row):
    """Each round's pairperf / peer, for the rounds in which both ran at one level."""
    if not row.pairperf_rounds or len(row.pairperf_rounds) != len(row.peer_rounds or []):
        return []
    keep = same_level_rounds(row.pairperf_rounds, row.peer_rounds)
    return [row.pairperf_rounds[i] / row.peer_rounds[i] for i in keep if row.peer_rounds[i]]


def breakdown(metric, mine, bare, theirs):
    """How pairperf / ucx_perftest splits into pairperf / the bare loop (what pairperf adds to the
    library's loop) and the bare loop / ucx_perftest (what ucx_perftest's process does otherwise):
    the medians of each round's ratios over the rounds in which the three tools, run in the same
    minutes, met one level of the machine (None where no round did)."""
    keep = same_level_rounds(mine, bare, theirs)

    def median_ratio(xs, ys):
        return statistics.median(xs[i] / ys[i] for i in keep) if keep else None
    return {"metric": metric, "rounds": len(mine), "same_level_rounds": len(keep),
            "pairperf_over_peer": median_ratio(mine, theirs), "pairperf_over_bare": median_ratio(mine, bare),
            "bare_over_peer": median_ratio(bare, theirs), "pairperf_rounds": mine, "bare_rounds": bare, "peer_rounds": theirs}


def breakdown_text(b):
    if not b["same_level_rounds"]:
        return f"  {b['metric']}: no round had the three tools at one level of the machine ({b['rounds']} rounds)"
    return (f"  {b['metric']}: pairperf / perftest {b['pairperf_over_peer']:.3f}; pairperf / bare loop "
            f"{b['pairperf_over_bare']:.3f} (what pairperf adds); bare loop / perftest {b['bare_over_peer']:.3f} "
            f"(the same UCP calls without ucx_perftest's process); medians over the {b['same_level_rounds']} of "
            f"{b['rounds']} rounds with the three at one level")


def spread_text(values):
    return f"{min(values):.3g}-{max(values):.3g}" if values else "-"


def paired_ratios(row):
    """Each round's pairperf value over the same round's peer value (the two ran in the same minutes)."""
    if not row.pairperf_rounds or len(row.pairperf_rounds) != len(row.peer_rounds or []):
        return []
    return [m / t for m, t in zip(row.pairperf_rounds, row.peer_rounds) if t]


def mode_text(m, peer):
    def value(v, n):
        return f"{v:.3f} ({n} round{'' if n == 1 else 's'})" if v is not None else "- (0 rounds)"
    ratio = f"ratio {m['ratio']:.3f}" if m["ratio"] is not None else "no ratio: one tool never ran in it"
    return f"{m['mode']}: pairperf {value(m['pairperf'], m['pairperf_rounds'])} vs {peer} " \
           f"{value(m['peer_value'], m['peer_rounds'])}, {ratio}"


def row_json(r, m):
    out = {"metric": r.metric, "pairperf": r.pairperf, "peer": r.peer, "peer_value": r.peer_value, "ratio": r.ratio,
           "target": r.target, "meets": r.meets}
    if r.pairperf_rounds:
        out.update(pairperf_rounds=r.pairperf_rounds, peer_rounds=r.peer_rounds, round_ratios=paired_ratios(r))
        same = same_level_ratios(r)
        out.update(same_level_round_ratios=same, same_level_ratio=statistics.median(same) if same else None)
    if m:
        out["modes"] = m
    return out


def print_rows(a, rows, report, where="on loopback"):
    print(f"\npairperf vs peers {where}, medians of {a.rounds} alternating rounds; beside each median the rounds' "
          f"range, and the range of each round's ratio (pairperf / the peer in the same round)")
    width = max([36] + [len(r.metric) for r in rows])
    print(f"{'metric':<{width}} {'pairperf':>10} {'(rounds)':>15} {'peer':>11} {'peer value':>11} {'(rounds)':>15} "
          f"{'ratio':>7} {'(rounds)':>13} {'target':>8}  verdict")
    for r in rows:
        print(f"{r.metric:<{width}} {r.pairperf:>10.3f} {spread_text(r.pairperf_rounds):>15} {r.peer:>11} "
              f"{r.peer_value:>11.3f} {spread_text(r.peer_rounds):>15} {r.ratio:>7.3f} {spread_text(paired_ratios(r)):>13} "
              f"{r.target:>8}  {'meets' if r.meets else 'misses'}")
    split = [(r, modes(r)) for r in rows]
    for r, m in split:
        if m:
            print(f"  {r.metric}: two modes, split at {m[0]['split']:.3g}; "
                  + "; ".join(mode_text(x, r.peer) for x in m))
    for r in rows:
        same = same_level_ratios(r)
        if r.pairperf_rounds and len(same) < len(r.pairperf_rounds):
            median = f"their ratios' median {statistics.median(same):.3f} ({spread_text(same)})" if same else "no ratio"
            print(f"  {r.metric} vs {r.peer}: {len(same)} of {len(r.pairperf_rounds)} rounds had both tools at one "
                  f"level of the machine; {median}")
    splits = report.get("ucx", {}).get("breakdown", [])
    if splits:
        print("where each UCX gap sits (pairperf / perftest = pairperf / bare loop x bare loop / perftest):")
        for b in splits:
            print(breakdown_text(b))
    report["ratios"] = {f"{r.metric} vs {r.peer}": r.ratio for r in rows}  # one metric can have two peers
    if a.json:
        doc = {"schema": "pairperf.peer_ratios", "schema_version": "1.2.0", "suite": a.suite, "rounds": a.rounds,
               "where": where, "rows": [row_json(r, m) for r, m in split], "figures": report}
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
