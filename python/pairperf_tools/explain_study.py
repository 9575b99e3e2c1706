"""`pairperf explain` measured on real logs: the corpus in tests/fixtures/explain/real, each case a
folder with the log(s) copied from a public issue thread and case.json with the cause that the
thread established (its address, the library and versions, the cause class, network or not, the
fix).

The corpus is split once, by the thread's address, not by choice: a case whose address hashes to
0 mod 3 (SHA-256, first 8 hex digits) is held out. Tuning reads the tuning part only (--cases
lists its cases; the held-out part is shown as counts unless --show-held-out, which a tuning
session must not use).

For every case it runs `pairperf explain --json -` over the case's logs and sorts the answer:
  failure cases   right class, wrong class, network blamed wrongly (a non-network cause given a
                  network class), read as healthy (exit 0), unexplained (exit 4, or only
                  consequences: class `undetermined`), not in the log (exit 0 on a case whose
                  case.json says log_shows: nothing: no line reports anything wrong, which was
                  labelled from the lines alone before explain read them), error (exit 1, 2
                  or a crash)
  healthy cases   quiet (exit 0), flagged (exit 3), inconclusive (exit 4), error
and prints the counts per part, with the rate of right classes among the network-caused failures.

A network-caused case may carry `evidence`, judged blind (from its logs alone, before and apart from
any explain output) by the rule in docs/commands/explain.md: `cause` (a line decides the labelled
class: an errno toward an address wrong on its face, a DNS error, EADDRINUSE, an RDMA status, a
missing interface, NET/Socket where IB was plainly wanted), `consequence` (only what several causes
produce: a timeout, a reset, "unhandled system error", a bare traceback) or `nothing`. The table
then says how many of the network-caused failures a reader could decide at all, and how many
explain decided among them and among the rest.

--floor FILE holds the tuning part to what it reached (right at least, the failure modes at
most): exit 3 when it falls below, 0 when it holds, 2 for bad input (a case.json that is not
valid names its problem)."""
import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
CORPUS = os.path.join(ROOT, "tests", "fixtures", "explain", "real")
NETWORK = {"interface", "name_resolution", "loopback", "port", "rdma", "fallback", "link"}
OTHER = {"shm", "container", "version", "peer_died", "oom", "cuda", "config", "bug"}
FAILURE_OUTCOMES = ["right", "wrong class", "network blamed wrongly", "read as healthy",
                    "unexplained", "not in the log", "error"]
HEALTHY_OUTCOMES = ["quiet", "flagged", "inconclusive", "error"]
FLOOR_KEYS = {"right": "min", "network right": "min", "wrong class": "max",
              "network blamed wrongly": "max", "read as healthy": "max", "unexplained": "max",
              "error": "max", "flagged": "max"}
EXPLAIN_TIMEOUT_S = 60


class CorpusError(Exception):
    pass


def part_of(source):
    """held-out or tuning, from the thread's address without its #fragment."""
    address = source.split("#", 1)[0].rstrip("/")
    return "held-out" if int(hashlib.sha256(address.encode()).hexdigest()[:8], 16) % 3 == 0 else "tuning"


def load_case(folder):
    path = os.path.join(folder, "case.json")
    try:
        with open(path) as f:
            case = json.load(f)
    except (OSError, ValueError) as e:
        raise CorpusError(f"{path}: {e}")
    for key in ("source", "library", "class", "network", "cause", "fix", "logs"):
        if key not in case:
            raise CorpusError(f"{path}: '{key}' is missing")
    cls = case["class"]
    if cls != "healthy" and cls not in NETWORK | OTHER:
        raise CorpusError(f"{path}: class '{cls}' is not healthy or one of {sorted(NETWORK | OTHER)}")
    if case["network"] != (cls in NETWORK):
        raise CorpusError(f"{path}: network {case['network']} does not fit class '{cls}'")
    if cls != "healthy" and case.get("log_shows") not in ("failure", "nothing"):
        raise CorpusError(f"{path}: 'log_shows' must be 'failure' or 'nothing' for a failure case")
    if case.get("evidence") not in (None, "cause", "consequence", "nothing") or (
            "evidence" in case and not case["network"]):
        raise CorpusError(f"{path}: 'evidence' is cause, consequence or nothing, on a network-caused case")
    if not case["logs"]:
        raise CorpusError(f"{path}: no logs")
    for log in case["logs"]:
        if not os.path.isfile(os.path.join(folder, log)):
            raise CorpusError(f"{path}: log {log} is not in the folder")
    case["id"] = os.path.basename(folder)
    case["folder"] = folder
    case["part"] = part_of(case["source"])
    return case


def load_corpus(corpus):
    if not os.path.isdir(corpus):
        raise CorpusError(f"{corpus}: not a folder")
    cases = [load_case(os.path.join(corpus, d)) for d in sorted(os.listdir(corpus))
             if os.path.isdir(os.path.join(corpus, d))]
    if not cases:
        raise CorpusError(f"{corpus}: no cases")
    return cases


def run_explain(pairperf, case, catalog):
    argv = [pairperf, "explain", "--json", "-"]
    if catalog:
        argv += ["--catalog", catalog]
    argv += [os.path.join(case["folder"], log) for log in case["logs"]]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=EXPLAIN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"exit": None, "verdict": None, "why": f"ran past {EXPLAIN_TIMEOUT_S} s"}
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        return {"exit": r.returncode, "verdict": None, "why": r.stderr.strip()[-300:]}
    return {"exit": r.returncode, "verdict": doc.get("verdict"), "doc": doc,
            "unexplained": [u["text"] for u in doc.get("unexplained", [])][:3]}


def judge(case, answer):
    code, verdict = answer["exit"], answer["verdict"]
    if case["class"] == "healthy":
        return {0: "quiet", 3: "flagged", 4: "inconclusive"}.get(code, "error")
    if code not in (0, 3, 4):
        return "error"
    if code == 0:
        # No line of these logs reports anything wrong (labelled before any tool read them):
        # only the thread knew. Counted apart, never as a right answer.
        return "not in the log" if case["log_shows"] == "nothing" else "read as healthy"
    got = verdict["class"] if verdict else None
    if got is None or got == "undetermined":
        return "unexplained"
    if got == case["class"]:
        return "right"
    if not case["network"] and got in NETWORK:
        return "network blamed wrongly"
    return "wrong class"


def tally(results):
    parts = {}
    for part in ("tuning", "held-out"):
        rows = [r for r in results if r["part"] == part]
        c = collections.Counter(r["outcome"] for r in rows)
        net = [r for r in rows if r["network"]]
        c["failures"] = sum(1 for r in rows if r["class"] != "healthy")
        c["healthy"] = sum(1 for r in rows if r["class"] == "healthy")
        c["network failures"] = len(net)
        c["network right"] = sum(1 for r in net if r["outcome"] == "right")
        shown = [r for r in net if r["outcome"] != "not in the log"]
        c["network failures in the log"] = len(shown)
        for kind in ("cause", "consequence"):
            judged = [r for r in net if r.get("evidence") == kind]
            c[f"network, logs show the {kind}"] = len(judged)
            c[f"network, logs show the {kind}, right"] = sum(1 for r in judged if r["outcome"] == "right")
        c["non-network failures"] = c["failures"] - len(net)
        parts[part] = dict(c)
    return parts


def print_table(parts, out):
    print(f"{'':34}" + "".join(f"{p:>10}" for p in parts), file=out)
    for key in ["failures", "network failures", "non-network failures"] + FAILURE_OUTCOMES:
        print(f"  {key:32}" + "".join(f"{parts[p].get(key, 0):>10}" for p in parts), file=out)
    rates = []
    for p in parts:
        n = parts[p].get("network failures", 0)
        rates.append(f"{parts[p].get('network right', 0)}/{n}" + (f" {100 * parts[p].get('network right', 0) / n:.0f}%" if n else ""))
    print(f"  {'network-caused, right class':32}" + "".join(f"{r:>10}" for r in rates), file=out)
    shown = []
    for p in parts:
        n = parts[p].get("network failures in the log", 0)
        shown.append(f"{parts[p].get('network right', 0)}/{n}" + (f" {100 * parts[p].get('network right', 0) / n:.0f}%" if n else ""))
    print(f"  {'... of those their logs show':32}" + "".join(f"{r:>10}" for r in shown), file=out)
    for kind, label in (("cause", "... logs show the cause (blind)"), ("consequence", "... only consequences (blind)")):
        row = []
        for p in parts:
            n = parts[p].get(f"network, logs show the {kind}", 0)
            k = parts[p].get(f"network, logs show the {kind}, right", 0)
            row.append(f"{k}/{n}" + (f" {100 * k / n:.0f}%" if n else ""))
        print(f"  {label:32}" + "".join(f"{r:>10}" for r in row), file=out)
    print(f"  {'healthy logs':32}" + "".join(f"{parts[p].get('healthy', 0):>10}" for p in parts), file=out)
    for key in HEALTHY_OUTCOMES:
        print(f"  {'healthy: ' + key:32}" + "".join(f"{parts[p].get(key, 0):>10}" for p in parts), file=out)


def check_floor(tuning, floor):
    misses = []
    for key, how in FLOOR_KEYS.items():
        if key not in floor:
            continue
        got = tuning.get(key, 0)
        if (how == "min" and got < floor[key]) or (how == "max" and got > floor[key]):
            misses.append(f"{key}: {got}, the floor says {'at least' if how == 'min' else 'at most'} {floor[key]}")
    return misses


def study(pairperf, cases, catalog=None):
    """Runs explain over every case: (the rows of --json, the documents explain wrote)."""
    results, docs = [], []
    for case in cases:
        answer = run_explain(pairperf, case, catalog)
        docs.append(answer.get("doc"))
        results.append({"id": case["id"], "part": case["part"], "class": case["class"],
                        "network": case["network"], "evidence": case.get("evidence"),
                        "library": case["library"], "source": case["source"],
                        "exit": answer["exit"], "verdict": answer["verdict"],
                        "outcome": judge(case, answer), "unexplained": answer.get("unexplained", []),
                        "why": answer.get("why", "")})
    return results, docs


def main(argv):
    ap = argparse.ArgumentParser(prog="explain-study", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--pairperf", default=os.path.join(ROOT, "build", "pairperf"))
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--catalog", help="explain's --catalog (default: the one pairperf finds)")
    ap.add_argument("--cases", action="store_true", help="one line per tuning case")
    ap.add_argument("--show-held-out", action="store_true", help="also list the held-out cases")
    ap.add_argument("--tuning-only", action="store_true",
                    help="count the tuning part only (while tuning: the held-out counts stay unseen)")
    ap.add_argument("--floor", help="JSON of the tuning part's floor: exit 3 below it")
    ap.add_argument("--json", help="write every case's answer and the counts here (with --tuning-only, the tuning part's)")
    a = ap.parse_args(argv)
    try:
        cases = load_corpus(a.corpus)
        floor = None
        if a.floor:
            with open(a.floor) as f:
                floor = json.load(f)
    except (CorpusError, OSError, ValueError) as e:
        print(f"explain-study: {e}", file=sys.stderr)
        return 2
    if not os.access(a.pairperf, os.X_OK):
        print(f"explain-study: {a.pairperf} is not an executable pairperf (--pairperf)", file=sys.stderr)
        return 2
    results, _ = study(a.pairperf, cases, a.catalog)
    parts = tally(results)
    print(f"explain-study: {len(cases)} cases in {a.corpus}")
    print_table({"tuning": parts["tuning"]} if a.tuning_only else parts, sys.stdout)
    if a.cases or a.show_held_out:
        for r in results:
            if r["part"] == "held-out" and not a.show_held_out:
                continue
            got = r["verdict"]["class"] if r["verdict"] else "-"
            print(f"  [{r['part']}] {r['id']}: {r['class']} -> {got} (exit {r['exit']}): {r['outcome']}"
                  + (f"; unexplained: {r['unexplained'][0][:100]}" if r["outcome"] == "unexplained" and r["unexplained"] else "")
                  + (f"; {r['why']}" if r["why"] else ""))
    if a.json:
        # --tuning-only keeps the held-out part unseen in the file too (its cases and its counts).
        shown = [r for r in results if r["part"] != "held-out"] if a.tuning_only else results
        counts = {"tuning": parts["tuning"]} if a.tuning_only else parts
        with open(a.json, "w") as f:
            json.dump({"cases": shown, "counts": counts}, f, indent=1)
    if floor is not None:
        misses = check_floor(parts["tuning"], floor)
        for m in misses:
            print(f"explain-study: below the floor: {m}")
        return 3 if misses else 0
    return 0
