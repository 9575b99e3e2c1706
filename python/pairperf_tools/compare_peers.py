"""pairperf against the peer tools, side by side on loopback, in one command.

  TCP transport:
  bandwidth at 1 MiB      pairperf tcp_bw (receiver)      vs iperf3 -l 1M (receiver)     target ratio >= 1.0
  one-way latency, small  pairperf tcp_lat (busy-poll)    vs sockperf ping-pong, busy    target ratio <= 1.05
                          (both tools pinned alike, as the UCX latency rows; the order alternates)
  UCX transport, for UCX_TLS=tcp and UCX_TLS=posix,sysv,cma (UCX_NET_DEVICES=lo), same sizes,
  iterations, warm-up and window:
  tag latency at 8 B      pairperf tag_lat                vs ucx_perftest -t tag_lat     target ratio <= 1.03
                          (both pinned alike: client on the first CPU, server on the second)
  tag latency, the mean   pairperf tag_lat mean one-way   vs ucx_perftest's overall      target ratio <= 1.03
                          (the p50 of a busy-polled round trip moves on a grid of about 5 ns here)
  tag bandwidth at 1 MiB  pairperf tag_bw (receiver)      vs ucx_perftest -t tag_bw      target ratio >= 0.97
  the same three rows     vs the bare UCX loop (pairperf_ucx_bare, built beside pairperf: ucx_perftest's
                          tag loops on UCP alone, same pinning)                  same targets
                          and, per row, how the gap to ucx_perftest splits: pairperf / bare loop (what
                          pairperf adds to the library's loop) x bare loop / ucx_perftest (what
                          ucx_perftest's process does otherwise), medians of the rounds' ratios
  sweep wall time         one pairperf run of 24 sizes (1 B..8 MiB) x 3 TLS sets vs the same matrix
                          as a loop of ucx_perftest invocations, same iterations  target ratio <= 0.07
  sweep fixed cost        the same walls less the measured phases (pairperf: overhead.measured_s of
                          its results' context; ucx_perftest: 2 x overall latency x iterations), which
                          both move the same bytes          target ratio <= 0.07

sockperf's smallest message is 14 bytes (its header), so both latency runs use 14 B; pairperf at
8 B is shown beside them. The runs alternate (pairperf, peer, pairperf, peer, ...) and the median
of the rounds is compared, so that drift of a shared VM hits both alike. Prints ratios; it never
fails on a ratio (performance is reported, not asserted), only when a tool is missing.

With --curves FILE it also measures ucx_perftest's tag_bw and tag_lat over message sizes (8 B to
1 MiB, each TLS set) and writes them as a pairperf.peer file, which `pairperf report` draws as
dashed curves beside pairperf's own.

  verbs (in scripts/softroce-vm, on rxe0; emulated, so only the ratio means anything):
  send latency at 8 B     pairperf send_lat p50           vs ib_send_lat t_typical       target ratio <= 1.05
  write bandwidth 64 KiB  pairperf write_bw               vs ib_write_bw BW average      target ratio >= 0.97

  GPU memory through UCX (a GPU and a CUDA-enabled UCX: scripts/build-ucx-cuda, then
  `. build-ucx-cuda/env.sh`), two processes on one GPU, --mem cuda,cuda:
  cuda_ipc bandwidth      pairperf tag_bw, UCX_TLS=cuda_ipc,cuda_copy,tcp  vs cudaMemcpy device to
                          device on the same GPU (pairperf_micro BM_cudaMemcpy_D2D), 1/16/64 MiB
                                                                                 target ratio >= 0.90
                          and vs ucx_perftest -t tag_bw -m cuda,cuda, same TLS and sizes
                                                                                 target ratio >= 0.97
  latency at 8 B          pairperf tag_lat p50, same TLS   vs ucx_perftest -t tag_lat -m cuda,cuda p50
                                                          (both pinned alike)    target ratio <= 1.03
  fallback, for contrast  pairperf tag_bw 16 MiB, UCX_TLS=cuda_copy,tcp: its bandwidth and verdict
  Each pairperf row's path verdict (fast path / fallback) and lanes are printed. Without a GPU or
  without a CUDA UCX the suite says why and exits 3.

  libfabric (OFI) transport, RDM endpoints with tagged messages, for the providers tcp;ofi_rxm and
  shm on loopback (and verbs;ofi_rxm in the Soft-RoCE VM with --vm), same provider, size and
  iterations as fi_pingpong (libfabric-bin; its figures are means over a ping-pong):
  latency at 8 B          pairperf fi_tag_lat mean one-way  vs fi_pingpong usec/xfer   target ratio <= 1.05
  bandwidth at 1 MiB      pairperf fi_tag_lat, size / mean one-way  vs fi_pingpong MB/sec
                                                                                 target ratio >= 0.95

  gloo transport (--suite gloo), the way torch.distributed drives libgloo, on loopback, sizes 8 B,
  64 B, 1 KiB, 4 KiB and 1 MiB, the same iterations, warm-up and window for every tool:
  latency p50 and p99     pairperf gloo_lat (one-way)     vs the C++ loop on libgloo with torch's
                          calls (pairperf_gloo_loop, built beside pairperf)    target ratio <= 1.05
                                                          vs torch.distributed's gloo (Debian's
                          python3-torch, under /usr/bin/python3: pairperf_tools.torch_gloo_peer)
                                                                                 target ratio <= 1.0
  bandwidth               pairperf gloo_bw (receiver)     vs both, window 32    target ratio >= 0.95
  Three tools alternate in each round (their order rotates), unpinned as torch jobs run.

  the harness itself (--suite all), from pairperf_micro (Google Benchmark, --rounds repetitions):
  one sample              timing + recording one ping-pong sample vs the rdtsc instruction alone
                          (its floor; the steady clock where there is no TSC)   target ratio <= 1.05
                          (the absolute 8 ns is printed beside it: under a hypervisor rdtsc alone
                          may cost more)

Usage: scripts/compare-peers [--suite tcp|ucx|verbs|ofi|gloo|gpu|all] [--rounds N] [--seconds S] [--json FILE]
                             [--curves FILE] [--pairperf BIN] [--vm]
"""
import argparse
import glob
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import typing

from .processes import Background, free_port, run

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
HERE = os.path.dirname(os.path.realpath(__file__))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


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


def pairperf(binary, test, size, seconds, pin=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        run([binary, "run", "--test", test, "--sizes", str(size), "--duration", f"{seconds}s", "--json", out, "--quiet",
             "--timeout-case", f"{seconds * 4 + 10}s"] + (["--cpu", f"{pin[0]},{pin[1]}"] if pin else []),
            timeout=seconds * 6 + 30)
        with open(out) as f:
            r = json.load(f)["results"][0]
    if r["status"] != "ok":
        raise RuntimeError(f"pairperf {test} {size}: {r['status']}: {r.get('message')}")
    return r


def pinned(command, cpu):
    """The command on one CPU (taskset), or as it is without pinning."""
    return ["taskset", "-c", str(cpu)] + command if cpu is not None else command


def iperf3_bw(seconds, pin=None):
    port = free_port()
    with Background(pinned(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)], pin and pin[1]), port, exits=True):
        p = run(pinned(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-l", "1M", "-t", str(seconds), "-J"], pin and pin[0]),
                timeout=seconds + 30)
    return json.loads(p.stdout)["end"]["sum_received"]["bits_per_second"] / 8


def sockperf_lat(seconds, size, pin=None):
    port = free_port()
    busy = ["--nonblocked", "--timeout", "0"]
    with Background(pinned(["sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", str(port)] + busy, pin and pin[1]), port):
        p = run(pinned(["sockperf", "pp", "--tcp", "-i", "127.0.0.1", "-p", str(port), "-m", str(size), "-t", str(seconds)] + busy,
                       pin and pin[0]), timeout=seconds + 30)
    text = ANSI.sub("", p.stdout + p.stderr)
    avg = float(re.search(r"avg-latency=([0-9.]+)", text).group(1)) * 1e-6
    p50 = float(re.search(r"percentile 50\.000 =\s*([0-9.]+)", text).group(1)) * 1e-6
    return {"avg": avg, "p50": p50}


UCX_TLS_SETS = ["tcp", "posix,sysv,cma"]
MB = 1024 * 1024  # ucx_perftest's MB/s


def ucx_env(tls):
    env = dict(os.environ, UCX_NET_DEVICES="lo")
    if tls:
        env["UCX_TLS"] = tls
    else:
        env.pop("UCX_TLS", None)
    return env


def latency_pinning():
    """(client CPU, server CPU) for the latency rows, the same for both tools (pairperf --cpu,
    ucx_perftest -c): on a VM whose two vCPUs differ, where each process lands moves a
    shared-memory round trip by tens of percent. None on a single CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else None


def ucx_perftest(test, size, iters, warmup, tls, window=32, mem=None, pin=None):
    """One ucx_perftest client/server pair; returns its final line's figures. mem: ucx_perftest's
    -m value ("cuda,cuda"), None for host memory; pin: (client CPU, server CPU)."""
    port = free_port()
    env = ucx_env(tls)
    server = ["ucx_perftest", "-p", str(port)] + (["-c", str(pin[1])] if pin else [])
    with Background(server, port, env=env, exits=True):
        args = ["ucx_perftest", "-p", str(port), "127.0.0.1", "-t", test, "-s", str(size), "-n", str(iters), "-w", str(warmup), "-f"]
        if pin:
            args += ["-c", str(pin[0])]
        if test.endswith("_bw"):
            args += ["-O", str(window)]
        if mem:
            args += ["-m", mem]
        p = run(args, timeout=300, env=env)
    numbers = [l.split() for l in p.stdout.splitlines() if l.strip() and l.split()[0].isdigit()]
    iters_done, p50, avg, overall, bw_avg, bw_overall, rate_avg, rate_overall = map(float, numbers[-1][:8])
    # overall: the mean over every iteration (one-way for the latency tests).
    return {"p50_s": p50 * 1e-6, "avg_s": avg * 1e-6, "overall_s": overall * 1e-6, "iterations": iters_done,
            "bandwidth_Bps": bw_overall * MB}


def pairperf_ucx(binary, test, sizes, iters, warmup, tls_sets, window=32, extra=(), context=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        args = [binary, "run", "--transport", "ucx", "--test", test, "--iface", "lo", "--sizes", sizes, "-n", str(iters), "--warmup", str(warmup),
                "--window", str(window), "--json", out, "--quiet", "--timeout-case", "300s"] + list(extra)
        for t in tls_sets:
            args += ["--tls", t or "all"]
        run(args, timeout=1200)
        with open(out) as f:
            doc = json.load(f)
        results = doc["results"]
        if context is not None:
            context.update(doc["context"])
    bad = [r for r in results if r["status"] != "ok"]
    if bad:
        raise RuntimeError(f"pairperf {test}: {bad[0]['status']}: {bad[0].get('message')}")
    return results


def bare_binary(a):
    """pairperf_ucx_bare (ucx_perftest's loops on UCP alone), built beside the pairperf under test."""
    return os.path.join(os.path.dirname(os.path.abspath(a.pairperf)), "pairperf_ucx_bare")


def ucx_bare(binary, test, size, iters, warmup, tls, window=32, pin=None):
    """One run of the bare UCX loop; returns its JSON object (latency_s p50/mean one-way, or
    receiver_Bps and sender_Bps)."""
    args = [binary, "--test", test, "--size", str(size), "--iterations", str(iters), "--warmup", str(warmup),
            "--window", str(window), "--timeout", "240"] + (["--cpu", f"{pin[0]},{pin[1]}"] if pin else [])
    return json.loads(run(args, timeout=300, env=ucx_env(tls)).stdout)


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


def compare_ucx(a):
    rows, figures, splits = [], {}, []
    pin = latency_pinning()
    bare = bare_binary(a)
    if not os.access(bare, os.X_OK):
        bare = None
        print(f"compare-peers: no pairperf_ucx_bare beside {a.pairperf}: the rows against the bare UCX loop are left out",
              file=sys.stderr)
    for tls in UCX_TLS_SETS:
        lat = {"pairperf": [], "perftest": [], "bare": []}
        mean = {"pairperf": [], "perftest": [], "bare": []}
        bw = {"pairperf": [], "perftest": [], "bare": []}

        def pairperf_lat():
            r = pairperf_ucx(a.pairperf, "tag_lat", "8", 100000, 10000, [tls],
                             extra=["--cpu", f"{pin[0]},{pin[1]}"] if pin else [])[0]["latency_s"]
            lat["pairperf"].append(r["p50"])
            mean["pairperf"].append(r["avg"])

        def perftest_lat():
            r = ucx_perftest("tag_lat", 8, 100000, 10000, tls, pin=pin)
            lat["perftest"].append(r["p50_s"])
            mean["perftest"].append(r["overall_s"])

        def bare_lat():
            r = ucx_bare(bare, "tag_lat", 8, 100000, 10000, tls, pin=pin)["latency_s"]
            lat["bare"].append(r["p50"])
            mean["bare"].append(r["mean"])

        tools = [
            (pairperf_lat, lambda: bw["pairperf"].append(
                pairperf_ucx(a.pairperf, "tag_bw", "1M", 2000, 200, [tls])[0]["bandwidth_Bps"]["receiver"])),
            (perftest_lat, lambda: bw["perftest"].append(ucx_perftest("tag_bw", 1 << 20, 2000, 200, tls)["bandwidth_Bps"])),
        ]
        if bare:
            tools.append((bare_lat, lambda: bw["bare"].append(ucx_bare(bare, "tag_bw", 1 << 20, 2000, 200, tls)["receiver_Bps"])))
        for i in range(a.rounds):
            print(f"ucx {tls}: round {i + 1}/{a.rounds} ...", file=sys.stderr, flush=True)
            # Rotate which tool goes first, so drift of a shared machine hits all alike.
            order = tools[i % len(tools):] + tools[:i % len(tools)]
            for latency, _ in order:
                latency()
            for _, bandwidth in order:
                bandwidth()
        rows.append(rounds_row(f"ucx {tls} tag_lat 8 B p50 (us)", lat["pairperf"], "perftest", lat["perftest"], 1e6, "<= 1.03"))
        rows.append(rounds_row(f"ucx {tls} tag_lat 8 B mean (us)", mean["pairperf"], "perftest", mean["perftest"], 1e6, "<= 1.03"))
        rows.append(rounds_row(f"ucx {tls} tag_bw 1 MiB (GB/s)", bw["pairperf"], "perftest", bw["perftest"], 1e-9, ">= 0.97"))
        figures[tls] = {"tag_lat_p50_s": {"pairperf": lat["pairperf"], "ucx_perftest": lat["perftest"]},
                        "tag_lat_mean_s": {"pairperf": mean["pairperf"], "ucx_perftest": mean["perftest"]},
                        "tag_bw_Bps": {"pairperf": bw["pairperf"], "ucx_perftest": bw["perftest"]}}
        if bare:
            # The same targets against the library's own loop: what pairperf adds on top of it.
            rows.append(rounds_row(f"ucx {tls} tag_lat 8 B p50 (us)", lat["pairperf"], "bare loop", lat["bare"], 1e6, "<= 1.03"))
            rows.append(rounds_row(f"ucx {tls} tag_lat 8 B mean (us)", mean["pairperf"], "bare loop", mean["bare"], 1e6, "<= 1.03"))
            rows.append(rounds_row(f"ucx {tls} tag_bw 1 MiB (GB/s)", bw["pairperf"], "bare loop", bw["bare"], 1e-9, ">= 0.97"))
            for name, key, series in (("tag_lat 8 B p50", "tag_lat_p50_s", lat), ("tag_lat 8 B mean", "tag_lat_mean_s", mean),
                                      ("tag_bw 1 MiB", "tag_bw_Bps", bw)):
                figures[tls][key]["bare_loop"] = series["bare"]
                splits.append(breakdown(f"ucx {tls} {name}", series["pairperf"], series["bare"], series["perftest"]))
    figures["breakdown"] = splits
    sweep_rows, figures["sweep_wall_s"] = compare_sweep(a)
    return rows + sweep_rows, figures


def compare_sweep(a):
    """The sweep: one pairperf command against a loop of ucx_perftest runs, same iterations."""
    rows = []
    sizes = [1 << i for i in range(24)]
    tls_sets = ["tcp", "posix,sysv,cma", ""]
    iters, warmup = 200, 20
    # Both walls hold the same data movement (the 8 MiB round trips alone take seconds), so
    # beside the wall ratio the fixed costs are compared: wall minus the measured phases
    # (pairperf: its context's overhead.measured_s; ucx_perftest: 2 x overall latency x iterations).
    print("sweep: pairperf ...", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    ctx = {}
    pairperf_ucx(a.pairperf, "tag_lat", "1:8M", iters, warmup, tls_sets, context=ctx)
    pp_wall = time.monotonic() - t0
    pp_fixed = pp_wall - ctx["overhead"]["measured_s"]
    print("sweep: ucx_perftest loop ...", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    up_measured = 0.0
    for tls in tls_sets:
        for size in sizes:
            r = ucx_perftest("tag_lat", size, iters, warmup, tls)
            up_measured += 2 * r["overall_s"] * r["iterations"]
    up_wall = time.monotonic() - t0
    up_fixed = up_wall - up_measured
    rows.append(Row("sweep 24 sizes x 3 TLS wall (s)", pp_wall, "perftest", up_wall, pp_wall / up_wall, "<= 0.07",
                    pp_wall / up_wall <= 0.07))
    rows.append(Row("sweep fixed cost: wall - measured (s)", pp_fixed, "perftest", up_fixed, pp_fixed / up_fixed, "<= 0.07",
                    pp_fixed / up_fixed <= 0.07))
    per_case = ctx["overhead"].get("per_case_s", {}).get("median", 0.0)
    print(f"sweep: pairperf per-case overhead median {per_case * 1e3:.1f} ms, start-up {ctx['overhead']['setup_s']:.2f} s "
          f"(results context); ucx_perftest {up_fixed / len(sizes) / len(tls_sets) * 1e3:.0f} ms a run", file=sys.stderr)
    return rows, {"pairperf": pp_wall, "ucx_perftest_loop": up_wall, "pairperf_fixed": pp_fixed, "ucx_perftest_fixed": up_fixed,
                  "pairperf_overhead": ctx["overhead"]}


OFI_PROVIDERS = ["tcp;ofi_rxm", "shm"]
OFI_POINTS = [(8, 20000), (1 << 20, 2000)]  # (size, iterations): 8 B latency, 1 MiB bandwidth


def fi_pingpong(provider, size, iters, host="127.0.0.1"):
    """One fi_pingpong pair over RDM tagged messages; returns its mean one-way time (usec/xfer)
    and its MB/sec (2 x size x iterations / time: size over the mean one-way time)."""
    port = free_port()
    common = ["fi_pingpong", "-p", provider, "-e", "rdm", "-m", "tagged", "-S", str(size), "-I", str(iters)]
    with Background(common + ["-B", str(port)], port, exits=True):
        p = run(common + ["-P", str(port), host], timeout=300)
    numbers = [l.split() for l in p.stdout.splitlines() if l.strip() and l.split()[0][0].isdigit()]
    if not numbers:
        raise RuntimeError(f"fi_pingpong {provider} {size}: no figures in its output:\n{p.stdout}{p.stderr}")
    fields = numbers[-1]
    return {"one_way_s": float(fields[6]) * 1e-6, "bandwidth_Bps": float(fields[5]) * 1e6}


def pairperf_ofi(binary, provider, size, iters, host=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        args = [binary, "run"] + ([host] if host else []) + [
            "--transport", "ofi", "--test", "fi_tag_lat", "--ofi-provider", provider, "--sizes", str(size), "-n", str(iters),
            "--json", out, "--quiet", "--timeout-case", "300s"]
        if not host:
            args += ["--iface", "lo"]
        run(args, timeout=600)
        with open(out) as f:
            r = json.load(f)["results"][0]
    if r["status"] != "ok":
        raise RuntimeError(f"pairperf ofi {provider} {size}: {r['status']}: {r.get('message')}")
    mean = r["latency_s"]["avg"]
    return {"one_way_s": mean, "bandwidth_Bps": size / mean}


def compare_ofi(a, providers=None):
    rows, figures = [], {}
    for provider in providers or OFI_PROVIDERS:
        samples = {k: [] for k in ("pp_lat", "fi_lat", "pp_bw", "fi_bw")}
        for i in range(a.rounds):
            print(f"ofi {provider}: round {i + 1}/{a.rounds} ...", file=sys.stderr, flush=True)
            (lat_size, lat_iters), (bw_size, bw_iters) = OFI_POINTS
            runs = [
                lambda: samples["pp_lat"].append(pairperf_ofi(a.pairperf, provider, lat_size, lat_iters)["one_way_s"]),
                lambda: samples["fi_lat"].append(fi_pingpong(provider, lat_size, lat_iters)["one_way_s"]),
                lambda: samples["pp_bw"].append(pairperf_ofi(a.pairperf, provider, bw_size, bw_iters)["bandwidth_Bps"]),
                lambda: samples["fi_bw"].append(fi_pingpong(provider, bw_size, bw_iters)["bandwidth_Bps"]),
            ]
            for k in ([0, 1, 2, 3] if i % 2 == 0 else [1, 0, 3, 2]):
                runs[k]()
        rows.append(rounds_row(f"ofi {provider} tag latency 8 B mean (us)", samples["pp_lat"], "fi_pingpong",
                               samples["fi_lat"], 1e6, "<= 1.05"))
        rows.append(rounds_row(f"ofi {provider} ping-pong bw 1 MiB (GB/s)", samples["pp_bw"], "fi_pingpong",
                               samples["fi_bw"], 1e-9, ">= 0.95"))
        figures[provider] = samples
    return rows, figures


GLOO_SIZES = [8, 64, 1024, 4096, 1 << 20]
GLOO_TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch is for this interpreter


def gloo_counts(test, size):
    """(iterations, warm-up) for one gloo point, the same for every tool."""
    if test == "lat":
        return (1000, 200) if size >= 1 << 20 else (5000, 1000)
    return (1000, 64) if size >= 1 << 20 else (20000, 64)


def pairperf_gloo(binary, test, sizes):
    """One pairperf run of gloo_lat or gloo_bw over `sizes`; {size: result}."""
    by_size = {}
    with tempfile.TemporaryDirectory() as d:
        for size in sizes:  # one run per size: the counts differ with the size
            iters, warm = gloo_counts(test, size)
            out = os.path.join(d, f"{size}.json")
            run([binary, "run", "--transport", "gloo", "--test", f"gloo_{test}", "--sizes", str(size), "-n", str(iters),
                 "--warmup", str(warm), "--window", "32", "--json", out, "--quiet", "--timeout-case", "120s"],
                timeout=300)
            with open(out) as f:
                r = json.load(f)["results"][0]
            if r["status"] != "ok":
                raise RuntimeError(f"pairperf gloo_{test} {size}: {r['status']}: {r.get('message')}")
            by_size[size] = r
    return by_size


def gloo_peer(command, test, sizes):
    """The C++ loop or torch over `sizes`; {size: its JSON}."""
    by_size = {}
    for size in sizes:
        iters, warm = gloo_counts(test, size)
        p = run(command + ["--test", test, "--size", str(size), "--iterations", str(iters), "--warmup", str(warm),
                           "--window", "32", "--timeout", "120"], timeout=300)
        by_size[size] = json.loads(p.stdout.strip().splitlines()[-1])
    return by_size


def gloo_unavailable(a):
    """Why the gloo suite cannot run here ("" when it can)."""
    loop = os.path.join(os.path.dirname(a.pairperf), "pairperf_gloo_loop")
    if not os.access(loop, os.X_OK):
        return f"no {loop}: pairperf was built without gloo (libgloo-dev)"
    probe = subprocess.run([GLOO_TORCH_PYTHON, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"{GLOO_TORCH_PYTHON} has no torch.distributed with gloo (Debian: apt-get install python3-torch)"
    return ""


def compare_gloo(a):
    loop = [os.path.join(os.path.dirname(a.pairperf), "pairperf_gloo_loop")]
    torch = [GLOO_TORCH_PYTHON, "-m", "pairperf_tools.torch_gloo_peer"]
    env_path = os.path.dirname(HERE)
    os.environ["PYTHONPATH"] = env_path + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    tools = {"pairperf": lambda t: pairperf_gloo(a.pairperf, t, GLOO_SIZES),
             "C++ loop": lambda t: gloo_peer(loop, t, GLOO_SIZES),
             "torch": lambda t: gloo_peer(torch, t, GLOO_SIZES)}
    names = list(tools)
    got = {n: {"lat": [], "bw": []} for n in names}
    for i in range(a.rounds):
        print(f"gloo: round {i + 1}/{a.rounds} ...", file=sys.stderr, flush=True)
        order = names[i % 3:] + names[:i % 3]
        for test in ("lat", "bw"):
            for n in order:
                got[n][test].append(tools[n](test))

    def series(name, test, size, pick):
        return [pick(r[size]) for r in got[name][test]]

    lat = {"p50": lambda r: r["latency_s"]["p50"], "p99": lambda r: r["latency_s"]["p99"]}
    bw = lambda r: r["bandwidth_Bps"]["receiver"] if isinstance(r["bandwidth_Bps"], dict) else r["bandwidth_Bps"]  # noqa: E731
    rows = []
    for size in GLOO_SIZES:
        for q in ("p50", "p99"):
            mine = series("pairperf", "lat", size, lat[q])
            for peer, target in (("C++ loop", "<= 1.05"), ("torch", "<= 1.0")):
                rows.append(rounds_row(f"gloo latency {q} {size} B (us)", mine, peer, series(peer, "lat", size, lat[q]),
                                       1e6, target))
        mine = series("pairperf", "bw", size, bw)
        for peer in ("C++ loop", "torch"):
            rows.append(rounds_row(f"gloo bandwidth {size} B (GB/s)", mine, peer, series(peer, "bw", size, bw), 1e-9,
                                   ">= 0.95"))
    figures = {n: {t: [{str(s): r[s] for s in r} for r in got[n][t]] for t in ("lat", "bw")} for n in ("C++ loop", "torch")}
    noisy = sum(1 for rounds in got["pairperf"].values() for r in rounds for x in r.values()
                if (x.get("host_noise") or {}).get("noisy"))
    figures["pairperf_noisy_cases"] = noisy
    return rows, figures


def main(argv):
    ap = argparse.ArgumentParser(prog="compare-peers", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=["tcp", "ucx", "verbs", "ofi", "gloo", "gpu", "all"], default="all")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--curves", help="also write ucx_perftest's curves over sizes here (pairperf.peer)")
    ap.add_argument("--pairperf", default=os.path.join(ROOT, "build", "pairperf"))
    ap.add_argument("--vm", action="store_true", help="--suite ofi: over verbs;ofi_rxm in the Soft-RoCE VM")
    a = ap.parse_args(argv)
    if not 1 <= a.rounds <= 20 or not 1 <= a.seconds <= 60:
        ap.error("--rounds 1..20 and --seconds 1..60")
    if a.suite == "verbs" or (a.suite == "ofi" and a.vm):
        # The peer runs beside pairperf inside the Soft-RoCE VM: no RDMA device here.
        vm = os.path.join(ROOT, "scripts", "softroce-vm")
        if a.suite == "verbs":
            suite, adds = os.path.join(HERE, "compare_perftest_vm.sh"), []
        else:
            # pairperf dlopen()s libfabric: the VM's packing of ldd closures needs it named.
            libfabric = next(iter(glob.glob("/usr/lib/*/libfabric.so.1")), "/usr/lib/x86_64-linux-gnu/libfabric.so.1")
            suite = os.path.join(HERE, "compare_fi_pingpong_vm.sh")
            adds = ["--add", shutil.which("fi_pingpong") or "/usr/bin/fi_pingpong", "--add", libfabric]
        return subprocess.run([vm, "--timeout", "900", "--add", a.pairperf, "--add", os.path.join(HERE, "vm_lib.sh")] + adds +
                              ["--", suite, os.path.abspath(a.pairperf), str(max(a.rounds, 3))]).returncode
    if a.suite == "gpu":
        return compare_gpu(a)
    if a.suite == "gloo":
        why = gloo_unavailable(a)
        if why:
            print(f"compare-peers: the gloo suite cannot run here: {why}", file=sys.stderr)
            return 2
        rows, figures = compare_gloo(a)
        print_rows(a, rows, {"suite": "gloo", "rounds": a.rounds, "gloo": figures})
        print(f"pairperf's gloo cases flagged noisy (host): {figures['pairperf_noisy_cases']} of "
              f"{2 * len(GLOO_SIZES) * a.rounds}")
        return 0
    tools = {"tcp": ["iperf3", "sockperf"], "ucx": ["ucx_perftest"], "ofi": ["fi_pingpong"],
             "all": ["iperf3", "sockperf", "ucx_perftest", "fi_pingpong"]}[a.suite]
    for tool in tools:
        if shutil.which(tool) is None:
            print(f"compare-peers: {tool} is not installed (scripts/setup installs it)", file=sys.stderr)
            return 2
    if not os.access(a.pairperf, os.X_OK):
        print(f"compare-peers: no pairperf binary at {a.pairperf} (run scripts/setup)", file=sys.stderr)
        return 2

    rows, report = [], {"suite": a.suite, "rounds": a.rounds}
    if a.suite in ("tcp", "all"):
        tcp_rows, tcp_figures = compare_tcp(a)
        rows += tcp_rows
        report["tcp"] = tcp_figures
    if a.suite in ("ucx", "all"):
        ucx_rows, ucx_figures = compare_ucx(a)
        rows += ucx_rows
        report["ucx"] = ucx_figures
    if a.suite in ("ofi", "all"):
        ofi_rows, ofi_figures = compare_ofi(a)
        rows += ofi_rows
        report["ofi"] = ofi_figures
    if a.suite == "all":
        micro_rows, micro_figures = compare_sample_cost(a)
        rows += micro_rows
        report["sample_cost"] = micro_figures
    print_rows(a, rows, report)
    if a.curves:
        write_curves(a.curves)
    return 0


def micro_binary(a):
    """pairperf_micro, built beside the pairperf binary under test."""
    return os.path.join(os.path.dirname(os.path.abspath(a.pairperf)), "pairperf_micro")


def compare_sample_cost(a):
    """What the ping-pong loop adds per round trip (one clock read and one record) against its
    floor, the counter instruction alone, from pairperf_micro in one run."""
    micro = micro_binary(a)
    if not os.access(micro, os.X_OK):
        print(f"compare-peers: no pairperf_micro beside {a.pairperf}: the sample-cost row is left out", file=sys.stderr)
        return [], {}
    print("sample cost: pairperf_micro ...", file=sys.stderr, flush=True)
    p = run([micro, "--benchmark_filter=BM_time_and_record_sample|BM_rdtsc_instruction|BM_steady_clock_read",
             f"--benchmark_repetitions={a.rounds}", "--benchmark_report_aggregates_only=true",
             "--benchmark_format=json"], timeout=300)
    # One repetition (--rounds 1) reports no aggregates: its single figure is then the median.
    medians = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("aggregate_name") == "median" or (b.get("run_type") == "iteration" and b["run_name"] not in medians):
            medians[b["run_name"]] = b["cpu_time"]
    sample = medians["BM_time_and_record_sample"]
    floor = medians.get("BM_rdtsc_instruction", medians["BM_steady_clock_read"])
    peer = "rdtsc" if "BM_rdtsc_instruction" in medians else "clock"
    # The ratio column holds ratios: the row judges what the loop adds to its floor (<= 5%); the
    # issue's absolute 8 ns is printed beside it, and holds only where the instruction allows.
    print(f"sample cost: {sample:.2f} ns a sample ({'meets' if sample <= 8.0 else 'misses'} the absolute 8 ns), "
          f"{peer} alone {floor:.2f} ns, steady clock {medians['BM_steady_clock_read']:.2f} ns", file=sys.stderr)
    return ([Row("timing + recording one sample (ns)", sample, peer, floor, sample / floor, "<= 1.05", sample / floor <= 1.05)],
            {"sample_ns": sample, "floor_ns": floor, "floor": peer, "steady_clock_ns": medians["BM_steady_clock_read"],
             "meets_8ns": sample <= 8.0})


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


GPU_SIZES = [1 << 20, 16 << 20, 64 << 20]
GPU_FAST_TLS = "cuda_ipc,cuda_copy,tcp"
GPU_FALLBACK_TLS = "cuda_copy,tcp"


def gpu_unavailable(binary):
    """Why the gpu suite cannot run with this pairperf and the UCX it loads ("" when it can)."""
    info = json.loads(run([binary, "info", "--json"], timeout=60).stdout)
    cuda = info["memory_types"].get("cuda", "this pairperf was built without the CUDA allocator")
    if cuda != "available":
        return f"cuda memory: {cuda}"
    ucx = info["tool"]["libraries"].get("ucx")
    if ucx is None:
        return "this pairperf was built without UCX"
    if "cuda_copy" not in ucx["transports"]:
        return ucx.get("cuda", {}).get("why_not", "UCX offers no cuda_copy")
    if "cuda_ipc" not in ucx["transports"]:
        return f"UCX offers cuda_copy but not cuda_ipc (transports: {', '.join(ucx['transports'])})"
    return ""


def memcpy_d2d(micro, seconds):
    """cudaMemcpy device to device per size, bytes per second, from pairperf_micro."""
    p = run([micro, "--benchmark_filter=BM_cudaMemcpy_D2D", "--benchmark_format=json",
             f"--benchmark_min_time={seconds}"], timeout=300)
    out = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("error_occurred"):
            raise RuntimeError(f"pairperf_micro {b['name']}: {b.get('error_message')}")
        out[int(b["name"].split("/")[1])] = b["bytes_per_second"]
    return out


def gpu_row_text(r):
    path = r.get("gpu_path", {})
    prov = r.get("provenance", {})
    lanes = ", ".join(f"{l['transport']}/{l['device']}" for l in prov.get("lanes", [])) or "?"
    return f"{path.get('verdict', '?')} ({path.get('why', '')}); lanes: {lanes}; protocol: {prov.get('protocol', '?')}"


def compare_gpu(a):
    micro = micro_binary(a)
    for tool, path in (("ucx_perftest", shutil.which("ucx_perftest")), ("pairperf_micro", micro if os.access(micro, os.X_OK) else None)):
        if path is None:
            print(f"compare-peers: {tool} not found (scripts/setup builds pairperf_micro; ucx_perftest comes with the CUDA UCX)", file=sys.stderr)
            return 2
    why = gpu_unavailable(a.pairperf)
    if why:
        print(f"compare-peers: the gpu suite cannot run here: {why}", file=sys.stderr)
        return 3
    fast = {s: [] for s in GPU_SIZES}
    memcpy = {s: [] for s in GPU_SIZES}
    perftest = {s: [] for s in GPU_SIZES}
    fallback, verdicts = [], {}
    lat_pp, lat_up = [], []
    pin = latency_pinning()
    iters = {1 << 20: 2000, 16 << 20: 500, 64 << 20: 200}
    for i in range(a.rounds):
        print(f"gpu: round {i + 1}/{a.rounds} ...", file=sys.stderr, flush=True)

        def pp_fast():
            for s in GPU_SIZES:
                r = pairperf_ucx(a.pairperf, "tag_bw", str(s), iters[s], iters[s] // 10, [GPU_FAST_TLS], extra=["--mem", "cuda,cuda"])[0]
                fast[s].append(r["bandwidth_Bps"]["receiver"])
                verdicts[f"{GPU_FAST_TLS} {s >> 20} MiB"] = gpu_row_text(r)

        def peers():
            for s, bps in memcpy_d2d(micro, 0.5).items():
                if s in memcpy:
                    memcpy[s].append(bps)
            for s in GPU_SIZES:
                perftest[s].append(ucx_perftest("tag_bw", s, iters[s], iters[s] // 10, GPU_FAST_TLS, mem="cuda,cuda")["bandwidth_Bps"])

        def pp_fallback():
            r = pairperf_ucx(a.pairperf, "tag_bw", str(16 << 20), 100, 10, [GPU_FALLBACK_TLS], extra=["--mem", "cuda,cuda"])[0]
            fallback.append(r["bandwidth_Bps"]["receiver"])
            verdicts[f"{GPU_FALLBACK_TLS} 16 MiB"] = gpu_row_text(r)

        def pp_lat():
            extra = ["--mem", "cuda,cuda"] + (["--cpu", f"{pin[0]},{pin[1]}"] if pin else [])
            lat_pp.append(pairperf_ucx(a.pairperf, "tag_lat", "8", 20000, 2000, [GPU_FAST_TLS], extra=extra)[0]["latency_s"]["p50"])

        def up_lat():
            lat_up.append(ucx_perftest("tag_lat", 8, 20000, 2000, GPU_FAST_TLS, mem="cuda,cuda", pin=pin)["p50_s"])

        # Alternate which tool goes first, so drift of the machine hits both alike.
        for step in ([pp_fast, peers, pp_lat, up_lat, pp_fallback] if i % 2 == 0 else [peers, pp_fast, up_lat, pp_lat, pp_fallback]):
            step()
    rows = []
    for s in GPU_SIZES:
        rows.append(rounds_row(f"cuda_ipc tag_bw {s >> 20} MiB (GB/s)", fast[s], "memcpyD2D", memcpy[s], 1e-9, ">= 0.90"))
    # The same UCX protocol through ucx_perftest: where both sit below cudaMemcpy, the gap is UCX's
    # (its rendezvous per message), not pairperf's.
    for s in GPU_SIZES:
        rows.append(rounds_row(f"cuda_ipc tag_bw {s >> 20} MiB (GB/s)", fast[s], "perftest", perftest[s], 1e-9, ">= 0.97"))
    rows.append(rounds_row("cuda,cuda tag_lat 8 B p50 (us)", lat_pp, "perftest", lat_up, 1e6, "<= 1.03"))
    rows.append(rounds_row(f"{GPU_FALLBACK_TLS} vs cuda_ipc 16 MiB (GB/s)", fallback, "cuda_ipc", fast[16 << 20], 1e-9, "< 1"))
    print("\npath verdicts (pairperf's gpu_path for each TLS set):")
    for k, v in verdicts.items():
        print(f"  UCX_TLS={k}: {v}")
    report = {"suite": "gpu", "rounds": a.rounds, "gpu": {"tag_bw_Bps": {str(s): fast[s] for s in GPU_SIZES},
                                         "memcpy_d2d_Bps": {str(s): memcpy[s] for s in GPU_SIZES},
                                         "ucx_perftest_Bps": {str(s): perftest[s] for s in GPU_SIZES}, "fallback_16M_Bps": fallback,
                                         "tag_lat_8_p50_s": {"pairperf": lat_pp, "ucx_perftest": lat_up},
                                         "verdicts": verdicts}}
    print_rows(a, rows, report, where="on one GPU, two processes")
    return 0


def write_curves(path):
    """ucx_perftest over sizes, per TLS set: the peer curves for `pairperf report`."""
    if shutil.which("ucx_perftest") is None:
        print("compare-peers: --curves needs ucx_perftest", file=sys.stderr)
        return
    sizes = [8, 64, 512, 4096, 32768, 262144, 1 << 20]
    series = []
    for tls in UCX_TLS_SETS:
        print(f"curves: ucx_perftest {tls} ...", file=sys.stderr, flush=True)
        bw = [{"size_bytes": s, "bandwidth_Bps": ucx_perftest("tag_bw", s, 2000, 200, tls)["bandwidth_Bps"]} for s in sizes]
        lat = [{"size_bytes": s, "latency_p50_s": ucx_perftest("tag_lat", s, 20000, 2000, tls)["p50_s"]} for s in sizes]
        series.append({"transport": "ucx", "test": "tag_bw", "tls": tls, "points": bw})
        series.append({"transport": "ucx", "test": "tag_lat", "tls": tls, "points": lat})
    with open(path, "w") as f:
        json.dump({"schema": "pairperf.peer", "schema_version": "1.0.0", "tool": "ucx_perftest", "series": series}, f, indent=2)
    print(f"curves: {path}", file=sys.stderr)


def compare_tcp(a):
    samples = {k: [] for k in ("pp_bw", "iperf3_bw", "pp_lat14_p50", "pp_lat14_avg", "sp_p50", "sp_avg", "pp_lat8_p50")}
    # Both tools pinned alike (client on the first CPU, server on the second), and which goes
    # first alternates: on a small VM where the two processes and the loopback's softirq land moves
    # a TCP stream by a factor of three (2 to 7 GB/s between runs of one binary).
    pin = latency_pinning()

    def pp_bw():
        samples["pp_bw"].append(pairperf(a.pairperf, "tcp_bw", "1M", a.seconds, pin)["bandwidth_Bps"]["receiver"])

    def peer_bw():
        samples["iperf3_bw"].append(iperf3_bw(a.seconds, pin))

    def pp_lat():
        lat = pairperf(a.pairperf, "tcp_lat", 14, a.seconds, pin)["latency_s"]
        samples["pp_lat14_p50"].append(lat["p50"])
        samples["pp_lat14_avg"].append(lat["avg"])
        samples["pp_lat8_p50"].append(pairperf(a.pairperf, "tcp_lat", 8, a.seconds, pin)["latency_s"]["p50"])

    def peer_lat():
        sp = sockperf_lat(a.seconds, 14, pin)
        samples["sp_p50"].append(sp["p50"])
        samples["sp_avg"].append(sp["avg"])

    for i in range(a.rounds):
        print(f"tcp: round {i + 1}/{a.rounds} ...", file=sys.stderr, flush=True)
        for step in ([pp_bw, peer_bw, pp_lat, peer_lat] if i % 2 == 0 else [peer_bw, pp_bw, peer_lat, pp_lat]):
            step()

    med = {k: statistics.median(v) for k, v in samples.items()}
    rows = [
        rounds_row("tcp bandwidth 1 MiB (GB/s)", samples["pp_bw"], "iperf3", samples["iperf3_bw"], 1e-9, ">= 1.0"),
        rounds_row("tcp one-way latency 14 B p50 (us)", samples["pp_lat14_p50"], "sockperf", samples["sp_p50"], 1e6,
                   "<= 1.05"),
        rounds_row("tcp one-way latency 14 B avg (us)", samples["pp_lat14_avg"], "sockperf", samples["sp_avg"], 1e6,
                   "<= 1.05"),
    ]
    print(f"tcp: pairperf tcp_lat 8 B p50 {med['pp_lat8_p50'] * 1e6:.3f} us (sockperf cannot send 8 B)", file=sys.stderr)
    return rows, {"samples": samples, "median": med}
