"""UCX end to end: two processes, every test x every transport set this host offers x sizes on
both sides of the eager/rendezvous thresholds, with --validate, and what the provenance says.
ctest runs it on the UCX the loader finds (loopback.ucx: Debian's 1.13) and on UCX 1.22 from the
libucx-cu13 wheel (loopback.ucx_1_22, PAIRPERF_UCX_LIBRARY; skipped, saying so, where the wheel is
not installed); every result must name the UCX that ran."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

TESTS = ["tag_lat", "tag_bw", "tag_bibw", "put_lat", "put_bw", "get_bw", "am_lat", "am_bw"]
SHM = {"posix", "sysv", "cma", "xpmem", "knem"}


def ucx_built():
    proc, _ = pp.run(["info", "--json"], timeout=30)
    return "ucx" in json.loads(proc.stdout)["tool"]["transports"]


WANTED = os.environ.get("PAIRPERF_UCX_LIBRARY")
if WANTED and not os.path.exists(WANTED):
    REASON = f"PAIRPERF_UCX_LIBRARY={WANTED} does not exist (scripts/setup installs the libucx-cu13 wheel there)"
else:
    REASON = None if ucx_built() else "this pairperf was built without UCX"
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
class Ucx(unittest.TestCase):
    def run_ucx(self, server, *args, timeout=300):
        # --iface lo keeps UCX's network lanes on loopback.
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, took = pp.run(["run", server.address, "--json", out, "--transport", "ucx", "--iface", "lo"] + list(args), timeout=timeout)
            return proc, (pp.load(out) if os.path.exists(out) else None), took

    def test_the_ucx_probe_runs_in_a_child_never_in_a_process_that_forks(self):
        """UCX's probe (ucp_init over every transport) initializes CUDA on a GPU host, and a worker
        forked after that cannot use the GPU ("initialization error", the first GPU run). So the
        client and the local server ask it of a spawned child and load no UCX transport module
        themselves: their case workers and sessions (forked, the same pids' children) do."""
        got = pp.traced(["run", "--no-json", "-t", "ucx", "--tls", "tcp", "--test", "tag_lat", "--sizes", "8", "-n", "100",
                         "--ucx", "TCP_SNDBUF=1m"], calls="execve,openat")
        if got is None:
            self.skipTest("strace is not installed (scripts/setup installs it)")
        proc, trace = got
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        lines = trace.splitlines()
        client = lines[0].split()[0]
        server = [l.split()[0] for l in lines if "execve(" in l and '"server"' in l]
        self.assertEqual(len(server), 1, trace[:3000])
        self.assertGreaterEqual(trace.count('["pairperf-ucx-probe"]'), 2, "one probe per side: " + trace[:3000])
        modules = [l for l in lines if "openat(" in l and "/ucx/libuct_" in l and "ENOENT" not in l]
        self.assertTrue(modules, "UCX's modules are loaded somewhere: " + trace[:3000])
        in_forking = [l for l in modules if l.split()[0] in (client, server[0])]
        self.assertEqual(in_forking, [], "UCX initialized in a process that forks workers")

    def test_every_test_and_transport_set_validates_across_thresholds(self):
        # 8 B and 1K are eager; 8K+1 crosses the 8K zero-copy threshold; 256K and 1M are rendezvous.
        with pp.Server() as s:
            proc, doc, _ = self.run_ucx(s, "--test", ",".join(TESTS), "--tls", "tcp", "--tls", "posix,sysv,cma", "--tls", "all",
                                        "--sizes", "8,1K,8193,256K,1M", "-n", "6", "--warmup", "2", "--validate")
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:] + proc.stderr[-2000:])
        results = doc["results"]
        self.assertEqual(len(results), len(TESTS) * 3 * 5)
        for r in results:
            c = r["case"]
            with self.subTest(test=c["test"], tls=c["tls"], size=c["size_bytes"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertGreater(r["validation"]["messages_checked"], 0)
                lanes = {l["transport"] for l in r["provenance"]["lanes"]}
                kinds = {l["kind"] for l in r["provenance"]["lanes"] + r["provenance"]["bulk_lanes"]}
                self.assertTrue(lanes, "every result names its lanes")
                self.assertTrue(r["provenance"]["protocol"], "every result names its protocol")
                if c["tls"] == "tcp":
                    self.assertEqual(lanes, {"tcp"})
                    self.assertEqual(kinds, {"network"}, "the UCX transport classifies its lanes")
                if c["tls"] == "posix,sysv,cma":
                    self.assertNotIn("tcp", lanes)
                    self.assertTrue(lanes <= SHM, lanes)
                    self.assertEqual(kinds, {"shared_memory"})
        # Each side makes a UCX worker once per configuration (transport set x the features a test
        # needs: tags, RMA, active messages) and the validated cases after it reuse it.
        features = {"tag_lat": "tag", "tag_bw": "tag", "tag_bibw": "tag", "am_lat": "am", "am_bw": "am"}
        configurations = {(r["case"]["tls"], features.get(r["case"]["test"], "rma")) for r in results}
        for side in ("client", "server"):
            served = [r["provenance"][side]["worker_cases"] for r in results]
            self.assertEqual(served.count(1), len(configurations), (side, served))
            self.assertEqual(max(served), 15, (side, served))  # 3 tests x 5 sizes of each configuration

    def test_no_thread_of_the_library_competes_with_the_measuring_loop(self):
        # UCX's own threads (its async thread: connection events, keepalive) beside pairperf's busy
        # loop on 2 CPUs: measured 2026-11-28, 0.00 of the wall time in all 72 cases of `-t ucx
        # --sizes 8,64K,1M -d 0.3s` on either side. A loop that woke a library thread per message,
        # or a progress thread of UCX's that spun, would show here.
        with pp.Server() as s:
            proc, doc, _ = self.run_ucx(s, "--test", "tag_lat,tag_bw", "--tls", "tcp", "--tls", "posix,sysv,cma",
                                        "--sizes", "8,1M", "-d", "0.2s", timeout=120)
        self.assertIn(proc.returncode, (0, 4), proc.stdout[-3000:] + proc.stderr[-2000:])  # 4: a busy CI host
        self.assertEqual(len(doc["results"]), 8)
        pp.assert_nothing_beside_the_loop(self, doc["results"])

    def test_rendezvous_threshold_option_changes_the_protocol(self):
        with pp.Server() as s:
            _, plain, _ = self.run_ucx(s, "--test", "tag_lat", "--tls", "tcp", "--sizes", "4K", "-n", "20")
            proc, tuned, _ = self.run_ucx(s, "--test", "tag_lat", "--tls", "tcp", "--sizes", "4K", "-n", "20", "--ucx", "RNDV_THRESH=1K")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # UCX's own words: 1.13's request info abbreviates ("egr", "rndv"), the v2 protocols of
        # 1.16 and later name them ("eager short", "rendezvous fragmented copy-in copy-out").
        self.assertRegex(plain["results"][0]["provenance"]["protocol"], r"\begr\b|\beager\b")
        self.assertRegex(tuned["results"][0]["provenance"]["protocol"], r"\brndv\b|\brendezvous\b")
        # The UCX that ran, by version and file, in the context and in each side's provenance.
        library = tuned["context"]["tool"]["libraries"]["ucx"]
        if WANTED:
            self.assertTrue(os.path.samefile(library["library"], WANTED if WANTED.endswith(".so.0")
                                             else os.path.join(WANTED, "libucp.so.0")), library)
        for side in ("client", "server"):
            prov = tuned["results"][0]["provenance"][side]
            self.assertEqual((prov["ucx_version"], prov["ucx_library"]), (library["version"], library["library"]))
        self.assertEqual(tuned["context"]["config"]["transports"]["ucx"], {"options": ["RNDV_THRESH=1K"]})

    def test_a_ucx_that_cannot_load_skips_its_cases_and_the_rest_runs(self):
        with pp.tmpdir() as d:
            missing, out = os.path.join(d, "libucp.so.0"), os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "tcp,ucx", "--test", "tcp_lat,tag_lat", "--tls", "tcp", "--sizes", "8",
                              "-d", "0.1s", "--json", out], env=pp.clean_env(PAIRPERF_UCX_LIBRARY=missing), timeout=120)
            doc = pp.load(out)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        by = {r["case"]["transport"]: r for r in doc["results"]}
        self.assertEqual(by["tcp"]["status"], "ok", by)
        self.assertEqual(by["ucx"]["status"], "skipped", by)
        self.assertIn(f"UCX cannot be loaded ({missing}: cannot open shared object file", by["ucx"]["message"])
        self.assertIn("error", doc["context"]["tool"]["libraries"]["ucx"])

    def test_transport_this_host_lacks_is_skipped_with_what_it_has(self):
        with pp.Server() as s:
            proc, doc, _ = self.run_ucx(s, "--test", "tag_lat", "--tls", "rc", "--tls", "tcp,cuda_ipc", "--tls", "tcp", "--sizes", "8", "-n", "10")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        by_tls = {r["case"]["tls"]: r for r in doc["results"]}
        for tls, missing in (("rc", "rc"), ("tcp,cuda_ipc", "cuda_ipc")):
            self.assertEqual(by_tls[tls]["status"], "skipped")
            self.assertIn(f"does not offer {missing}", by_tls[tls]["message"])
            self.assertIn("available: ", by_tls[tls]["message"])
            self.assertIn("tcp", by_tls[tls]["message"])
        self.assertEqual(by_tls["tcp"]["status"], "ok")

    def test_bad_ucx_options_are_refused_before_running(self):
        for opt, message in (("NO_SUCH_KNOB=1", "UCX has no option 'NO_SUCH_KNOB'"), ("LOG_LEVEL=info", "whole process"),
                             ("TLS=tcp", "use --tls"), ("RNDV_THRESH", "expected KEY=VALUE")):
            with self.subTest(opt=opt):
                proc, took = pp.run(["run", "--transport", "ucx", "--ucx", opt, "--no-json"], timeout=30)
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertLess(took, 10)

    def test_peer_dying_mid_case_is_an_error_within_the_timeout(self):
        # The bound is the case timeout (4 s) plus slack: UCX over tcp usually notices the closed
        # connection at once, but once (ASan build, loaded machine) it did not and the case ended
        # at its timeout; shared memory always ends there (no peer-failure mode, see docs/transports/ucx.md).
        # A fixed count far beyond what 4 s can move keeps the client measuring until the kill
        # (a time budget would end the case first on a fast machine: the race this test had).
        for tls, bound in (("tcp", 4 + 2), ("posix,sysv,cma", 4 + 2)):
            with self.subTest(tls=tls), pp.Server() as s, pp.tmpdir() as d:
                out = os.path.join(d, "r.json")
                rc, took, output = pp.kill_server_mid_case(s, ["--json", out, "--transport", "ucx", "--iface", "lo", "--test", "tag_bw",
                                                               "--tls", tls, "--sizes", "64K", "-n", "2000000", "--timeout-case", "4s"],
                                                           after=1.5)
                self.assertEqual(rc, 1, output)
                self.assertLess(took, bound, output)
                r = pp.load(out)["results"][0]
                self.assertEqual(r["status"], "error")
                self.assertIn("case 1 measure failed", r["message"])

    def test_expect_checks_the_lanes_really_used(self):
        # transport!=tcp: passes on shared memory, fails on UCX_TLS=tcp (status fail, exit code 3).
        with pp.Server() as s:
            proc, doc, _ = self.run_ucx(s, "--test", "tag_bw", "--tls", "tcp", "--tls", "posix,sysv,cma", "--sizes", "1M", "-n", "50",
                                        "--expect", "transport!=tcp", "--expect", "bw>=1MB/s@1M")
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        by_tls = {r["case"]["tls"]: r for r in doc["results"]}
        tcp, shm = by_tls["tcp"], by_tls["posix,sysv,cma"]
        self.assertEqual(tcp["status"], "fail")
        self.assertFalse(tcp["verdict"]["pass"])
        self.assertEqual(len(tcp["verdict"]["checks"]), 2)
        failed = [c for c in tcp["verdict"]["checks"] if not c["pass"]]
        self.assertEqual(failed[0]["expect"], "transport!=tcp")
        self.assertIn("tcp/lo", failed[0]["seen"])
        self.assertEqual(shm["status"], "ok")
        self.assertTrue(shm["verdict"]["pass"])
        proc, _ = pp.run(["run", "--transport", "ucx", "--sizes", "8", "--expect", "bw>=1GB/s@1M", "--no-json"], timeout=30)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("no case of this run can be checked", proc.stderr)

    def test_done_when_command_names_lanes_and_protocol_everywhere(self):
        with pp.Server() as s:
            proc, doc, _ = self.run_ucx(s, "--test", "tag_lat,tag_bw,put_bw", "--tls", "tcp", "--tls", "posix,sysv,cma", "--sizes", "8:4M",
                                        "--duration", "20ms", "--min-iterations", "4")
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        self.assertEqual(len(doc["results"]), 3 * 2 * 20)
        for r in doc["results"]:
            self.assertEqual(r["status"], "ok", r.get("message"))
            self.assertTrue(r["provenance"]["lanes"])
            self.assertTrue(r["provenance"]["protocol"])
            self.assertIn("lanes", r["provenance"]["client"])
            self.assertIn("lanes", r["provenance"]["server"])

    def test_lanes_are_the_protocol_ucx_selected_for_the_operation_and_size(self):
        # UCX 1.16+ prints its protocol table for each send operation (ucp_ep_print_info) and names the
        # selected protocol in each request: the result's lanes are that row's config, read here from
        # UCX's own lines. UCX 1.13 has neither: its lanes are the endpoint's.
        with pp.Server() as s:
            proc, doc, _ = self.run_ucx(s, "--test", "tag_bw,am_bw,put_bw", "--tls", "tcp", "--tls", "posix,sysv,cma",
                                        "--sizes", "8,64K,1M", "-n", "20")
        self.assertIn(proc.returncode, (0, 4), proc.stderr[-2000:])
        version = tuple(int(x) for x in doc["context"]["tool"]["libraries"]["ucx"]["version"].split(".")[:2])
        for r in doc["results"]:
            p, c = r["provenance"], r["provenance"]["client"]
            lanes = [f"{l['transport']}/{l['device']}" for l in p["lanes"]]
            if version < (1, 16):
                self.assertEqual(c["lanes_from"], "endpoint configuration", r["case"])
                continue
            if r["case"]["test"] == "put_bw":  # its table is the worker's: the request says it
                self.assertEqual(c["lanes_from"], "ucx request", r["case"])
                self.assertIn(f"length {r['case']['size_bytes']} {p['protocol']} {lanes[0]}", c["request_info"])
                continue
            self.assertEqual(c["lanes_from"], "ucx protocol table", r["case"])
            row = table_row(c["ep_info"], c["protocol_selection"]["operation"], r["case"]["size_bytes"])
            self.assertEqual(row[1].removeprefix("(?) "), p["protocol"], r["case"])
            self.assertEqual(lanes, row[2].split(), r["case"])
            want = "cma/memory" if r["case"]["tls"] != "tcp" and r["case"]["size_bytes"] == 1 << 20 else None
            if want:
                self.assertEqual(lanes, [want], r["case"])

    def test_two_ucx_minor_versions_are_the_finding_not_an_interface(self):
        # The system UCX (1.13.1) here, UCX 1.22.0 on the server. Measured: every case fails in
        # ucp_ep_rkey_unpack; `run` says why before its first case, and doctor names the versions as the
        # finding, with the probes that failed as its evidence, instead of blaming UCX_NET_DEVICES or the path.
        peer = os.environ.get("PAIRPERF_UCX_PEER_LIBRARY", "")
        if WANTED or not os.path.exists(peer):
            self.skipTest("needs the system UCX here and PAIRPERF_UCX_PEER_LIBRARY (UCX 1.22 from scripts/setup) "
                          f"for the server (PAIRPERF_UCX_LIBRARY={WANTED}, PAIRPERF_UCX_PEER_LIBRARY={peer or 'unset'})")
        with pp.Server(env=dict(os.environ, PAIRPERF_UCX_LIBRARY=peer)) as s:
            proc, doc, _ = self.run_ucx(s, "--test", "tag_lat", "--tls", "tcp", "--tls", "posix,sysv,cma", "--sizes", "8",
                                        "-n", "10", timeout=120)
            dproc, _ = pp.run(["doctor", s.address, "--json", "-"], timeout=300)
        mine = doc["context"]["tool"]["libraries"]["ucx"]["version"]
        theirs = doc["context"]["server_tool"]["libraries"]["ucx"]["version"]
        self.assertNotEqual(mine.split(".")[:2], theirs.split(".")[:2], (mine, theirs))
        said = doc["context"]["library_mismatch"]["ucx"]
        for v in (mine, theirs):
            self.assertIn(f"UCX {v} (", said["problem"])
        self.assertIn("warning: ucx: the client loads UCX", proc.stderr)
        self.assertIn("PAIRPERF_UCX_LIBRARY", said["fix"])
        # What the message claims was measured, measured again: every case fails, UCX's error named, and
        # each says the versions differ (over tcp, 1.13 cannot read 1.22's address: "unreachable").
        by_tls = {r["case"]["tls"]: r for r in doc["results"]}
        self.assertEqual(by_tls["tcp"]["status"], "unreachable", by_tls)
        self.assertEqual(by_tls["posix,sysv,cma"]["status"], "error", by_tls)
        self.assertIn("ucp_ep_rkey_unpack: Unsupported operation", by_tls["posix,sysv,cma"]["message"])
        for r in doc["results"]:
            self.assertIn(f"the client's ucx library is version {mine} and the server's {theirs}", r["message"])
        self.assertEqual(proc.returncode, 1, proc.stderr[-2000:])
        report = json.loads(dproc.stdout)
        self.assertEqual(dproc.returncode, 3, dproc.stderr[-2000:])
        versions = [f for f in report["findings"] if f["subject"] == "ucx version"]
        self.assertEqual(len(versions), 1, report["findings"])
        self.assertEqual(versions[0]["severity"], "fails")
        self.assertIn("probe(s) failed", versions[0]["problem"])
        self.assertIn("Unsupported operation", versions[0]["problem"])
        blamed = [f for f in report["findings"] if f["subject"].startswith("UCX_") or f["subject"] == "path"]
        self.assertEqual(blamed, [], report["findings"])


def table_row(ep_info, operation, size):
    """The (range, description, config) row for `size` of the table titled `operation` in UCX's own
    ucp_ep_print_info lines."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

    def number(t):
        return float("inf") if t == "inf" else int(t[:-1]) * units[t[-1]] if t[-1] in units else int(t)

    inside = False
    for line in ep_info:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) in (1, 2) and cells[-1] == operation:
            inside = True
        elif inside and len(cells) == 3 and cells[0] != "Range":
            lo, _, hi = cells[0].partition("..")
            if number(lo) <= size <= number(hi or lo):
                return cells
    raise AssertionError(f"no row for {size} in the table {operation!r}")


if __name__ == "__main__":
    pp.main()
