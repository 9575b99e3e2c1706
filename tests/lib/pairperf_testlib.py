"""Helpers for pairperf's end-to-end tests: real processes, bounded waits, raw control frames.

Every wait here has a bound; every process started here is ended by PID in a finally block.
"""
import glob
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE_DIR = os.environ.get("PAIRPERF_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))
from pairperf_tools import documents  # noqa: E402
from pairperf_tools.processes import descendants as _descendants, free_port, stop, with_library_path  # noqa: E402,F401 (the tests' API)
BIN = os.path.abspath(os.environ.get("PAIRPERF_BIN", os.path.join(SOURCE_DIR, "build", "pairperf")))
SKIP = 77  # ctest's SKIP_RETURN_CODE for these tests


def run(args, timeout=120, cwd=None, env=None, prefix=()):
    """Runs pairperf with args; returns (CompletedProcess, seconds it took)."""
    start = time.monotonic()
    proc = subprocess.run(list(prefix) + [BIN] + list(args), capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    return proc, time.monotonic() - start


class WithNamespaces(unittest.TestCase):
    """A test class over network namespaces that its build(nets) classmethod makes once, before its
    tests (nets: pairperf_tools.netns.Namespaces); deleted after them, or at once when build
    fails. cleanup() removes anything else the class made (override it)."""

    @classmethod
    def build(cls, nets):
        raise NotImplementedError

    @classmethod
    def cleanup(cls):
        pass

    @classmethod
    def setUpClass(cls):
        from pairperf_tools import netns
        cls.nets = netns.Namespaces()
        try:
            cls.build(cls.nets)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.nets.close()
        cls.cleanup()


def traced(args, calls="execve", timeout=120):
    """Runs pairperf with args under `strace -f` for these system calls; returns (CompletedProcess,
    the trace: one line per call, each starting with its pid). None when strace is not installed.
    LeakSanitizer cannot run under ptrace: an ASan build's leak check is left to the other tests."""
    import shutil
    if shutil.which("strace") is None:
        return None
    env = dict(os.environ, ASAN_OPTIONS=":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "detect_leaks=0"])))
    with tmpdir() as d:
        log = os.path.join(d, "trace")
        proc = subprocess.run(["strace", "-f", "-qq", "-e", f"trace={calls}", "-o", log, BIN] + list(args),
                              capture_output=True, text=True, timeout=timeout, env=env)
        with open(log) as f:
            return proc, f.read()


def start(args, prefix=(), **kw):
    return subprocess.Popen(list(prefix) + [BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def subcommands(binary=None):
    """The subcommands a pairperf binary's root --help lists (CLI11's "Subcommands:" section)."""
    usage = subprocess.run([binary or BIN, "--help"], capture_output=True, text=True, timeout=60)
    if usage.returncode != 0 or "Subcommands:" not in usage.stdout:
        raise AssertionError(f"pairperf --help exited {usage.returncode}: {usage.stdout}{usage.stderr}")
    listed = usage.stdout.split("Subcommands:", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def pairperf_children(pid):
    """PIDs of the pairperf processes whose parent is `pid` (a local server, case processes): the
    same binary, and not the short-lived child that asks libfabric what it offers (argv[0]
    pairperf-ofi-discovery)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    found = []
    for p in out.split():
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
            if os.path.realpath(f"/proc/{p}/exe") == os.path.realpath(BIN) and argv0 != b"pairperf-ofi-discovery":
                found.append(int(p))
        except OSError:
            pass
    return found


def catches(pid, sig):
    """Whether process `pid` has a handler for `sig` (its SigCgt mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        pass
    return False


def wait_for(predicate, seconds, what):
    """Polls `predicate` every 20 ms for at most `seconds`; returns its first true value, else fails
    the test saying `what` did not happen."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {seconds} s")


def lines_in(path):
    with open(path) as f:
        return len(f.readlines())


def finished_in_stream(path):
    """The cases a results stream (--jsonl) says finished: (index, test, size) of each."""
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []
    return [(r["case"]["index"], r["case"]["test"], r["case"]["size_bytes"]) for r in rows if "case" in r and "status" in r]


def _established_tcp_inodes():
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[3] == "01":  # ESTABLISHED
                        inodes.add(fields[9])
        except OSError:
            pass
    return inodes


def beside_the_loop(result):
    """Each side's share of its measured wall time that its process's other threads ran (a
    library's progress or event-loop thread, pairperf's own helpers): {side: share}, from the
    case's host_noise (process_cpu_s less the measuring thread's cpu_s)."""
    noise = result.get("host_noise") or {}
    return {side: (noise[side]["process_cpu_s"] - noise[side]["cpu_s"]) / noise[side]["wall_s"]
            for side in ("client", "server") if noise.get(side) and noise[side].get("wall_s")}


def assert_nothing_beside_the_loop(test, results, share=0.05):
    """Every result ok, and on each side its process's other threads ran under `share` of the
    measured wall time (beside_the_loop). A wait of a few % can still be "self" contention:
    loopback TCP's softirq work, which no thread of the process runs."""
    for r in results:
        with test.subTest(case=r["case"]):
            test.assertEqual(r["status"], "ok", r.get("message"))
            beside = beside_the_loop(r)
            test.assertEqual(set(beside), {"client", "server"}, r["host_noise"])
            test.assertLess(max(beside.values()), share, r["host_noise"])


def socket_inodes(pid):
    """The inodes (as /proc/net/tcp prints them) of the sockets process `pid` holds open; [] once it is gone."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.append(link[8:-1])
    return out


def case_data_connected(server_pid):
    """Whether the server's session (its child process, which runs the cases' server side) holds an
    established TCP connection besides its control connection: the case's data path is up."""
    established = _established_tcp_inodes()
    return any(sum(inode in established for inode in socket_inodes(pid)) >= 2 for pid in _descendants(server_pid))


def kill_server_mid_case(server, client_args, after=2.0, connected=False):
    """Starts a client against `server`, SIGKILLs the server `after` seconds in (while the
    client is measuring), and returns (client exit code, seconds from the kill to its exit,
    client output). `connected`: the case's data goes over TCP, so wait first (up to 30 s) until
    the server's session holds its data connection, then `after` seconds more: the kill then
    lands in the measurement however slow the set-up was under load."""
    client = start(["run", server.address] + list(client_args))
    output = None
    try:
        if connected:
            deadline = time.monotonic() + 30
            while not case_data_connected(server.proc.pid) and time.monotonic() < deadline:
                if client.poll() is not None:
                    break
                time.sleep(0.05)
        time.sleep(after)
        if client.poll() is not None:
            output = stop(client)
            raise AssertionError(f"the client ended (exit {client.returncode}) before the server was killed; "
                                 f"its output:\n{output}")
        server.proc.kill()
        killed = time.monotonic()
        client.wait(timeout=60)
        took = time.monotonic() - killed
    finally:
        if output is None:
            output = stop(client)
    return client.returncode, took, output


class Server:
    """`pairperf server` on 127.0.0.1 (or in a namespace via prefix) with its port read from --ready-fd."""

    def __init__(self, *extra, listen="127.0.0.1", prefix=(), env=None):
        self.extra = list(extra)
        self.env = env
        self.listen = listen
        self.prefix = prefix
        self.proc = None
        self.port = None
        self.log = ""

    def __enter__(self):
        r, w = os.pipe()
        args = ["server", "--listen", self.listen, "--port", "0", "--ready-fd", str(w)] + self.extra
        self.proc = subprocess.Popen(list(self.prefix) + [BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, pass_fds=(w,), env=self.env)
        os.close(w)
        try:
            ready, _, _ = select.select([r], [], [], 10)
            if not ready:
                raise RuntimeError("server did not report its port within 10 s")
            self.port = int(os.read(r, 64).decode().strip())
        finally:
            os.close(r)
        return self

    def __exit__(self, *exc):
        self.log = stop(self.proc)

    @property
    def address(self):
        return f"{self.listen}:{self.port}"

    def alive(self):
        return self.proc.poll() is None


def doctor_json(server, *args, prefix=(), env=None, timeout=180):
    """`pairperf doctor SERVER --json FILE` with a 0.1 s probe and noise ignored (the tests using it are
    about interfaces and variables, not noise); returns (CompletedProcess, the report or None)."""
    with tmpdir() as d:
        out = os.path.join(d, "doctor.json")
        proc, _ = run(["doctor", server, "--json", out, "--duration", "0.1s", "--noise-threshold", "100"] + list(args),
                      prefix=prefix, timeout=timeout, env=env)
        return proc, (load(out) if os.path.exists(out) else None)


def clean_env(**extra):
    """This environment without the variables pairperf judges (UCX_*, FI_*, NCCL_*, GLOO_*, the CUDA and
    NVIDIA device lists), plus `extra`: tests then see only what they set."""
    keep = set(filter(None, os.environ.get("PAIRPERF_TEST_KEEP_ENV", "").split(",")))  # scripts/test --tsan
    env = {k: v for k, v in os.environ.items()
           if k in keep or (not k.startswith(("UCX_", "FI_", "NCCL_", "GLOO_")) and k not in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"))}
    env.update(extra)
    return env


def has_transport(name):
    """Whether this pairperf was built with the transport."""
    proc, _ = run(["info", "--json"], timeout=30)
    return name in json.loads(proc.stdout)["tool"]["transports"]


def parse_size(text):
    """A size as pairperf prints it (format_size): 178944K, 512M, 2G, 100."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    return int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)


def frame(obj):
    body = json.dumps(obj).encode() if not isinstance(obj, (bytes, bytearray)) else bytes(obj)
    return struct.pack(">I", len(body)) + body


def read_frame(sock, timeout=5):
    """Reads one control frame; returns the decoded object, or None when the peer closed."""
    sock.settimeout(timeout)
    header = recv_exact(sock, 4)
    if header is None:
        return None
    (n,) = struct.unpack(">I", header)
    body = recv_exact(sock, n)
    return None if body is None else json.loads(body)


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def connect(port, host="127.0.0.1", timeout=5):
    return socket.create_connection((host, port), timeout=timeout)


PROTOCOL = 5  # core/control.h: control_protocol_version


def hello(protocol=PROTOCOL, token=""):
    return {"type": "hello", "protocol": protocol, "token": token, "tool": {"name": "test"}}


def load(path):
    """A JSON file, or a results stream (.jsonl) as the results document it streams."""
    if path.endswith(".jsonl"):
        return documents.read(path)
    with open(path) as f:
        return json.load(f)


def schema_errors(path, as_kind=None):
    """What is wrong with the pairperf document in `path` against its schema, or the export format
    `as_kind` names ([] when valid)."""
    return documents.errors(path, as_kind=as_kind)


def schema_errors_of(doc, name="(output)"):
    """The same for a document already read (a command's stdout)."""
    return documents.errors(name, doc)


def tmpdir():
    return tempfile.TemporaryDirectory(prefix="pairperf-test-")


def mpi_env():
    """LeakSanitizer cannot stop the world inside Open MPI's ranks ("does not work under ptrace"):
    under `scripts/test --sanitize` the MPI tests keep ASan and UBSan but not leak checking (the
    --hosts test, without MPI, keeps it)."""
    env = dict(os.environ)
    if "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    return env


def mpirun():
    """mpirun's command line start for ranks on this host (as root too)."""
    return ["mpirun", "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])


def has_mesh():
    proc, _ = run(["mesh", "--help"], timeout=30)
    return proc.returncode == 0


def softroce_vm_unavailable():
    """Why scripts/softroce-vm cannot boot here ("" when it can): its tools and the rxe provider."""
    for tool in ("qemu-system-x86_64", "cpio", "depmod", "dash", "xz"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup installs the VM's packages)"
    if not glob.glob("/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so"):
        return "the rxe provider is not installed (ibverbs-providers; the VM sets up rxe0 first)"
    return ""


class SoftRoceSuite(unittest.TestCase):
    """A suite script run once in scripts/softroce-vm for the whole class; its JSON results come
    back as self.docs (by file name). Subclasses set SUITE, TIMEOUT, EXTRA_ADDS and EXTRA_MODULES
    (kernel modules the VM loads before the suite, e.g. veth)."""
    SUITE = ""
    TIMEOUT = 500
    EXTRA_ADDS = ()
    EXTRA_MODULES = ()

    @classmethod
    def setUpClass(cls):
        cls.tmp = tmpdir()
        out = os.path.join(cls.tmp.name, "out")
        adds = [a for path in (BIN, *cls.EXTRA_ADDS) for a in ("--add", path)]
        adds += [a for module in cls.EXTRA_MODULES for a in ("--module", module)]
        cls.proc = subprocess.run([os.path.join(SOURCE_DIR, "scripts", "softroce-vm"), "--timeout", str(cls.TIMEOUT), "--out", out]
                                  + adds + ["--", cls.SUITE, BIN], capture_output=True, text=True, timeout=cls.TIMEOUT + 100)
        if cls.proc.returncode == 125 and "apt-get download" in cls.proc.stderr:
            raise unittest.SkipTest(f"the VM's kernel cannot be fetched here: {cls.proc.stderr.strip()}")
        cls.docs = {os.path.basename(p)[:-5]: load(p) for p in glob.glob(os.path.join(out, "*.json"))}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def results(self, name):
        self.assertTrue(name in self.docs, f"no {name}.json came back from the VM:\n" + self.proc.stdout[-3000:] + self.proc.stderr[-2000:])
        return self.docs[name]["results"]


def main():
    """unittest.main, but a run where every test skipped exits with ctest's skip code."""
    prog = unittest.main(exit=False, verbosity=2)
    result = prog.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun > 0 and len(result.skipped) == result.testsRun:
        sys.exit(SKIP)
    sys.exit(0)
