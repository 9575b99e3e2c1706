"""One run of each tool compare-peers measures, returning its figures: pairperf (TCP, UCX,
libfabric, gloo), iperf3, sockperf, ucx_perftest, the bare UCX loop (pairperf_ucx_bare),
fi_pingpong, the gloo peers (the C++ loop, torch.distributed), pairperf_micro's cudaMemcpy; and
whether a suite's tools are here."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from .processes import Background, free_port, run


ANSI = re.compile(r"\x1b\[[0-9;]*m")


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


# The UCX installation both sides of the UCX rows use (--ucx-library): its lib folder, or None for
# the system's (the libucp.so.0 the loader finds; ucx_perftest and ucx_info on PATH).
UCX_INSTALL = {"lib": None}


def use_ucx(path):
    """The UCX rows run on the installation whose libucp.so.0 is `path` (the file or its folder; a
    wheel's libucx/lib, whose bin/ holds its ucx_perftest and ucx_info)."""
    lib = path if os.path.isdir(path) else os.path.dirname(path)
    if not os.path.exists(os.path.join(lib, "libucp.so.0")):
        raise RuntimeError(f"{path}: no libucp.so.0 there")
    UCX_INSTALL["lib"] = os.path.abspath(lib)


def ucx_tool(name):
    """ucx_perftest or ucx_info of the installation in use."""
    if UCX_INSTALL["lib"]:
        return os.path.join(os.path.dirname(UCX_INSTALL["lib"]), "bin", name)
    return name


def ucx_library_env(env=None):
    """`env` (default: this process's) with the installation in use for pairperf (PAIRPERF_UCX_LIBRARY)
    and for the tools linked to libucp.so.0 (LD_LIBRARY_PATH; a wheel's own libraries, such as the
    libgomp its ucx_perftest needs, sit in a .libs folder beside the package)."""
    env = dict(os.environ if env is None else env)
    lib = UCX_INSTALL["lib"]
    if lib:
        env["PAIRPERF_UCX_LIBRARY"] = os.path.join(lib, "libucp.so.0")
        extra = [lib] + sorted(glob.glob(os.path.join(lib, "..", "..", "*.libs")))
        env["LD_LIBRARY_PATH"] = ":".join(extra + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    return env


def ucx_versions(pairperf_binary):
    """{"pairperf": (version, library file), "ucx_perftest": (version, library file)}: the UCX each
    side of the rows really loads (pairperf's results context; the installation's ucx_info -v)."""
    env = ucx_library_env()
    info = json.loads(run([pairperf_binary, "info", "--json"], timeout=60, env=env).stdout)["tool"]["libraries"]["ucx"]
    # ucx_info -v: "# Library version: 1.22.0" (1.2x), "# Version 1.13.1" (1.13); the file: as the loader
    # resolves ucx_perftest's libucp.so.0 in the same environment.
    text = run([ucx_tool("ucx_info"), "-v"], timeout=60, env=env).stdout
    version = re.search(r"^# (?:Library version:|Version)\s*(\S+)", text, re.M)
    perftest = shutil.which(ucx_tool("ucx_perftest")) or ucx_tool("ucx_perftest")
    linked = re.search(r"libucp\.so\.0 => (\S+)", run(["ldd", perftest], timeout=60, env=env).stdout)
    return {"pairperf": (info.get("version", "?"), info.get("library", info.get("error", "?"))),
            "ucx_perftest": (version.group(1) if version else "?",
                             os.path.realpath(linked.group(1)) if linked else "?")}


def ucx_env(tls):
    env = dict(ucx_library_env(), UCX_NET_DEVICES="lo")
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
    server = [ucx_tool("ucx_perftest"), "-p", str(port)] + (["-c", str(pin[1])] if pin else [])
    with Background(server, port, env=env, exits=True):
        args = [ucx_tool("ucx_perftest"), "-p", str(port), "127.0.0.1", "-t", test, "-s", str(size), "-n", str(iters), "-w", str(warmup), "-f"]
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
        run(args, timeout=1200, env=ucx_library_env())
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


def fi_pingpong(provider, size, iters, host="127.0.0.1", bound=60):
    """One fi_pingpong pair over RDM tagged messages; returns its mean one-way time (usec/xfer)
    and its MB/sec (2 x size x iterations / time: size over the mean one-way time). A pair takes
    about a second here; one that is still running after `bound` seconds (fi_pingpong has no
    timeout of its own, and was seen to hang once in four runs beside a CPU hog) is ended, said on
    stderr with what it had printed, and run once more on a fresh port."""
    for attempt in (1, 2):
        port = free_port()
        common = ["fi_pingpong", "-p", provider, "-e", "rdm", "-m", "tagged", "-S", str(size), "-I", str(iters)]
        try:
            with Background(common + ["-B", str(port)], port, exits=True):
                p = run(common + ["-P", str(port), host], timeout=bound)
            break
        except subprocess.TimeoutExpired as e:
            seen = ((e.stdout or b"") + (e.stderr or b"")).decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or "") + (e.stderr or "")
            print(f"compare-peers: fi_pingpong {provider} {size} B x {iters} still running after {bound} s "
                  f"(attempt {attempt} of 2); it had printed: {seen.strip()[-500:] or '(nothing)'}",
                  file=sys.stderr, flush=True)
            if attempt == 2:
                raise RuntimeError(f"fi_pingpong {provider} {size}: still running after {bound} s, twice") from e
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
            "--json", out, "--quiet", "--timeout-case", "300s" if host else "60s"]
        if not host:
            args += ["--iface", "lo"]
        # pairperf bounds each phase of a case (--timeout-case): past a few of them it hung, its bug.
        run(args, timeout=600 if host else 150)
        with open(out) as f:
            r = json.load(f)["results"][0]
    if r["status"] != "ok":
        raise RuntimeError(f"pairperf ofi {provider} {size}: {r['status']}: {r.get('message')}")
    mean = r["latency_s"]["avg"]
    return {"one_way_s": mean, "bandwidth_Bps": size / mean}


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


def micro_binary(a):
    """pairperf_micro, built beside the pairperf binary under test."""
    return os.path.join(os.path.dirname(os.path.abspath(a.pairperf)), "pairperf_micro")


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
