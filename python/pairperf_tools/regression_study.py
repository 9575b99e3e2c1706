"""The regression check measured as a nightly CI job uses it: separate runs of one build, compared
with a baseline of earlier runs by `pairperf compare`, and the series read by `pairperf history`.

Two network namespaces joined by a veth link; the client's end sends through a token bucket (tc
tbf) whose rate is the path's bottleneck, as a NIC's or a switch port's is:

  A/A        --runs runs at --rate; for each baseline size k (--baseline 5,10), from the k'th
             run on, each run (m = 1) and each two consecutive runs (m = 2, a night of two short
             runs) compared with the k runs before them (a sliding baseline, as a nightly job
             keeps): an exit 3 is a false alarm.
  slowdown   --slowed runs at --rate x (1 - --slowdown); each run (m = 1) and each two
             consecutive ones (m = 2) compared with the last k A/A runs: caught when exit 3
             names the bandwidth's regression.
  history    `pairperf history` over the A/A runs and the slowed ones: the step must be found at
             the first slowed run.
  unshaped   --unshaped runs with no rate limit: each after the --baseline'th compared with the
             --baseline before it. Runs that vary more than the threshold allows must be
             inconclusive (exit 4), never "no change" (exit 0).
  loopback   the nightly jobs of the issue that asked for runs as the unit, --loopback runs each,
             on loopback with pairperf's own local server and no shaping (this VM's TCP swings
             between two modes by itself): `run -t tcp --test tcp_lat,tcp_bw` and `run -t ucx
             --tls posix,sysv,cma --test tag_lat,tag_bw`, --sizes 8,1M --repeat 10 -d 0.2s; judged
             as the A/A runs are.

  loaded     --loaded runs of each of two same-build series while another tenant's CPU load (one
             busy process, as a co-located job's would be) is present during every other run:
             through the bottleneck (the link limits the bandwidth) and the loopback tcp job (the
             CPUs limit it); then --loaded / 3 runs slowed by --slowdown with the load present in
             each, compared with the last k loaded-series runs. A/A comparisons must never be a
             regression (a difference the measured waits explain is inconclusive, with the
             reason); a slowdown is caught where the waits cannot explain it.

Needs root (namespaces, tc). Every process it starts is ended by PID; the namespaces are deleted
at the end. Prints the counts and writes them with every exit code to --json; --judge-only judges
the runs of an earlier study again (after a change to the method)."""
import argparse
import json
import os
import select
import subprocess
import sys
import time

from . import netns
from .processes import stop

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
CLIENT_IP, SERVER_IP = "10.93.0.1", "10.93.0.2"
BW_KEY = "tcp tcp_bw stream_uni iface=(route) mem=host,host size=1M"


class Link:
    """Namespaces A (client) and B (server) with a veth link, a pairperf server in B, and a tbf
    qdisc on A's end whose rate set_rate() changes (None: no qdisc)."""

    def __init__(self, pairperf, tag):
        self.pairperf, self.tag = pairperf, tag
        self.a, self.b = f"ppsA{tag}", f"ppsB{tag}"
        self.nets = netns.Namespaces()
        self.server = None
        self.port = None
        self.shaped = False

    def __enter__(self):
        try:
            self.nets.add(self.a)
            self.nets.add(self.b)
            self.nets.link((self.a, "v0", CLIENT_IP), (self.b, "v0", SERVER_IP))
            r, w = os.pipe()
            self.server = subprocess.Popen(
                ["ip", "netns", "exec", self.b, self.pairperf, "server", "--listen", SERVER_IP, "--port", "0",
                 "--ready-fd", str(w)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, pass_fds=(w,))
            os.close(w)
            try:
                ready, _, _ = select.select([r], [], [], 10)
                if not ready:
                    raise RuntimeError("the server did not report its port within 10 s")
                self.port = int(os.read(r, 64).decode().strip())
            finally:
                os.close(r)
        except Exception:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if self.server is not None:
            stop(self.server)
        self.nets.close()

    def set_rate(self, mbit):
        if mbit is None:
            if self.shaped:
                netns.sh("tc", "-n", self.a, "qdisc", "del", "dev", "v0", "root")
            self.shaped = False
            return
        # burst: at least the rate's bytes per timer tick (1 MB covers 2 Gbit/s at 250 Hz).
        netns.sh("tc", "-n", self.a, "qdisc", "replace", "dev", "v0", "root", "tbf", "rate", f"{mbit}mbit",
                 "burst", "1mb", "latency", "50ms")
        self.shaped = True

    def run(self, out, tests, sizes, repeat, duration):
        """One run, written to `out`; returns pairperf's exit code."""
        args = ["ip", "netns", "exec", self.a, self.pairperf, "run", f"{SERVER_IP}:{self.port}", "-t", "tcp",
                "--test", tests, "--sizes", sizes, "--repeat", str(repeat), "-d", duration, "-q", "--json", out]
        return subprocess.run(args, capture_output=True, text=True, timeout=300).returncode


def pairperf_json(pairperf, args):
    """Runs `pairperf ARGS --json -`; returns (exit code, document)."""
    p = subprocess.run([pairperf] + args + ["--json", "-"], capture_output=True, text=True, timeout=300)
    if p.returncode == 2:
        raise RuntimeError(f"pairperf {' '.join(args)}: {p.stderr.strip()}")
    return p.returncode, json.loads(p.stdout)


def bandwidth_verdict(doc):
    """The 1 MiB bandwidth metric of a comparison: 'regression', 'inconclusive', or what it said."""
    for case in doc["cases"]:
        if case["key"] == BW_KEY:
            for m in case["metrics"]:
                if m["metric"] == "bandwidth":
                    if m["regression"]:
                        return "regression"
                    return "inconclusive" if m["inconclusive"] else ("improvement" if m["improvement"] else "held")
    return "missing"


def compare_with(pairperf, base_files, new_files, folder):
    """`pairperf compare FOLDER NEW...` where FOLDER holds links to base_files (a baseline folder, as a
    nightly job keeps one)."""
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    for f in base_files:
        os.symlink(os.path.abspath(f), os.path.join(folder, os.path.basename(f)))
    rc, doc = pairperf_json(pairperf, ["compare", folder] + new_files)
    m = next((m for c in doc["cases"] if c["key"] == BW_KEY for m in c["metrics"]), None)
    findings = [f"{c['key']} {m['metric']} {m['change']:+.1%}" for c in doc["cases"] for m in c["metrics"]
                if m["regression"]]
    return {"new": [os.path.basename(f) for f in new_files], "exit_code": rc, "bandwidth": bandwidth_verdict(doc),
            "regressions": findings,
            "bandwidth_change": m["change"] if m else None,
            "bandwidth_spread": m["run_spread"] if m else None,
            "bandwidth_mde": m["min_detectable_change"] if m else None,
            "bandwidth_note": m.get("note", "") if m else ""}


class Hog:
    """Another tenant's CPU load: one busy process (bounded by `timeout`), ended by its PID."""

    def __init__(self, on):
        self.on, self.proc = on, None

    def __enter__(self):
        if self.on:
            self.proc = subprocess.Popen(["timeout", "600", "sh", "-c", "while :; do :; done"])
            time.sleep(0.3)  # running before the measurement starts
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            stop(self.proc)


def loaded_runs(link, pairperf, out, count, rate, slowdown, log):
    """The loaded part: a shaped series and a loopback tcp series with the load in every other run
    (file names end in -hog), then count / 3 slowed runs, each loaded."""
    def series(name, count, run, loaded):
        for i in range(count):
            hog = loaded(i)
            f = os.path.join(out, name, f"{name}-{i:02}{'-hog' if hog else ''}.json")
            os.makedirs(os.path.dirname(f), exist_ok=True)
            with Hog(hog):
                rc = run(f)
            if rc not in (0, 4):
                raise RuntimeError(f"run {f}: exit {rc}")
            log(f"  {name} {i + 1}/{count}{' (loaded)' if hog else ''}")

    link.set_rate(rate)
    series("loaded-aa", count, lambda f: link.run(f, "tcp_lat,tcp_bw", "8,1M", 3, "0.2s"), lambda i: i % 2 == 1)
    link.set_rate(round(rate * (1 - slowdown)))
    series("loaded-slowed", max(2, count // 3), lambda f: link.run(f, "tcp_lat,tcp_bw", "8,1M", 3, "0.2s"),
           lambda i: True)
    link.set_rate(None)
    job = [pairperf, "run"] + LOOPBACK_JOBS["tcp"] + ["--sizes", "8,1M", "--repeat", "10", "-d", "0.2s", "-q"]
    series("loaded-loopback-tcp", count,
           lambda f: subprocess.run(job + ["--json", f], capture_output=True, timeout=600).returncode,
           lambda i: i % 2 == 1)


LOOPBACK_JOBS = {"tcp": ["-t", "tcp", "--test", "tcp_lat,tcp_bw"],
                 "ucx": ["-t", "ucx", "--tls", "posix,sysv,cma", "--test", "tag_lat,tag_bw"]}


def loopback_runs(pairperf, out, count, log):
    """The issue's two nightly jobs, `count` runs each, alternating; {job: [files]}."""
    files = {job: [] for job in LOOPBACK_JOBS}
    for i in range(count):
        for job, args in LOOPBACK_JOBS.items():
            f = os.path.join(out, f"loopback-{job}", f"{job}-{i:02}.json")
            os.makedirs(os.path.dirname(f), exist_ok=True)
            p = subprocess.run([pairperf, "run"] + args + ["--sizes", "8,1M", "--repeat", "10", "-d", "0.2s", "-q",
                                                           "--json", f], capture_output=True, text=True, timeout=600)
            if p.returncode not in (0, 4):
                raise RuntimeError(f"run {f}: exit {p.returncode}: {p.stderr[-500:]}")
            files[job].append(f)
            log(f"  loopback {job} {i + 1}/{count}")
    return files


def study(pairperf, out, runs=30, baselines=(5, 10), slowed=10, unshaped=14, rate=1000, slowdown=0.25,
          tests="tcp_lat,tcp_bw", sizes="8,1M", repeat=3, duration="0.2s", loopback=0, loaded=0, log=print):
    """Makes the runs (in `out`), then judges them (judge()); returns the report (a dict)."""
    os.makedirs(out, exist_ok=True)
    settings = {"runs": runs, "baselines": list(baselines), "slowed": slowed, "unshaped": unshaped,
                "rate_mbit": rate, "slowdown": slowdown, "tests": tests, "sizes": sizes, "repeat": repeat,
                "duration": duration, "loopback": loopback, "loaded": loaded}
    started = time.monotonic()
    with Link(pairperf, os.getpid() % 10000) as link:
        def phase(name, count, mbit):
            link.set_rate(mbit)
            files = []
            for i in range(count):
                f = os.path.join(out, name, f"{name}-{i:02}.json")
                os.makedirs(os.path.dirname(f), exist_ok=True)
                rc = link.run(f, tests, sizes, repeat, duration)
                if rc not in (0, 4):
                    raise RuntimeError(f"run {f}: exit {rc}")
                files.append(f)
                log(f"  {name} {i + 1}/{count} ({mbit or 'unshaped'} Mbit/s)")
            return files

        if runs:
            phase("aa", runs, rate)
        if slowed:
            phase("slowed", slowed, round(rate * (1 - slowdown)))
        if unshaped:
            phase("unshaped", unshaped, None)
        if loaded:
            loaded_runs(link, pairperf, out, loaded, rate, slowdown, log)
    if loopback:
        loopback_runs(pairperf, out, loopback, log)
    report = judge(pairperf, out, baselines)
    report["settings"] = settings
    report["seconds"] = round(time.monotonic() - started, 1)
    return report


def judge(pairperf, out, baselines=(5, 10)):
    """Every comparison of the runs in `out` (made by study()): for each baseline size k and m = 1 or 2
    new runs, the A/A sets with a sliding baseline, the slowed runs against the last k A/A runs; and the
    history over the A/A and slowed runs."""
    def runs_of(name):
        folder = os.path.join(out, name)
        return sorted(os.path.join(folder, f) for f in os.listdir(folder)) if os.path.isdir(folder) else []

    aa, slow = runs_of("aa"), runs_of("slowed")
    same_build = {"shaped": aa, "unshaped": runs_of("unshaped"),
                  **{f"loopback {job}": runs_of(f"loopback-{job}") for job in LOOPBACK_JOBS},
                  "loaded shaped": runs_of("loaded-aa"), "loaded loopback tcp": runs_of("loaded-loopback-tcp")}
    loaded_aa, loaded_slow = runs_of("loaded-aa"), runs_of("loaded-slowed")
    folder = os.path.join(out, "baseline")
    report = {"configurations": []}
    for k in baselines:
        for m in (1, 2):
            conf = {"baseline_runs": k, "new_runs": m, "aa": {}, "slowed": []}
            for name, files in same_build.items():
                conf["aa"][name] = [compare_with(pairperf, files[i - k:i], files[i:i + m], folder)
                                    for i in range(k, len(files) - m + 1)]
            if len(aa) >= k:
                conf["slowed"] = [compare_with(pairperf, aa[-k:], slow[j:j + m], folder)
                                  for j in range(0, len(slow) - m + 1)]
            if len(loaded_aa) >= k:
                conf["loaded_slowed"] = [compare_with(pairperf, loaded_aa[-k:], loaded_slow[j:j + m], folder)
                                         for j in range(0, len(loaded_slow) - m + 1)]
            report["configurations"].append(conf)
    if slow and aa:
        rc, doc = pairperf_json(pairperf, ["history"] + aa + slow)
        series = next((s for s in doc["series"] if s["key"] == BW_KEY and s["metric"] == "bandwidth"), None)
        report["history"] = {"exit_code": rc, "runs": len(doc["runs"]), "first_slowed_run": len(aa),
                             "change_points": series["change_points"] if series else None}
    return report


def summarize(r):
    """The counts docs/commands/compare.md quotes, as lines."""
    def codes(rows):
        out = {}
        for row in rows:
            out[row["exit_code"]] = out.get(row["exit_code"], 0) + 1
        return ", ".join(f"exit {k}: {v}" for k, v in sorted(out.items()))

    s = r.get("settings", {})
    lines = []
    if s:
        lines.append(f"regression study: {s['runs']} A/A runs at {s['rate_mbit']} Mbit/s, {s['slowed']} at "
                     f"{s['rate_mbit'] * (1 - s['slowdown']):.0f} Mbit/s ({s['slowdown']:.0%} slower), {s['unshaped']} "
                     f"unshaped (pairperf run -t tcp --test {s['tests']} --sizes {s['sizes']} --repeat {s['repeat']} "
                     f"-d {s['duration']}); {s['loopback']} runs of each loopback job; {s.get('loaded', 0)} runs of "
                     f"each loaded series (another tenant's load in every other run); {r.get('seconds', '?')} s")
    for conf in r["configurations"]:
        k, m = conf["baseline_runs"], conf["new_runs"]
        rows = [x for v in conf["aa"].values() for x in v]
        alarms = [x for x in rows if x["exit_code"] == 3]
        lines.append(f"baseline {k} runs, {m} new run(s) a comparison: A/A {len(alarms)} false alarm(s) (exit 3) in "
                     f"{len(rows)} comparisons [{codes(rows)}]")
        for name, v in conf["aa"].items():
            if v:
                explained = sum(1 for x in v if "host noise explains" in x.get("bandwidth_note", ""))
                lines.append(f"  {name}: {sum(1 for x in v if x['exit_code'] == 3)} of {len(v)} [{codes(v)}]"
                             + (f"; 1 MiB bandwidth inconclusive as the waits explain it: {explained}"
                                if name.startswith("loaded") else "")
                             + "".join(f"; {', '.join(x['new'])}: {'; '.join(x['regressions'])}"
                                       for x in v if x["exit_code"] == 3))
        for label, slow in (("slowdown", conf["slowed"]), ("loaded slowdown", conf.get("loaded_slowed", []))):
            if slow:
                caught = sum(1 for x in slow if x["exit_code"] == 3 and x["bandwidth"] == "regression")
                changes = [x["bandwidth_change"] for x in slow if x["bandwidth_change"] is not None]
                lines.append(f"  {label}: {caught} of {len(slow)} caught (exit 3, bandwidth regression) "
                             f"[{codes(slow)}]; measured change {min(changes):+.1%} to {max(changes):+.1%}"
                             + "".join(f"; {', '.join(x['new'])}: {x['bandwidth']}: {x['bandwidth_note']}"
                                       for x in slow if x["bandwidth"] != "regression"))
        free = conf["aa"].get("unshaped", [])
        if free:
            said = {}
            for x in free:
                said[x["bandwidth"]] = said.get(x["bandwidth"], 0) + 1
            spreads = [x["bandwidth_spread"] for x in free if x["bandwidth_spread"] is not None]
            lines.append(f"  unshaped 1 MiB bandwidth verdicts {said}"
                         + (f"; runs spread {min(spreads):.1%}-{max(spreads):.1%}" if spreads else ""))
    if "history" in r:
        h = r["history"]
        cps = h["change_points"] or []
        found = ", ".join(f"run {c['run']} ({c['change']:+.1%}, p {c['p_value']:.3g}, {c['verdict']})" for c in cps)
        lines.append(f"history: {h['runs']} runs, first slowed run {h['first_slowed_run']}; 1 MiB bandwidth change "
                     f"points: {found or 'none'}; exit {h['exit_code']}")
    return lines


def main(argv):
    ap = argparse.ArgumentParser(prog="regression-study", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30, help="A/A runs (default 30)")
    ap.add_argument("--baseline", default="5,10", help="baseline sizes to judge with, runs (default 5,10)")
    ap.add_argument("--slowed", type=int, default=10, help="runs with the slowdown (default 10)")
    ap.add_argument("--unshaped", type=int, default=14, help="runs without a rate limit (default 14)")
    ap.add_argument("--judge-only", action="store_true", help="judge the runs already in --out again")
    ap.add_argument("--loopback", type=int, default=24, help="runs of each loopback job (default 24; 0: none)")
    ap.add_argument("--loaded", type=int, default=0,
                    help="runs of each loaded series, another tenant's load in every other one (default 0: none)")
    ap.add_argument("--rate", type=int, default=1000, help="the bottleneck, Mbit/s (default 1000)")
    ap.add_argument("--slowdown", type=float, default=0.25, help="the slowed runs' rate cut (default 0.25)")
    ap.add_argument("--pairperf", default=os.path.join(ROOT, "build", "pairperf"))
    ap.add_argument("--out", default="regression-study", help="folder for the runs (default ./regression-study)")
    ap.add_argument("--json", help="write the report here")
    a = ap.parse_args(argv)
    try:
        baselines = [int(x) for x in a.baseline.split(",")]
    except ValueError:
        baselines = []
    short = [n for n in (a.runs, a.loaded) if 0 < n <= max(baselines or [0])]
    if not baselines or min(baselines) < 2 or short or not 0 < a.slowdown < 1 or a.rate <= 0 or a.runs < 0:
        print("regression-study: needs --baseline sizes >= 2, --runs and --loaded (when not 0) above the largest, "
              "0 < --slowdown < 1, --rate > 0", file=sys.stderr)
        return 2
    if a.judge_only:
        r = judge(a.pairperf, a.out, baselines)
    else:
        why = netns.unavailable(os.getpid() % 10000)
        if why:
            print(f"regression-study: {why}", file=sys.stderr)
            return 4
        r = study(a.pairperf, a.out, a.runs, baselines, a.slowed, a.unshaped, a.rate, a.slowdown,
                  loopback=a.loopback, loaded=a.loaded, log=lambda m: print(m, file=sys.stderr, flush=True))
    for line in summarize(r):
        print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)
    return 0
