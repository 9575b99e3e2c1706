"""The server under churn (issue 48, item 8): for a bounded time, many short clients connect to one
`pairperf server` on loopback, start cases and vanish (SIGKILL) at random points (while
connecting, in the hello, mid-case), beside raw sockets that connect and hang up or send half a
frame. Before and after, the server's open files, resident memory, threads and descendant
processes are measured; at the end a normal client must be served. Exit 0 when nothing leaked and
the last client was served, 1 otherwise; the figures on stdout (--json FILE for the record).

  scripts/server-soak [--seconds 120] [--clients 2] [--seed 1] [--json FILE] [--bin PATH]"""
import argparse
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import time

from pairperf_tools.processes import descendants

SOURCE_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))


def footprint(pid):
    """The server process's open files, resident KiB, threads, and its descendants."""
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    return {"open_files": len(os.listdir(f"/proc/{pid}/fd")),
            "rss_kib": int(status["VmRSS"].split()[0]),
            "threads": int(status["Threads"]),
            "descendants": len(descendants(pid))}


def start_server(binary):
    r, w = os.pipe()
    proc = subprocess.Popen([binary, "server", "--listen", "127.0.0.1", "--port", "0", "--ready-fd", str(w),
                             "--max-queue", "8", "--timeout-idle", "5s"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(w,))
    os.close(w)
    ready, _, _ = select.select([r], [], [], 10)
    if not ready:
        proc.kill()
        raise RuntimeError("the server did not report its port within 10 s")
    port = int(os.read(r, 64).decode().strip())
    os.close(r)
    return proc, port


def raw_visit(port, rng):
    """A socket that connects and hangs up at once, or sends half a frame and hangs up."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        if rng.random() < 0.5:
            body = b'{"type": "hello", "protocol": 1'
            s.sendall(struct.pack(">I", 4096) + body)  # a length that promises more than comes


def settle(pid, base, seconds=15):
    """Waits (bounded) until the server's sessions of the vanished clients have ended."""
    deadline = time.monotonic() + seconds
    now = footprint(pid)
    while time.monotonic() < deadline and (now["descendants"] > base["descendants"] or
                                           now["open_files"] > base["open_files"] + 2):
        time.sleep(0.25)
        now = footprint(pid)
    return now


def soak(binary, seconds, clients, seed, log=print):
    rng = random.Random(seed)
    server, port = start_server(binary)
    try:
        time.sleep(0.5)
        base = footprint(server.pid)
        running = []  # (process, when to kill it)
        started = killed = finished = raw = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            now = time.monotonic()
            for proc, at in list(running):
                if proc.poll() is not None:
                    finished += 1
                    running.remove((proc, at))
                elif now >= at:
                    proc.kill()
                    proc.wait()
                    killed += 1
                    running.remove((proc, at))
            while len(running) < clients:
                args = [binary, "run", f"127.0.0.1:{port}", "--no-json", "--quiet", "--transport", "tcp",
                        "--test", rng.choice(["tcp_lat", "tcp_bw", "tcp_lat,tcp_bw"]), "--sizes", "8,64K",
                        "--duration", "0.2s", "--wait-busy", "5s"]
                running.append((subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                                time.monotonic() + rng.uniform(0.0, 1.5)))
                started += 1
            if rng.random() < 0.3:
                try:
                    raw_visit(port, rng)
                    raw += 1
                except OSError:
                    pass
            time.sleep(0.02)
        for proc, _ in running:
            proc.kill()
            proc.wait()
            killed += 1
        after = settle(server.pid, base)
        proc = subprocess.run([binary, "run", f"127.0.0.1:{port}", "--no-json", "--transport", "tcp", "--test", "tcp_lat",
                               "--sizes", "8", "-n", "1000"], capture_output=True, text=True, timeout=60)
        alive = server.poll() is None
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    leaks = []
    if after["descendants"] > base["descendants"]:
        leaks.append(f"{after['descendants'] - base['descendants']} process(es) left")
    if after["open_files"] > base["open_files"] + 2:
        leaks.append(f"{after['open_files'] - base['open_files']} open file(s) more")
    if after["rss_kib"] > base["rss_kib"] + 16 * 1024:
        leaks.append(f"resident memory grew by {after['rss_kib'] - base['rss_kib']} KiB")
    result = {"seconds": seconds, "seed": seed, "clients_at_once": clients, "clients_started": started,
              "clients_killed": killed, "clients_finished": finished, "raw_visits": raw, "before": base,
              "after": after, "server_alive": alive, "last_client_exit": proc.returncode, "leaks": leaks}
    log(f"server-soak: {seconds} s, {started} clients ({killed} killed at random points, {finished} finished), "
        f"{raw} raw sockets; server before {base}, after {after}; last client exit {proc.returncode}; "
        f"{'no leak' if not leaks else 'LEAKS: ' + '; '.join(leaks)}")
    return result


def main(argv):
    ap = argparse.ArgumentParser(prog="server-soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--clients", type=int, default=2, help="clients at once")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--bin", default=os.environ.get("PAIRPERF_BIN", os.path.join(SOURCE_DIR, "build", "pairperf")))
    a = ap.parse_args(argv)
    if not (0 < a.seconds <= 3600) or not (1 <= a.clients <= 16):
        ap.error("--seconds must be in (0, 3600] and --clients in [1, 16]")
    r = soak(a.bin, a.seconds, a.clients, a.seed)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0 if not r["leaks"] and r["server_alive"] and r["last_client_exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
