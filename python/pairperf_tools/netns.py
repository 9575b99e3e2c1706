"""Network namespaces made by a test or a tool, and deleted by name when it ends (root).

  Namespaces   namespaces joined by veth links, each end named and addressed: the scenario tests'
               hosts with one or more NICs
  Cluster      a namespace per node behind a switch namespace, for pairperf mesh under Open MPI

Cluster: the switch namespace holds two bridges, management (10.89.0.0/24, the switch has .254;
MPI's own traffic) and data (10.90.0.0/24, pairperf's). Node K is namespace PREFIX+K with mgmt0
10.89.0.K and a data interface 10.90.0.K named eth0 (the misconfigured node's is eth1, as on a
spare server). mpirun runs in the switch namespace and starts ranks through
tests/scenarios/bin/netns-rsh, which maps the management address to the node's namespace and gives
it the hostname nodeK."""
import os
import subprocess

SOURCE_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
RSH = os.path.join(SOURCE_DIR, "tests", "scenarios", "bin", "netns-rsh")


def sh(*args):
    """Runs one ip/tc/iptables command; raises with its stderr when it fails."""
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def unavailable(tag):
    """Why network namespaces cannot be made here (not root, no support), or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    probe = f"pprobe{tag}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        return f"cannot create network namespaces here: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=20)
    return None


def inside(ns, *command):
    """The command prefix that runs `command` in namespace ns."""
    return ("ip", "netns", "exec", ns) + tuple(command)


class Namespaces:
    """Namespaces this object made, deleted (with their veth ends) on close or at the block's end.
    A failure while making them deletes what was made and raises."""

    def __init__(self):
        self.made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def add(self, ns):
        """A new namespace with its loopback up."""
        sh("ip", "netns", "add", ns)
        self.made.append(ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def link(self, a, b, prefix_len=24):
        """A veth pair between two ends, each (namespace, interface name, address or None), made in
        the namespaces directly (so an end may be named eth0 whatever the host has), and up."""
        (ns_a, if_a, _), (ns_b, if_b, _) = a, b
        sh("ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b)
        for ns, name, addr in (a, b):
            if addr:
                sh("ip", "-n", ns, "addr", "add", f"{addr}/{prefix_len}", "dev", name)
            sh("ip", "-n", ns, "link", "set", name, "up")

    def close(self):
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        self.made = []


class Cluster(Namespaces):
    def __init__(self, tag, nodes, bad=None):
        super().__init__()
        self.tag, self.nodes, self.bad = tag, nodes, bad
        self.switch = f"pmS{tag}"
        self.prefix = f"pmN{tag}_"

    def __enter__(self):
        try:
            s = self.add(self.switch)
            for br in ("swm", "swd"):
                sh("ip", "-n", s, "link", "add", br, "type", "bridge")
                sh("ip", "-n", s, "link", "set", br, "up")
            sh("ip", "-n", s, "addr", "add", "10.89.0.254/24", "dev", "swm")
            for k in range(1, self.nodes + 1):
                self.add_node(k)
        except Exception:
            self.close()
            raise
        return self

    def add_node(self, k):
        ns = self.add(f"{self.prefix}{k}")
        data = "eth1" if k == self.bad else "eth0"
        for kind, name, addr in (("m", "mgmt0", f"10.89.0.{k}"), ("d", data, f"10.90.0.{k}")):
            port = f"{kind}{k}x{self.tag}"
            self.link((self.switch, port, None), (ns, name, addr))
            sh("ip", "-n", self.switch, "link", "set", port, "master", f"sw{kind}")

    def mpirun(self, binary, args, hostfile, env_vars=(), timeout=300):
        """Runs `mpirun ... binary args` from the switch namespace, one rank per node."""
        with open(hostfile, "w") as f:
            for k in range(1, self.nodes + 1):
                f.write(f"10.89.0.{k} slots=1\n")
        env = dict(os.environ, PAIRPERF_NETNS_PREFIX=self.prefix)
        if "ASAN_OPTIONS" in env:  # LeakSanitizer cannot run inside Open MPI's ranks
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
        cmd = ["ip", "netns", "exec", self.switch, "mpirun", "--allow-run-as-root", "--hostfile", hostfile,
               "-np", str(self.nodes), "--map-by", "node", "--mca", "plm_rsh_agent", RSH,
               "--mca", "oob_tcp_if_include", "10.89.0.0/24", "--mca", "btl", "self,tcp",
               "--mca", "btl_tcp_if_include", "10.89.0.0/24", "-x", "PATH"]
        for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
            if name in env:
                cmd += ["-x", name]
        for name, value in env_vars:
            env[name] = value
            cmd += ["-x", name]
        return subprocess.run(cmd + [binary] + list(args), capture_output=True, text=True, timeout=timeout, env=env)
