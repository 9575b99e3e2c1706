"""Pictures of pairperf results: `pairperf report FILES... --out DIR` calls this script.

Inputs (files or folders of them), told apart by their "schema" field:
  pairperf.result   `pairperf run --json`: bandwidth and latency (p50, p99) vs message size,
                    log-log, one line per transport / test / TLS set / interface / memory pair
  pairperf.peer     `scripts/compare-peers --curves`: the peer tool's curves (dashed) on the same axes
  pairperf.compare  `pairperf compare --json`: before/after bars of every compared metric
  pairperf.history  `pairperf history --json`: each series of run values over time, its change
                    points marked, the newest run's verdict
  pairperf.mesh     `pairperf mesh --json`: bandwidth and latency matrices as heatmaps
  pairperf.doctor   `pairperf doctor --json`: its findings with their severity (a table, no figure)
Writes PNG and SVG of each figure and an index.html that stands alone (report_page.py): the
outcome, both hosts side by side, a sortable table of every case with its lanes, noise and
verdict, the findings, and the figures inlined. Units: bytes, GB/s = 1e9 B/s, microseconds.

Exit codes: 0 pictures written; 1 matplotlib or jsonschema missing; 2 bad input (no file, not JSON,
another schema, a document its schema refuses, nothing to show).
"""
import argparse
import os
import sys

from . import documents, report_page

try:
    import matplotlib
except ImportError:
    sys.exit("pairperf report: needs matplotlib for python3 (Debian: apt-get install python3-matplotlib)")

try:
    import jsonschema  # noqa: F401 (documents.errors checks each input against its schema)
except ImportError:
    sys.exit("pairperf report: needs jsonschema for python3 to check its inputs (Debian: apt-get install "
             "python3-jsonschema)")

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

FIG_SIZE = (8, 5)  # inches, the compare figure (taller with more rows)
PANEL = (5, 3.6)  # inches per panel of the bandwidth and latency grids (up to three a row)
DPI = 100  # PNG pixels = inches x 100


INPUTS = ("pairperf.result", "pairperf.peer", "pairperf.compare", "pairperf.history", "pairperf.mesh",
          "pairperf.doctor")
# Each line of a panel its own marker and dash as well as its colour: the curves stay apart in greyscale.
MARKERS = ("o", "s", "^", "D", "v", "x", "P", "*")
DASHES = ("-", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
HISTORY_PANELS = 24  # series drawn from one history (changed ones first); the JSON has them all


def panel_of(case):
    return f"{case['transport']} {case['test']}"


def line_of(case, panel_has_axis):
    """A curve is one value of each of the case's own axes as the results name them: the
    transport's axis value (case.tls: UCX_TLS for UCX, the provider for libfabric, any
    transport's), the interface, the memory pair. No transport is named here: a panel whose
    cases carry an axis value labels the library's default "default"."""
    parts = [case.get("tls") or "default"] if panel_has_axis else []
    parts.append(case.get("iface") or "routed")
    mem = case.get("memory", ["host", "host"])
    if mem != ["host", "host"]:
        parts.append(",".join(mem))
    return " ".join(parts)


def measured(r):
    """Whether a case's figures are drawn: it ended ok, or it measured and then missed an --expect
    (the figure is sound; the table shows the verdict). Corrupt bytes void the figure."""
    if r.get("status") == "ok":
        return True
    v = r.get("validation") or {}
    return r.get("status") == "fail" and bool(r.get("verdict")) and not v.get("corrupt_bytes")


def collect(results_docs):
    """{panel: {line: [(size, result)]}} for streams and for ping-pongs, over every results file
    (the measured cases)."""
    streams, pingpongs = {}, {}
    ok = [r for _, doc in results_docs for r in doc.get("results", []) if measured(r)]
    with_axis = {panel_of(r["case"]) for r in ok if r["case"].get("tls")}
    for r in ok:
        case = r["case"]
        panel = panel_of(case)
        target = pingpongs if case["pattern"] == "pingpong" else streams
        target.setdefault(panel, {}).setdefault(line_of(case, panel in with_axis), []).append((case["size_bytes"], r))
    for d in (streams, pingpongs):
        for panel in d.values():
            for line in panel.values():
                line.sort(key=lambda x: x[0])
    return streams, pingpongs


def grid(n):
    """Panels in rows of up to three; figure size grows with them."""
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL[0] * cols, PANEL[1] * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def style_axes(ax, ylabel, title):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(report_page.size_text))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    ax.legend(fontsize=7, loc="best")


def below_title(fig):
    """Lays the panels out under the figure's title (tight_layout alone lets them overlap it)."""
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_size_inches()[1]))


def save(fig, out, name, written, title, alt):
    """Writes the figure as PNG and SVG; returns what the page needs of it."""
    for ext in ("png", "svg"):
        path = os.path.join(out, f"{name}.{ext}")
        fig.savefig(path, dpi=DPI)
        written.append(path)
    plt.close(fig)
    return {"name": name, "title": title, "alt": alt}


def panels_alt(what, panels):
    """Alt text of a grid: what it plots, then each panel with its lines."""
    return f"{what}. " + "; ".join(f"panel {p}: {len(lines)} line{'s' if len(lines) > 1 else ''} ({', '.join(lines)})"
                                   for p, lines in sorted(panels.items()))


def peer_curves(peer_docs, panel, metric):
    """The peer tool's points for this panel (same transport and test)."""
    for _, doc in peer_docs:
        for s in doc.get("series", []):
            if f"{s.get('transport', '')} {s.get('test', '')}" != panel:
                continue
            pts = sorted((p["size_bytes"], p[metric]) for p in s.get("points", []) if p.get(metric) is not None)
            if pts:
                yield f"{doc.get('tool', 'peer')} tls={s.get('tls') or 'default'}", pts


def peer_color(ax, label):
    """The color of pairperf's line with the same TLS set, so the two curves read as a pair."""
    tls = label.split(" ", 1)[1] if " " in label else label
    for line in ax.get_lines():
        if line.get_label().startswith(tls + " ") and line.get_linestyle() == "-":
            return line.get_color()
    return "black"


def plot_bandwidth(streams, peer_docs, out, written):
    if not streams:
        return None
    fig, axes = grid(len(streams))
    for ax, (panel, lines) in zip(axes, sorted(streams.items())):
        for i, (label, pts) in enumerate(lines.items()):
            good = [(s, b) for s, b in ((s, report_page.bandwidth_of(r)) for s, r in pts) if b]
            ax.plot([s for s, _ in good], [b / 1e9 for _, b in good], marker=MARKERS[i % len(MARKERS)], markersize=3,
                    linestyle=DASHES[i % len(DASHES)], linewidth=1.4, label=label)
        for label, pts in peer_curves(peer_docs, panel, "bandwidth_Bps"):
            ax.plot([p[0] for p in pts], [p[1] / 1e9 for p in pts], linestyle="--", color=peer_color(ax, label),
                    linewidth=1.1, label=label)
        style_axes(ax, "bandwidth (GB/s = 1e9 B/s)", panel)
    title = ("Bandwidth vs message size (receiver's figure; the sender's where only it exists; "
             "dashed: the peer tool)")
    fig.suptitle(title)
    below_title(fig)
    return save(fig, out, "bandwidth", written, title,
                panels_alt("Bandwidth in GB/s against message size, log-log, one panel per transport and test",
                           streams))


def plot_latency(pingpongs, peer_docs, out, written):
    if not pingpongs:
        return None
    fig, axes = grid(len(pingpongs))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (panel, lines) in zip(axes, sorted(pingpongs.items())):
        for i, (label, pts) in enumerate(lines.items()):
            c = colors[i % len(colors)]
            good = [(s, r["latency_s"]) for s, r in pts if r.get("latency_s")]
            xs = [s for s, _ in good]
            ax.plot(xs, [l["p50"] * 1e6 for _, l in good], color=c, marker=MARKERS[i % len(MARKERS)], markersize=3,
                    linewidth=1.4, label=f"{label} p50")
            ax.plot(xs, [l["p99"] * 1e6 for _, l in good], color=c, linestyle=":", linewidth=1.2, label=f"{label} p99")
        for label, pts in peer_curves(peer_docs, panel, "latency_p50_s"):
            ax.plot([p[0] for p in pts], [p[1] * 1e6 for p in pts], linestyle="--", color=peer_color(ax, label),
                    linewidth=1.1, label=f"{label} p50")
        style_axes(ax, "one-way latency (µs)", panel)
    title = "One-way latency vs message size: p50 (solid) and p99 (dotted); dashed: the peer tool's p50"
    fig.suptitle(title)
    below_title(fig)
    return save(fig, out, "latency", written, title,
                panels_alt("One-way latency in microseconds (p50 and p99) against message size, log-log, one panel "
                           "per transport and test", pingpongs))


def plot_compare(compare_docs, out, written):
    rows = []
    for _, doc in compare_docs:
        for c in doc.get("cases", []):
            for m in c.get("metrics", []):
                if m.get("base_median"):
                    rows.append((c["key"], m))
    if not rows:
        return None
    rows = rows[:40]  # beyond 40 metrics a bar chart is unreadable; the table has them all
    from matplotlib.patches import Patch
    height = 0.38
    fig, ax = plt.subplots(figsize=(FIG_SIZE[0] + 2, max(FIG_SIZE[1], 0.42 * len(rows) + 1.6)))
    for i, (_, m) in enumerate(rows):
        base = m["base_median"]
        # Before: 100% with the spread of its runs; after: the new median, as % of before.
        b_lo, b_hi = min(m["base"]) / base * 100, max(m["base"]) / base * 100
        n_lo, n_hi = min(m["new"]) / base * 100, max(m["new"]) / base * 100
        after = m["new_median"] / base * 100
        color = "#c0392b" if m["regression"] else "#27ae60" if m["improvement"] else "#7f8c8d"
        hatch = "///" if m["regression"] else "..." if m["improvement"] else None  # apart in greyscale too
        ax.barh(i - height / 2, 100, height, color="#d5dbdb", edgecolor="#95a5a6",
                xerr=[[100 - b_lo], [b_hi - 100]], capsize=2, error_kw={"elinewidth": 0.8})
        ax.barh(i + height / 2, after, height, color=color, hatch=hatch, edgecolor="black" if hatch else None,
                xerr=[[max(0, after - n_lo)], [max(0, n_hi - after)]], capsize=2, error_kw={"elinewidth": 0.8})
        better = "higher is better" if m.get("higher_is_better") else "lower is better"
        ax.text(max(after, b_hi, n_hi) + 1, i, f"{m['change'] * 100:+.1f}% ({better})", va="center", fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{k}\n{m['metric']}" for k, m in rows], fontsize=6)
    ax.invert_yaxis()
    ax.axvline(100, color="black", linewidth=0.7)
    ax.set_xlabel("median of the runs as % of BASE (whiskers: the runs' range)")
    ax.set_title("pairperf compare: before (grey) and after")
    ax.legend(handles=[Patch(color="#d5dbdb", label="before (BASE)"),
                       Patch(facecolor="#c0392b", hatch="///", edgecolor="black", label="after: regression"),
                       Patch(facecolor="#27ae60", hatch="...", edgecolor="black", label="after: improvement"),
                       Patch(color="#7f8c8d", label="after: no significant change")], fontsize=7, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    worse = sum(1 for _, m in rows if m["regression"])
    better = sum(1 for _, m in rows if m["improvement"])
    return save(fig, out, "compare", written, "pairperf compare: before and after",
                f"Bars of {len(rows)} compared metrics, the new runs' median as a percentage of the baseline's: "
                f"{worse} regressions, {better} improvements, the rest no significant change or inconclusive")


def plot_history(history_docs, out, written):
    """Each history: one panel per series (those with change points or a newest-run finding first), run values
    over the runs in time order, dashed lines where the level changed, the newest run coloured by its verdict."""
    names = []
    for i, (_, doc) in enumerate(history_docs):
        series = [s for s in doc["series"] if any(v is not None for v in s["values"])]
        def interest(s):
            latest = (s.get("latest") or {}).get("verdict")
            return (0 if s["change_points"] or latest in ("regression", "improvement") else 1, s["key"], s["metric"])
        series = sorted(series, key=interest)[:HISTORY_PANELS]
        if not series:
            continue
        runs = doc["runs"]
        fig, axes = grid(len(series))
        for ax, s in zip(axes, series):
            bw = s["unit"] == "B/s"
            scale, unit = (1e-9, "GB/s") if bw else (1e6, "µs")
            xs = [k for k, v in enumerate(s["values"]) if v is not None]
            ys = [s["values"][k] * scale for k in xs]
            ax.plot(xs, ys, marker="o", markersize=3, linewidth=1, color="#2c3e50")
            for c in s["change_points"]:
                color = {"regression": "#c0392b", "improvement": "#27ae60"}.get(c["verdict"], "#7f8c8d")
                ax.axvline(c["run"] - 0.5, color=color, linestyle="--", linewidth=1)
                ax.text(c["run"] - 0.4, max(ys), f"{c['change'] * 100:+.1f}%", color=color, fontsize=7, va="top")
            latest = s.get("latest") or {}
            if latest.get("value") is not None:
                color = {"regression": "#c0392b", "improvement": "#27ae60"}.get(latest.get("verdict"), "#2c3e50")
                ax.plot([len(s["values"]) - 1], [latest["value"] * scale], marker="D", markersize=6, color=color,
                        linestyle="none")
            ax.set_title(f"{s['key']}\n{s['metric']} (newest: {latest.get('verdict', '-')})", fontsize=7)
            ax.set_ylabel(unit)
            ax.set_xlabel("run (time order)")
            ax.grid(True, alpha=0.3)
        first, last = runs[0].get("time_utc") or runs[0]["file"], runs[-1].get("time_utc") or runs[-1]["file"]
        title = (f"pairperf history: {len(runs)} runs, {first} to {last}; dashed: change points "
                 f"(red regression, green improvement, grey shift); diamond: the newest run")
        fig.suptitle(title, fontsize=9)
        below_title(fig)
        name = "history" if len(history_docs) == 1 else f"history-{i + 1}"
        points = sum(len(s["change_points"]) for s in series)
        names.append(save(fig, out, name, written, title,
                          f"{len(series)} series of run values over {len(runs)} runs in time order, with "
                          f"{points} change points marked: " +
                          "; ".join(f"{s['key']} {s['metric']}: {len(s['change_points'])} change points, newest run "
                                    f"{(s.get('latest') or {}).get('verdict', 'not judged')}" for s in series)))
    return names


def plot_mesh(mesh_docs, out, written):
    """Each mesh file: bandwidth and latency heatmaps, rows = client, columns = server."""
    names = []
    for i, (path, doc) in enumerate(mesh_docs):
        m = doc["mesh"]
        nodes = m["nodes"]
        n = len(nodes)
        side = max(4.0, 0.6 * n + 2)
        fig, axes = plt.subplots(1, 2, figsize=(2 * side + 1, side))
        for ax, key, title, scale, unit in ((axes[0], "bandwidth_Bps", "bandwidth", 1e-9, "GB/s"),
                                            (axes[1], "latency_p50_s", "latency p50, one-way", 1e6, "µs")):
            grid = [[(v * scale if v is not None else float("nan")) for v in row] for row in m[key]]
            cmap = matplotlib.colormaps["viridis" if key.startswith("band") else "viridis_r"].copy()
            cmap.set_bad("#eeeeee")
            im = ax.imshow(grid, cmap=cmap)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=unit)
            ax.set_xticks(range(n))
            ax.set_yticks(range(n))
            ax.set_xticklabels(nodes, rotation=45, ha="right", fontsize=8)
            ax.set_yticklabels(nodes, fontsize=8)
            ax.set_xlabel("server")
            ax.set_ylabel("client")
            ax.set_title(f"{title} ({unit})")
            for r in range(n):
                for c in range(n):
                    verdict = m["verdict"][r][c]
                    if verdict in ("unreachable", "error"):
                        ax.text(c, r, "X", ha="center", va="center", color="#c0392b", fontsize=12, fontweight="bold")
                    elif grid[r][c] == grid[r][c]:  # not NaN
                        mark = {"slow link": "!", "noisy": "~"}.get(verdict, "")
                        ax.text(c, r, f"{grid[r][c]:.3g}{mark}", ha="center", va="center", color="white", fontsize=7)
        title = (f"pairperf mesh: {n} nodes, {doc['context'].get('pattern', '')} "
                 f"(X: unreachable or error; !: slow link; ~: noisy alone too; grey: not measured)")
        fig.suptitle(title)
        below_title(fig)
        name = "mesh" if len(mesh_docs) == 1 else f"mesh-{i + 1}"
        verdicts = [v for row in m["verdict"] for v in row if v]
        counts = ", ".join(f"{verdicts.count(v)} {v}" for v in sorted(set(verdicts)))
        names.append(save(fig, out, name, written, title,
                          f"Heatmaps of bandwidth and one-way latency between {n} nodes ({', '.join(nodes)}), rows "
                          f"the client, columns the server; pairs: {counts or 'none measured'}"))
    return names


def main(argv):
    ap = argparse.ArgumentParser(prog="pairperf report", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="results, peer-curve, compare, history, mesh or doctor JSON files, or folders")
    ap.add_argument("--out", required=True, help="folder for the pictures and index.html")
    a = ap.parse_args(argv)
    try:
        docs = documents.read_all(a.inputs, INPUTS)
    except documents.DocumentError as e:
        print(f"pairperf report: {e}", file=sys.stderr)
        return 2
    # A document of the right kind but the wrong shape is refused here, with what is wrong, rather
    # than drawn half or failing in the middle.
    for path, doc in docs:
        wrong = documents.errors(path, doc)
        if wrong:
            more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
            print(f"pairperf report: not a valid {doc['schema']} document: {'; '.join(wrong[:3])}{more}",
                  file=sys.stderr)
            return 2
    results_docs = [d for d in docs if d[1]["schema"] == "pairperf.result"]
    peer_docs = [d for d in docs if d[1]["schema"] == "pairperf.peer"]
    compare_docs = [d for d in docs if d[1]["schema"] == "pairperf.compare"]
    mesh_docs = [d for d in docs if d[1]["schema"] == "pairperf.mesh"]
    history_docs = [d for d in docs if d[1]["schema"] == "pairperf.history"]
    streams, pingpongs = collect(results_docs)
    os.makedirs(a.out, exist_ok=True)
    written = []
    figures = [f for f in (plot_bandwidth(streams, peer_docs, a.out, written),
                           plot_latency(pingpongs, peer_docs, a.out, written),
                           plot_compare(compare_docs, a.out, written)) if f]
    figures += plot_history(history_docs, a.out, written)
    figures += plot_mesh(mesh_docs, a.out, written)
    shown = [d for d in docs if d[1]["schema"] != "pairperf.peer"]
    # A run where nothing worked is still shown (its outcome says why); peer curves alone are not.
    if not figures and not any(d[1]["schema"] in ("pairperf.doctor", "pairperf.result") for d in shown):
        print("pairperf report: nothing to show (no results, comparison, history, mesh or doctor report in the "
              "inputs)", file=sys.stderr)
        return 2
    written.append(report_page.write(a.out, figures, shown, a.inputs))
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
