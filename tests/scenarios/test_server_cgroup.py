"""A server under a memory cgroup limit (a DaemonSet's pod limit): its default --max-case-memory
follows what the cgroup still allows, not the host's MemAvailable, so a case too large for the
pod is refused with the reason instead of getting the server OOM-killed.

Needs root and a memory cgroup hierarchy this process may create a child in (cgroup v1's memory
controller, or v2 with memory among its cgroup's controllers); elsewhere it skips, saying why."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

LIMIT = 700 << 20


def memory_cgroup():
    """(folder of this process's memory cgroup, limit file, v) or (None, reason)."""
    if os.geteuid() != 0:
        return None, "needs root to create a cgroup"
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for hid, controllers, path in lines:
        if "memory" in controllers.split(","):
            d = "/sys/fs/cgroup/memory" + path
            if os.path.isfile(os.path.join(d, "memory.limit_in_bytes")):
                return (d, "memory.limit_in_bytes"), None
    for hid, controllers, path in lines:
        if hid == "0" and controllers == "":
            d = "/sys/fs/cgroup" + path
            try:
                with open(os.path.join(d, "cgroup.subtree_control")) as f:
                    if "memory" in f.read().split():
                        return (d, "memory.max"), None
            except OSError:
                pass
    return None, "no memory cgroup controller this process may create a child in"


FOUND, REASON = memory_cgroup()
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
class ServerInAMemoryCgroup(unittest.TestCase):
    def setUp(self):
        parent, self.limit_file = FOUND
        self.dir = os.path.join(parent, f"pairperf-test-{os.getpid()}")
        os.mkdir(self.dir)
        self.addCleanup(os.rmdir, self.dir)
        with open(os.path.join(self.dir, self.limit_file), "w") as f:
            f.write(str(LIMIT))

    def test_the_default_case_memory_follows_the_cgroup_and_a_large_case_is_refused(self):
        enter = ["sh", "-c", f'echo $$ > {self.dir}/cgroup.procs && exec "$@"', "sh"]
        with pp.Server(prefix=enter) as s:
            big, _ = pp.run(["run", s.address, "--no-json", "--sizes", "512M", "-n", "10", "--test", "tcp_bw"],
                            timeout=60)
            small, _ = pp.run(["run", s.address, "--no-json", "--sizes", "8", "-n", "100", "--test", "tcp_lat"],
                              timeout=60)
            alive = s.alive()
        # Host-wide MemAvailable / 4 would have let 2 x 512 MiB in, and the cgroup would kill the server.
        self.assertEqual(big.returncode, 1, big.stdout + big.stderr + s.log)
        self.assertIn("more than it allows (--max-case-memory", big.stdout, s.log)
        self.assertEqual(small.returncode, 0, small.stdout + small.stderr + s.log)
        self.assertTrue(alive, s.log)
        limit_line = [line for line in s.log.splitlines() if "limits per case: memory" in line]
        self.assertEqual(len(limit_line), 1, s.log)
        allowed = pp.parse_size(limit_line[0].split("limits per case: memory ")[1].split(",")[0])
        self.assertLessEqual(allowed, LIMIT // 4, limit_line[0])


if __name__ == "__main__":
    pp.main()
