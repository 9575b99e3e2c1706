"""Child processes for the tools and tests: every wait bounded, every process we start ended by its
PID, readiness seen rather than slept for."""
import os
import signal
import socket
import subprocess
import time


def free_port(host="127.0.0.1"):
    """A TCP port nothing listens on now (the kernel's pick)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def listening(port):
    """Whether a TCP socket of this network namespace listens on `port`, read from /proc/net/tcp{,6}
    without connecting (a probe connection would be the one client of a one-shot server)."""
    want = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    if len(fields) > 3 and fields[1].endswith(want) and fields[3] == "0A":  # TCP_LISTEN
                        return True
        except FileNotFoundError:
            continue
    return False


def wait_listening(proc, port, timeout=10.0):
    """Waits until `proc` (or anyone in this namespace) listens on `port`; raises RuntimeError when
    the process ends first or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not listening(port):
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} ended (exit {proc.returncode}) before it listened on port {port}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{proc.args[0]} did not listen on port {port} within {timeout:g} s")
        time.sleep(0.02)


def run(cmd, timeout, **kw):
    """Runs cmd to its end within `timeout` seconds; raises CalledProcessError on a non-zero exit."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True, **kw)


def stop(proc, sig=signal.SIGTERM, wait=5):
    """Ends a process we started, by PID, and reaps it; returns what it wrote to pipes we hold."""
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=wait)
    out = ""
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            out += stream.read()
            stream.close()
    return out


class Background:
    """A server we start, wait for (listening on `port`) and end by PID when the block ends.
    `exits` says it ends on its own after one client (iperf3 -1, ucx_perftest): it is then given
    `wait` seconds to do so before it is stopped."""

    def __init__(self, cmd, port, env=None, exits=False, wait=10):
        self.exits, self.wait = exits, wait
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            wait_listening(self.proc, port)
        except Exception:
            stop(self.proc)
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.exits and exc[0] is None:
            try:
                self.proc.wait(timeout=self.wait)
            except subprocess.TimeoutExpired:
                pass
        stop(self.proc)


def with_library_path(env, directory):
    """env with `directory` first in LD_LIBRARY_PATH (a library build or test double to load)."""
    env = dict(env)
    env["LD_LIBRARY_PATH"] = directory + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def descendants(pid):
    """The PIDs below `pid` (children, grandchildren...), from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, unvisited = [], [pid]
    while unvisited:
        for c in children.get(unvisited.pop(), []):
            out.append(c)
            unvisited.append(c)
    return out
