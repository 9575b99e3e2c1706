"""A cluster of network namespaces as nodes, for pairperf mesh under Open MPI.

A switch namespace holds two bridges: management (10.89.0.0/24, the switch has .254; MPI's own
traffic) and data (10.90.0.0/24, pairperf's). Node K is namespace PREFIX+K with mgmt0 10.89.0.K and
a data interface 10.90.0.K named eth0 (the misconfigured node's is eth1, as on a spare server).
mpirun runs in the switch namespace and starts ranks through tests/scenarios/bin/netns-rsh, which
maps the management address to the node's namespace and gives it the hostname nodeK.
Everything is created by the caller and torn down by close(), by name."""
import os
import subprocess

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RSH = os.path.join(SOURCE_DIR, "tests", "scenarios", "bin", "netns-rsh")


def sh(*args):
    subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=20)


class Cluster:
    def __init__(self, tag, nodes, bad=None):
        self.tag, self.nodes, self.bad = tag, nodes, bad
        self.switch = f"pmS{tag}"
        self.prefix = f"pmN{tag}_"
        self.made = []

    def __enter__(self):
        try:
            s = self.switch
            sh("ip", "netns", "add", s)
            self.made.append(s)
            sh("ip", "-n", s, "link", "set", "lo", "up")
            for br in ("swm", "swd"):
                sh("ip", "-n", s, "link", "add", br, "type", "bridge")
                sh("ip", "-n", s, "link", "set", br, "up")
            sh("ip", "-n", s, "addr", "add", "10.89.0.254/24", "dev", "swm")
            for k in range(1, self.nodes + 1):
                ns = f"{self.prefix}{k}"
                sh("ip", "netns", "add", ns)
                self.made.append(ns)
                sh("ip", "-n", ns, "link", "set", "lo", "up")
                for kind in ("m", "d"):
                    outer, inner = f"{kind}{k}x{self.tag}", f"q{kind}{k}x{self.tag}"
                    sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
                    sh("ip", "link", "set", inner, "netns", ns)
                    sh("ip", "link", "set", outer, "netns", s)
                    sh("ip", "-n", s, "link", "set", outer, "master", f"sw{kind}")
                    sh("ip", "-n", s, "link", "set", outer, "up")
                data = "eth1" if k == self.bad else "eth0"
                sh("ip", "-n", ns, "link", "set", f"qm{k}x{self.tag}", "name", "mgmt0")
                sh("ip", "-n", ns, "link", "set", f"qd{k}x{self.tag}", "name", data)
                sh("ip", "-n", ns, "addr", "add", f"10.89.0.{k}/24", "dev", "mgmt0")
                sh("ip", "-n", ns, "addr", "add", f"10.90.0.{k}/24", "dev", data)
                sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
                sh("ip", "-n", ns, "link", "set", data, "up")
        except Exception:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        self.made = []

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
