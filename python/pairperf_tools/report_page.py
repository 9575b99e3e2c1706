"""The page of `pairperf report`: index.html, a file that stands alone (no network, no other file).

It shows what pairperf knows beyond the curves: each input's outcome and counts, the two hosts of a
run side by side, a table of every case (status, figures, the lanes that carried the bytes, the
noise mark, the verdict or why it is not judged) that sorts and filters in the page, doctor's
findings with their severity, each mesh's heatmaps beside its findings, compare's and history's
verdicts, and the figures themselves, inlined as SVG images with their alt text.

Accessibility: every table has a caption and column headers (scope=col), sortable headers are
buttons that set aria-sort, statuses and severities are words with a symbol (never a colour
alone), and the colours differ in lightness so they survive greyscale printing."""
import base64
import html
import os

STATUS_MARK = {"ok": "✓", "skipped": "–", "fail": "✗", "error": "✗", "unreachable": "✗"}
SEVERITY_MARK = {"fails": "✗", "fragile": "!", "advice": "i"}
VERDICT_MARK = {"held": "✓", "failed": "✗", "missed": "✗", "inconclusive": "?", "findings": "✗", "regression": "✗"}
SHORT = 60  # characters of a long text shown before its <details> is opened

STYLE = """
body{font-family:sans-serif;margin:1.5em;color:#111}
h1{margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #999}
table{border-collapse:collapse;margin:.6em 0} caption{text-align:left;font-weight:bold;padding:.3em 0}
td,th{border:1px solid #aaa;padding:3px 7px;font-size:88%;vertical-align:top;text-align:left}
th{background:#e8e8e8} td.n{text-align:right;font-variant-numeric:tabular-nums}
th button{font:inherit;font-weight:bold;background:none;border:0;padding:0;cursor:pointer;text-align:left}
th[aria-sort=ascending] button::after{content:" ▲"} th[aria-sort=descending] button::after{content:" ▼"}
.s-ok{background:#d4edd4} .s-bad{background:#eaa8a8;font-weight:bold} .s-skip{background:#f4f4f4}
.s-warn{background:#f7d98b} .noisy{font-weight:bold}
.sides{display:flex;flex-wrap:wrap;gap:1.5em} .outcome{font-size:110%}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #ccc} figcaption{font-size:90%}
.filters{display:flex;flex-wrap:wrap;gap:1em;align-items:center;margin:.5em 0}
.muted{color:#555} details summary{cursor:pointer}
#case-table td{white-space:nowrap} #case-table td.wrap{white-space:normal;min-width:12em;max-width:24em}
.scroll{overflow-x:auto}
"""

# Sorting and filtering of the cases table; no library, no network.
SCRIPT = """
(function () {
  const table = document.getElementById("case-table");
  if (!table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const text = document.getElementById("case-text");
  const status = document.getElementById("case-status");
  const noisy = document.getElementById("case-noisy");
  const count = document.getElementById("case-count");
  function apply() {
    const q = text.value.trim().toLowerCase();
    let shown = 0;
    for (const r of rows) {
      const keep = (!q || r.textContent.toLowerCase().includes(q)) &&
        (!status.value || r.dataset.status === status.value) && (!noisy.checked || r.dataset.noisy === "1");
      r.hidden = !keep;
      if (keep) shown++;
    }
    count.textContent = shown + " of " + rows.length + " cases shown";
  }
  function value(row, col, numeric) {
    const cell = row.cells[col];
    const raw = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    return raw === "" ? null : Number(raw);
  }
  function sortBy(th) {
    const col = th.cellIndex, numeric = th.dataset.type === "num";
    const dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    for (const h of table.tHead.rows[0].cells) h.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", dir);
    const sign = dir === "ascending" ? 1 : -1;
    rows.sort(function (a, b) {
      const x = value(a, col, numeric), y = value(b, col, numeric);
      if (x === null || y === null) return (x === null) - (y === null);  // no figure: last either way
      return (x < y ? -1 : x > y ? 1 : 0) * sign;
    });
    body.append(...rows);
  }
  for (const th of table.tHead.rows[0].cells) {
    const b = th.querySelector("button");
    if (b) b.addEventListener("click", function () { sortBy(th); });
  }
  for (const el of [text, status, noisy]) el.addEventListener("input", apply);
  apply();
})();
"""


def esc(v):
    return html.escape("" if v is None else str(v))


def folded(text):
    """A long text as a <details> whose summary is its start: rows stay one line high, the
    whole text is one click away and is in the row's text (the filter finds it)."""
    if len(text) <= SHORT:
        return esc(text)
    return f"<details><summary>{esc(text[:SHORT].rstrip())}…</summary>{esc(text)}</details>"


def count(v):
    """A count that a document gives as a number or as the list of what it counts."""
    return len(v) if isinstance(v, list) else (v or 0)


def size_text(v, _pos=None):
    """Bytes as 8, 64K, 1M (K = 1024); also the curves' tick labels (matplotlib's FuncFormatter)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if v >= scale:
            return f"{v / scale:g}{unit}"
    return f"{v:g}"


def bandwidth_of(r):
    """A result's bandwidth: the receiver's, the sender's where only it exists (one-sided put)."""
    b = r.get("bandwidth_Bps") or {}
    return b.get("receiver") if b.get("receiver") is not None else b.get("sender")


def number(v, scale, digits=3):
    return "" if v is None else f"{v * scale:.{digits}g}"


def status_class(status):
    return {"ok": "s-ok", "skipped": "s-skip"}.get(status, "s-bad")


def verdict_class(verdict):
    return {"held": "s-ok", "inconclusive": "s-warn"}.get(verdict, "s-bad")


def cell(c):
    """A text cell (escaped here), or an (escaped html, attributes) pair."""
    if isinstance(c, tuple):
        text, attrs = c
        return f"<td {attrs}>{text}</td>" if attrs else f"<td>{text}</td>"
    return f"<td>{esc(c)}</td>"


def table(caption, head, rows, table_id=None, numeric=(), sortable=False):
    """A table: `rows` are lists of cells, each a text or a (html, attributes) pair already escaped."""
    ths = []
    for i, h in enumerate(head):
        kind = ' data-type="num"' if i in numeric else ""
        label = f'<button type="button">{esc(h)}</button>' if sortable else esc(h)
        ths.append(f'<th scope="col"{kind}>{label}</th>')
    body = []
    for row in rows:
        attrs, cells = ("", row) if not isinstance(row, tuple) else row
        body.append(f"<tr{attrs}>{''.join(cell(c) for c in cells)}</tr>")
    ident = f' id="{table_id}"' if table_id else ""
    return (f"<table{ident}><caption>{esc(caption)}</caption><thead><tr>{''.join(ths)}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def outcome_rows(docs):
    """One row per input document: its kind, verdict, exit code and what it says about itself."""
    rows = []
    for path, doc in docs:
        kind = doc["schema"].split(".", 1)[1]
        verdict, code, said = None, None, ""
        if kind == "result":
            o = doc.get("outcome") or {}
            verdict, code = o.get("verdict"), o.get("exit_code")
            counts = o.get("counts") or {}
            said = ", ".join(f"{n} {k}" for k, n in counts.items() if n) + ("; " if o.get("reasons") else "")
            said += "; ".join(o.get("reasons", []))
        elif kind == "mesh":
            o = doc.get("outcome") or {}
            verdict, code = o.get("verdict"), o.get("exit_code")
            said = "; ".join([f"{len(doc['mesh']['nodes'])} nodes"] + o.get("reasons", []))
        elif kind == "doctor":
            code = doc.get("exit_code")
            verdict = {0: "held", 3: "missed", 4: "inconclusive"}.get(code)
            v = doc.get("verdict") or {}
            said = f"{len(doc['findings'])} findings" + (f"; path: {v['verdict']}" if v else "")
        elif kind in ("compare", "history"):
            verdict, code = doc.get("verdict"), doc.get("exit_code")
            said = ", ".join(f"{count(doc.get(k))} {name}" for k, name in (
                ("regressions", "regressions"), ("improvements", "improvements"), ("inconclusive", "inconclusive"),
                ("provenance_changes", "lane changes"), ("status_changes", "status changes")))
            if doc.get("inconclusive_reason"):
                said += f"; {doc['inconclusive_reason']}"
        else:
            continue
        v = "" if verdict is None else f"{VERDICT_MARK.get(verdict, '')} {verdict}"
        rows.append([os.path.basename(path), kind, (esc(v), f'class="{verdict_class(verdict)}"'),
                     "" if code is None else str(code), (folded(said) if len(said) > 4 * SHORT else esc(said), "")])
    return rows


def interfaces_text(side):
    parts = []
    for i in side.get("interfaces", []):
        if not i.get("up"):
            continue
        addrs = " ".join(f"{a['address']}/{a['prefix_len']}" for a in i.get("addresses", []) if a["family"] == "ipv4")
        parts.append(f"{i['name']} {addrs} mtu {i.get('mtu_bytes', '?')}".replace("  ", " "))
    return "; ".join(parts)


def libraries_text(tool):
    libs = (tool or {}).get("libraries", {})
    return ", ".join(f"{k} {v.get('version', '')}".strip() for k, v in sorted(libs.items()))


def host_facts(ctx):
    """(fact, client's, server's) for the facts two hosts of a run are compared by."""
    client, server = ctx.get("client", {}), ctx.get("server", {})
    tool, server_tool = ctx.get("tool", {}), ctx.get("server_tool", {})

    def gpus(side):
        g = side.get("gpus") or {}
        return ", ".join(x.get("name", "?") for x in g.get("gpus", [])) or g.get("reason", "none")

    def proc(side, key):
        return (side.get("process") or {}).get(key)

    facts = [("hostname", lambda s, t: s.get("hostname")),
             ("operating system", lambda s, t: s.get("os")),
             ("kernel", lambda s, t: s.get("kernel")),
             ("CPU", lambda s, t: f"{s.get('cpu_model', '?')} x {s.get('cpus', '?')} ({s.get('machine', '?')})"),
             ("CPUs usable", lambda s, t: proc(s, "cpus_usable")),
             ("CPU quota", lambda s, t: proc(s, "cpu_quota") or "none"),
             ("memory", lambda s, t: number(s.get("memory_bytes"), 2 ** -30, 4) + " GiB" if s.get("memory_bytes") else ""),
             ("interfaces up (IPv4)", lambda s, t: interfaces_text(s)),
             ("RDMA devices", lambda s, t: ", ".join(d.get("name", "?") for d in s.get("rdma_devices", [])) or "none"),
             ("GPUs", lambda s, t: gpus(s)),
             ("loop clock", lambda s, t: (s.get("loop_clock") or {}).get("source")),
             ("pairperf", lambda s, t: f"{t.get('version', '?')} ({t.get('git_revision', '?')})" if t else ""),
             ("libraries", lambda s, t: libraries_text(t))]
    return [(name, str(get(client, tool) or ""), str(get(server, server_tool) or "")) for name, get in facts]


def hosts_section(results_docs):
    out = []
    for path, doc in results_docs:
        ctx = doc.get("context", {})
        rows = []
        for name, c, s in host_facts(ctx):
            same = "same" if c == s else ("differs" if c and s else "")
            rows.append([name, c, s, (esc(same), 'class="s-warn"' if same == "differs" else "")])
        caption = (f"{os.path.basename(path)}: {ctx.get('time_utc', '?')}, client -> server "
                   f"{ctx.get('server_address', '?')}")
        out.append(table(caption, ["fact", "client", "server", "same?"], rows))
    return "<h2 id=\"hosts\">The two hosts</h2>" + "".join(out) if out else ""


def lanes_text(r):
    p = r.get("provenance") or {}
    lanes = p.get("bulk_lanes") or p.get("lanes") or []
    text = ", ".join(f"{l['transport']}/{l['device']}" for l in lanes)
    if r.get("gpu_path"):
        text += f" ({r['gpu_path']['verdict']})"
    if p.get("staged"):
        text += f" staged: {p['staged']}"
    return text


def judged_text(r, asked):
    """The case's verdict, or why it has none."""
    v = r.get("verdict")
    if v:
        return "; ".join(f"{'✓' if c['pass'] else '✗'} {c['expect']}: seen {c['seen']}" for c in v["checks"])
    u = r.get("unjudged")
    if u:
        return f"? not judged ({', '.join(u['expect'])}): {u['why']}"
    if r.get("status") != "ok":
        return f"not judged: {r.get('status')}"
    return "not judged: no --expect applies to this case" if asked else "not judged: no --expect given"


def case_rows(results_docs):
    rows = []
    several = len(results_docs) > 1
    for path, doc in results_docs:
        argv = (doc.get("context") or {}).get("argv") or []
        asked = any(a == "--expect" or a.startswith("--expect=") for a in argv)
        for r in doc.get("results", []):
            c = r["case"]
            status = r.get("status", "?")
            noise = r.get("host_noise") or {}
            lat = r.get("latency_s") or {}
            bw_v = bandwidth_of(r)
            noisy = noise.get("why") or "its processes waited for a CPU" if noise.get("noisy") else ""
            message = r.get("message", "")
            if r.get("error_code"):
                message = f"{r['error_code']}: {message}"
            cells = ([os.path.basename(path)] if several else []) + [
                (esc(c.get("index", "")), f'class="n" data-v="{c.get("index", "")}"'),
                c["transport"], c["test"], c.get("tls") or "", c.get("iface") or "",
                ",".join(c.get("memory", ["host", "host"])),
                (esc(size_text(c["size_bytes"])), f'class="n" data-v="{c["size_bytes"]}"'),
                (esc(f"{STATUS_MARK.get(status, '')} {status}"), f'class="{status_class(status)}"'),
                num_cell(bw_v, 1e-9), num_cell(lat.get("p50"), 1e6), num_cell(lat.get("p99"), 1e6),
                lanes_text(r), (f"<details><summary>~ noisy</summary>{esc(noisy)}</details>" if noisy else "",
                                'class="noisy"' if noisy else ""),
                (folded(judged_text(r, asked)), 'class="wrap"'), (folded(message), 'class="wrap"')]
            rows.append((f' data-status="{esc(status)}" data-noisy="{1 if noisy else 0}"', cells))
    return rows


def num_cell(v, scale):
    return (esc(number(v, scale)), f'class="n" data-v="{"" if v is None else v * scale}"')


def cases_section(results_docs):
    rows = case_rows(results_docs)
    if not rows:
        return ""
    several = len(results_docs) > 1
    head = (["file"] if several else []) + ["#", "transport", "test", "axis", "interface", "memory", "size",
                                           "status", "bandwidth GB/s", "p50 µs", "p99 µs", "lanes (bulk)",
                                           "noise", "verdict", "message"]
    first = 1 if several else 0
    numeric = {first + 0, first + 6, first + 8, first + 9, first + 10}
    statuses = sorted({r.get("status", "?") for _, doc in results_docs for r in doc.get("results", [])})
    options = "".join(f'<option value="{esc(s)}">{esc(s)}</option>' for s in statuses)
    filters = (f'<div class="filters"><label>Filter <input id="case-text" type="search" size="30" '
               f'placeholder="any text: tcp, 1M, cma, noisy"></label>'
               f'<label>Status <select id="case-status"><option value="">any</option>{options}</select></label>'
               f'<label><input id="case-noisy" type="checkbox"> noisy only</label>'
               f'<span id="case-count" role="status" aria-live="polite"></span></div>')
    note = ("<p class=\"muted\">Bandwidth is the receiver's (the sender's where only it exists), latency one-way. "
            "Lanes are what the library or the kernel really used for the payload at that size. "
            "~ noisy: the measuring processes waited for a CPU, so a miss is not a verdict. "
            "Click a column's name to sort.</p>")
    return ("<h2 id=\"cases\">Every case</h2>" + note + filters + '<div class="scroll">' +
            table(f"{len(rows)} cases", head, rows, table_id="case-table", numeric=numeric, sortable=True) + "</div>")


def findings_table(caption, findings):
    rows = []
    for f in findings:
        sev = f.get("severity", "")
        rows.append([(esc(f"{SEVERITY_MARK.get(sev, '')} {sev}"), f'class="{"s-bad" if sev == "fails" else "s-warn"}"'),
                     f.get("side", ""), f.get("subject", ""), f.get("problem", ""), f.get("fix", "")])
    if not rows:
        return f"<p>{esc(caption)}: no findings.</p>"
    return table(caption, ["severity", "side", "subject", "problem", "fix"], rows)


def doctor_section(doctor_docs):
    out = []
    for path, doc in doctor_docs:
        v = doc.get("verdict") or {}
        lines = [f"scope: {doc.get('scope', 'pair')}; exit code {doc.get('exit_code', '?')}"]
        if v:
            lines.append(f"path: {v['verdict']} (expected {v['expected']}, seen {v['seen']})"
                         + (f"; cause: {v['cause']}" if v.get("cause") else "") + (f"; fix: {v['fix']}" if v.get("fix") else ""))
        if doc.get("path_noisy"):
            lines.append(f"the path probes were noisy: {doc['path_noisy']}")
        apps = [[t, a.get("variable", ""), (a.get("result") or {}).get("status", ""), (a.get("result") or {}).get("message", "")]
                for t, a in sorted((doc.get("applications") or {}).items())]
        out.append(f"<h3>{esc(os.path.basename(path))}</h3><p>" + "<br>".join(esc(x) for x in lines) + "</p>")
        if apps:
            out.append(table("each library's own connection, as the application makes it",
                             ["library", "judges", "status", "message"], apps))
        out.append(findings_table("doctor's findings", doc.get("findings", [])))
    return "<h2 id=\"doctor\">doctor</h2>" + "".join(out) if out else ""


def mesh_section(mesh_docs, figures):
    out = []
    for i, (path, doc) in enumerate(mesh_docs):
        m = doc["mesh"]
        o = doc.get("outcome") or {}
        name = "mesh" if len(mesh_docs) == 1 else f"mesh-{i + 1}"
        bad = [[p["client_name"], p["server_name"], p["verdict"], (p.get("noise") or {}).get("why", "")]
               for p in m.get("pairs", []) if p.get("verdict") not in ("ok", None)]
        out.append(f"<h3>{esc(os.path.basename(path))}: {len(m['nodes'])} nodes, "
                   f"{esc(o.get('verdict', '?'))} (exit {esc(o.get('exit_code', '?'))})</h3>")
        if o.get("reasons"):
            out.append("<p>" + esc("; ".join(o["reasons"])) + "</p>")
        out.append('<div class="sides">' + figures.pop(name, "") + "<div>" +
                   findings_table("the mesh's findings", doc.get("findings", [])) +
                   (table("pairs that are not ok", ["client", "server", "verdict", "noise"], bad) if bad else
                    "<p>Every measured pair is ok.</p>") + "</div></div>")
    return "<h2 id=\"mesh\">mesh</h2>" + "".join(out) if out else ""


def metric_verdict(m):
    if m.get("regression"):
        return "✗ regression"
    if m.get("improvement"):
        return "✓ improvement"
    if m.get("inconclusive"):
        return "? inconclusive" + (f": {m['note']}" if m.get("note") else "")
    return "no significant change"


def value_text(v, unit):
    return number(v, 1e-9) + " GB/s" if unit == "B/s" else number(v, 1e6) + " µs"


def compare_section(compare_docs, figures):
    out = []
    for path, doc in compare_docs:
        rows = []
        for c in doc.get("cases", []):
            lanes = ""
            if c.get("provenance_changed"):
                lanes = f"lanes {', '.join(c['lanes']['base'])} -> {', '.join(c['lanes']['new'])}"
            if c.get("status_regressed"):
                lanes += f" status {c['status']['base']} -> {c['status']['new']}"
            for m in c.get("metrics", []):
                verdict = metric_verdict(m)
                cls = "s-bad" if m.get("regression") else "s-ok" if m.get("improvement") else ""
                rows.append([c["key"], m["metric"], value_text(m["base_median"], m["unit"]),
                             value_text(m["new_median"], m["unit"]), f"{m['change'] * 100:+.1f}%",
                             "" if m.get("q_value") is None else f"{m['q_value']:.2g}", (esc(verdict), f'class="{cls}"'),
                             (c.get("noisy") or "") + lanes])
        rows.sort(key=lambda r: 0 if "regression" in r[6][0] or r[7] else 1 if "improvement" in r[6][0] else 2)
        out.append(f"<h3>{esc(os.path.basename(path))}: {esc(doc.get('verdict', '?'))} (exit {esc(doc.get('exit_code'))}), "
                   f"{len(doc.get('base_files', []))} baseline runs, {len(doc.get('new_files', []))} new</h3>")
        out.append(table("every compared metric (findings first)",
                         ["case", "metric", "baseline (median of runs)", "new", "change", "q", "verdict", "also"], rows))
    if not out:
        return ""
    return "<h2 id=\"compare\">compare</h2>" + figures.pop("compare", "") + "".join(out)


def history_section(history_docs, figures):
    out = []
    for i, (path, doc) in enumerate(history_docs):
        runs = doc.get("runs", [])
        name = "history" if len(history_docs) == 1 else f"history-{i + 1}"
        points, judged = [], []
        for s in doc.get("series", []):
            for c in s.get("change_points", []):
                points.append([s["key"], s["metric"], f"run {c['run']} ({c.get('time_utc') or c['file']})",
                               value_text(c["before"], s["unit"]), value_text(c["after"], s["unit"]),
                               f"{c['change'] * 100:+.1f}%", f"{c['p_value']:.2g}", c["verdict"]])
            latest = s.get("latest") or {}
            if latest.get("verdict") not in (None, "no significant change", "within threshold"):
                judged.append([s["key"], s["metric"], value_text(latest.get("value"), s["unit"]) if latest.get("value") else "",
                               latest["verdict"], latest.get("note", "")])
        out.append(f"<h3>{esc(os.path.basename(path))}: {len(runs)} runs, {esc(doc.get('verdict', '?'))} "
                   f"(exit {esc(doc.get('exit_code'))})</h3>" + figures.pop(name, ""))
        out.append(table("change points", ["case", "metric", "first run at the new level", "before", "after", "change",
                                           "p", "verdict"], points) if points else "<p>No change point in any series.</p>")
        if judged:
            out.append(table("the newest run, where it is not 'no significant change'",
                             ["case", "metric", "newest", "verdict", "note"], judged))
    return "<h2 id=\"history\">history</h2>" + "".join(out) if out else ""


def figure_html(out, fig):
    """A figure as an image inlined in the page (SVG as a data: URI), its alt text, and links to its files."""
    with open(os.path.join(out, f"{fig['name']}.svg"), "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return (f'<figure><img src="data:image/svg+xml;base64,{data}" alt="{esc(fig["alt"])}">'
            f'<figcaption>{esc(fig["title"])} (files: <a href="{fig["name"]}.svg">SVG</a>, '
            f'<a href="{fig["name"]}.png">PNG</a>)</figcaption></figure>')


def write(out, figures, docs, inputs):
    """Writes out/index.html; `figures` are dicts name/title/alt of the SVG files written in `out`."""
    kinds = {}
    for d in docs:
        kinds.setdefault(d[1]["schema"], []).append(d)
    results_docs = kinds.get("pairperf.result", [])
    inlined = {f["name"]: figure_html(out, f) for f in figures}
    mesh = mesh_section(kinds.get("pairperf.mesh", []), inlined)
    compare = compare_section(kinds.get("pairperf.compare", []), inlined)
    history = history_section(kinds.get("pairperf.history", []), inlined)
    curves = "".join(inlined.pop(n) for n in ("bandwidth", "latency") if n in inlined)
    rest = "".join(inlined.values())  # none is expected; nothing drawn is left out
    outcomes = outcome_rows(docs)
    sections = [
        "<h2 id=\"outcome\">Outcome</h2>" + (table("each input's verdict under the exit-code contract (0 held, "
                                                   "1 failed, 3 missed, 4 inconclusive)",
                                                   ["file", "kind", "verdict", "exit code", "counts and reasons"],
                                                   outcomes) if outcomes else "<p>No input carries a verdict.</p>"),
        hosts_section(results_docs),
        "<h2 id=\"curves\">Curves</h2>" + curves if curves else "",
        cases_section(results_docs),
        doctor_section(kinds.get("pairperf.doctor", [])), mesh, compare, history, rest]
    names = {"outcome": "Outcome", "hosts": "The two hosts", "curves": "Curves", "cases": "Every case",
             "doctor": "doctor", "mesh": "mesh", "compare": "compare", "history": "history"}
    present = [k for k in names if any(x.startswith(f'<h2 id="{k}"') for x in sections)]
    contents = ('<nav aria-label="sections"><p>' +
                " · ".join(f'<a href="#{k}">{names[k]}</a>' for k in present) + "</p></nav>")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>pairperf report</title><style>{STYLE}</style></head><body><main>
<h1>pairperf report</h1>
<p class="muted">From {esc(', '.join(inputs))}. Bandwidth in GB/s (1 GB = 1e9 bytes), latency one-way in
microseconds, message sizes in bytes (K = 1024). This page stands alone: it loads nothing.</p>
{contents}{''.join(sections)}
</main><script>{SCRIPT}</script></body></html>
"""
    path = os.path.join(out, "index.html")
    with open(path, "w") as f:
        f.write(page)
    return path
