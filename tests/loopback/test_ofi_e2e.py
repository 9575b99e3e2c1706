"""libfabric (OFI) end to end: two processes, every test of the table on every provider this
host offers for RDM endpoints (tcp;ofi_rxm and shm at four sizes; net, net;ofi_rxm, sockets and
udp;ofi_rxd at two), with --validate; the provider axis and its defaults; a provider the host
lacks as skipped cases; the transport's own option (--ofi-inject) reaching the server; the peer's
endpoint name checked; a peer that dies mid-case; and doctor judging FI_PROVIDER against each
side's libfabric."""
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

TESTS = ["fi_tag_lat", "fi_tag_bw", "fi_tag_bibw", "fi_write_lat", "fi_write_bw", "fi_read_lat", "fi_read_bw"]


def rdm_providers():
    proc, _ = pp.run(["info", "--json"], timeout=30, env=pp.clean_env())
    info = json.loads(proc.stdout)
    if "ofi" not in info["tool"]["transports"]:
        return None
    return {p["provider"] for p in info["tool"]["libraries"]["ofi"]["providers"] if p["tagged"]}


PROVIDERS = rdm_providers()
REASON = None
if PROVIDERS is None:
    REASON = "this pairperf was built without libfabric (PAIRPERF_WITH_OFI)"
elif not {"tcp;ofi_rxm", "shm"} <= PROVIDERS:
    REASON = f"this host's libfabric lacks tcp;ofi_rxm or shm for RDM endpoints (it has: {sorted(PROVIDERS)})"
if REASON:
    print(f"SKIP: {REASON}", flush=True)


@unittest.skipIf(REASON is not None, REASON or "")
def shm_regions_of_dead_processes():
    """/dev/shm files of pairperf's shared-memory regions whose process is gone: a process killed
    with SIGKILL (the peer-dying test's server) cannot remove its own."""
    out = []
    for name in os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []:
        m = re.match(r"pairperf-(\d+)-", name)
        if m and not os.path.exists(f"/proc/{m.group(1)}"):
            out.append(os.path.join("/dev/shm", name))
    return out


class Ofi(unittest.TestCase):
    @classmethod
    def tearDownClass(cls):
        for path in shm_regions_of_dead_processes():
            os.unlink(path)
    def run_ofi(self, server, *args, env=None, timeout=300):
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, took = pp.run(["run", server.address, "--json", out, "--transport", "ofi", "--iface", "lo"] + list(args),
                                timeout=timeout, env=env or pp.clean_env())
            doc = pp.load(out) if os.path.exists(out) else None
            if doc is not None:
                self.assertEqual(pp.schema_errors(out), [])
            return proc, doc, took

    def test_every_test_and_provider_validates(self):
        # 8 B is injected; 4K+1 is past shm's inject size; 256K and 1M go by rendezvous (rxm, shm).
        with pp.Server(env=pp.clean_env()) as s:
            proc, doc, _ = self.run_ofi(s, "--test", ",".join(TESTS), "--ofi-provider", "tcp;ofi_rxm", "--ofi-provider", "shm",
                                        "--sizes", "8,4097,256K,1M", "-n", "6", "--warmup", "2", "--validate")
        # On failure, the cases that did not end ok with their messages (the table's tail may not hold them).
        not_ok = [(r["case"]["index"] + 1, r["case"]["test"], r["case"].get("tls"), r["case"]["size_bytes"], r["status"],
                   r.get("message")) for r in (doc or {}).get("results", []) if r["status"] != "ok"]
        self.assertEqual(proc.returncode, 0, f"not ok: {not_ok}\n" + proc.stdout[-3000:] + proc.stderr[-2000:])
        results = doc["results"]
        self.assertEqual(len(results), len(TESTS) * 2 * 4)
        for r in results:
            c = r["case"]
            with self.subTest(test=c["test"], provider=c["tls"], size=c["size_bytes"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                self.assertGreater(r["validation"]["messages_checked"], 0)
                p = r["provenance"]
                self.assertEqual(len(p["lanes"]), 1, p["lanes"])
                lane = p["lanes"][0]
                self.assertEqual(lane["transport"], c["tls"])
                self.assertIn("RDM", p["protocol"])
                for side in ("client", "server"):
                    self.assertEqual(p[side]["provider"], c["tls"])
                    self.assertEqual(p[side]["endpoint_type"], "FI_EP_RDM")
                    for key in ("fabric", "domain", "mr_mode", "progress", "protocol", "source", "destination"):
                        self.assertIn(key, p[side])
                    self.assertGreater(p[side]["max_message_bytes"], 0)
                self.assertEqual(p["client"]["destination"], p["server"]["source"], "each side names the other's address")
                if c["tls"] == "tcp;ofi_rxm":
                    self.assertEqual((lane["device"], lane["kind"]), ("lo", "network"))
                    self.assertTrue(p["client"]["source"].startswith("fi_sockaddr_in://127.0.0.1:"), p["client"])
                else:
                    self.assertEqual((lane["device"], lane["kind"]), ("shm", "shared_memory"))
                    self.assertIn("does not apply", p["client"]["source_chosen_by"])

    def test_no_thread_of_the_library_competes_with_the_measuring_loop(self):
        # libfabric's own threads beside pairperf's busy loop on 2 CPUs (rxm and shm progress
        # manually here; a provider with auto progress runs a thread): measured 2026-11-28, 0.00 of
        # the wall time in all 48 cases of `-t ofi --sizes 8,64K,1M -d 0.3s` on either side.
        with pp.Server(env=pp.clean_env()) as s:
            proc, doc, _ = self.run_ofi(s, "--test", "fi_tag_lat,fi_tag_bw", "--ofi-provider", "tcp;ofi_rxm",
                                        "--ofi-provider", "shm", "--sizes", "8,1M", "-d", "0.2s", timeout=120)
        self.assertIn(proc.returncode, (0, 4), proc.stdout[-3000:] + proc.stderr[-2000:])  # 4: a busy CI host
        self.assertEqual(len(doc["results"]), 8)
        pp.assert_nothing_beside_the_loop(self, doc["results"])

    def test_the_provider_axis_defaults_and_follows_fi_provider(self):
        # A local run (pairperf starts its own server): one network and one shared-memory provider.
        with pp.tmpdir() as d:
            out = os.path.join(d, "r.json")
            proc, _ = pp.run(["run", "-t", "ofi", "--test", "fi_tag_lat", "--sizes", "8", "-n", "20", "--json", out],
                             timeout=120, env=pp.clean_env())
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertEqual([r["case"]["tls"] for r in pp.load(out)["results"]], ["tcp;ofi_rxm", "shm"])
        with pp.Server(env=pp.clean_env()) as s:
            # Against a server: every provider whose endpoints leave the host (shm does not).
            proc, doc, _ = self.run_ofi(s, "--test", "fi_tag_lat", "--sizes", "8", "-n", "20")
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            axis = [r["case"]["tls"] for r in doc["results"]]
            self.assertIn("tcp;ofi_rxm", axis)
            self.assertNotIn("shm", axis)
            self.assertEqual(set(axis), {p for p in PROVIDERS if p != "shm"})
            # FI_PROVIDER on the client names the axis, as UCX_TLS does for UCX.
            proc, doc, _ = self.run_ofi(s, "--test", "fi_tag_lat", "--sizes", "8", "-n", "20", env=pp.clean_env(FI_PROVIDER="shm"))
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertEqual([r["case"]["tls"] for r in doc["results"]], ["shm"])
            self.assertEqual(doc["results"][0]["status"], "ok")
            self.assertEqual(doc["context"]["env"]["client"].get("FI_PROVIDER"), "shm", "FI_ variables are recorded")

    def test_every_other_provider_here_validates(self):
        others = sorted(PROVIDERS - {"tcp;ofi_rxm", "shm"})
        if not others:
            self.skipTest("this host's libfabric has no RDM provider beyond tcp;ofi_rxm and shm")
        args = ["--sizes", "8,64K", "-n", "20", "--warmup", "2", "--validate", "--timeout-case", "30s"]
        for p in others:
            args += ["--ofi-provider", p]
        with pp.Server(env=pp.clean_env()) as s:
            proc, doc, _ = self.run_ofi(s, *args, timeout=500)
        # What did not pass, whole (the table's tail may not reach it), and the server's log.
        not_ok = [r for r in (doc or {}).get("results", []) if r["status"] != "ok"]
        self.assertEqual(proc.returncode, 0, json.dumps([{"case": r["case"], "status": r["status"], "message": r.get("message")}
                                                         for r in not_ok], indent=1)
                         + proc.stdout[-3000:] + proc.stderr[-2000:] + "\nserver:\n" + s.log[-3000:])
        self.assertEqual({r["case"]["tls"] for r in doc["results"]}, set(others))
        for r in doc["results"]:
            c = r["case"]
            with self.subTest(test=c["test"], provider=c["tls"], size=c["size_bytes"]):
                self.assertEqual(r["status"], "ok", r.get("message"))
                self.assertEqual(r["validation"]["corrupt_bytes"], 0)
                inject = r["provenance"]["client"]["inject"]
                if "ofi_rxd" in c["tls"]:
                    # rxd's inject path loses messages in libfabric 1.17: pairperf sends with completions.
                    self.assertTrue(inject.startswith("off: ofi_rxd loses injected messages"), inject)
                else:
                    self.assertTrue(inject.startswith("fi_tinject up to"), inject)
        # FI_INJECT with completions (the default where fi_tinject was not seen to work) on every
        # provider here but rxd; fi_tinject, their default, ran above.
        with pp.Server(env=pp.clean_env()) as s:
            proc, doc, _ = self.run_ofi(s, "--ofi-inject", "flag", "--test", "fi_tag_lat,fi_tag_bw,fi_tag_bibw", "--sizes", "8",
                                        "-n", "200", "--validate", "--timeout-case", "30s",
                                        *[a for p in sorted(PROVIDERS - {"udp;ofi_rxd"}) for a in ("--ofi-provider", p)])
        self.assertEqual(proc.returncode, 0, proc.stdout[-3000:] + proc.stderr[-2000:])
        for r in doc["results"]:
            self.assertEqual(r["status"], "ok", (r["case"], r.get("message")))
            self.assertTrue(r["provenance"]["client"]["inject"].startswith("FI_INJECT with a completion up to"),
                            r["provenance"]["client"]["inject"])

    def test_a_provider_this_host_lacks_is_skipped_naming_those_it_has(self):
        with pp.Server(env=pp.clean_env()) as s:
            proc, doc, _ = self.run_ofi(s, "--test", "fi_tag_lat,fi_write_bw", "--ofi-provider", "efa", "--sizes", "8", "-n", "10")
        self.assertEqual(proc.returncode, 4, "every case skipped: nothing judged\n" + proc.stdout + proc.stderr)
        for r in doc["results"]:
            self.assertEqual(r["status"], "skipped")
            self.assertIn("'efa' on this host offers no RDM endpoint", r["message"])
            self.assertIn("tcp;ofi_rxm", r["message"], "the providers this host has are named")

    def test_injection_is_an_option_of_the_transport(self):
        with pp.Server(env=pp.clean_env()) as s:
            proc, doc, _ = self.run_ofi(s, "--test", "fi_tag_lat,fi_tag_bw", "--ofi-provider", "tcp;ofi_rxm", "--ofi-inject", "off",
                                        "--sizes", "8", "-n", "200", "--validate")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(doc["context"]["config"]["transports"]["ofi"], {"inject": "off"})
        for r in doc["results"]:
            self.assertEqual(r["status"], "ok", r.get("message"))
            for side in ("client", "server"):  # the server took it from the client's options
                self.assertEqual(r["provenance"][side]["inject"], "off: --ofi-inject off")

    def test_bad_provider_names_are_refused_before_running(self):
        for bad in ("tcp;", "tcp ofi_rxm", "a" * 65):
            with self.subTest(provider=bad):
                proc, _ = pp.run(["run", "--transport", "ofi", "--ofi-provider", bad, "--sizes", "8"], timeout=30, env=pp.clean_env())
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                self.assertIn("provider", proc.stderr)
        proc, _ = pp.run(["run", "--transport", "tcp", "--ofi-provider", "shm", "--sizes", "8"], timeout=30, env=pp.clean_env())
        self.assertEqual(proc.returncode, 2, "--ofi-provider without an ofi case is a usage error")
        proc, _ = pp.run(["run", "--transport", "ofi", "--ofi-inject", "on", "--sizes", "8"], timeout=30, env=pp.clean_env())
        self.assertEqual(proc.returncode, 2, proc.stderr)

    def test_mismatched_providers_are_an_error_naming_both(self):
        # FI_PROVIDER differs between the sides and the axis is libfabric's own choice: the peer's
        # endpoint name is refused before libfabric sees it, naming both providers.
        with pp.Server(env=pp.clean_env(FI_PROVIDER="shm")) as s:
            proc, doc, took = self.run_ofi(s, "--test", "fi_tag_lat", "--sizes", "8", "-n", "10", "--ofi-provider", "",
                                           env=pp.clean_env(FI_PROVIDER="tcp"))
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        r = doc["results"][0]
        self.assertIn(r["status"], ("error", "unreachable"))
        self.assertIn("'shm'", r["message"])
        self.assertIn("'tcp;ofi_rxm'", r["message"])
        self.assertLess(took, 30)

    def test_peer_dying_mid_case_is_an_error_within_the_timeout(self):
        for provider in ("tcp;ofi_rxm", "shm"):
            with self.subTest(provider=provider), pp.Server(env=pp.clean_env()) as s, pp.tmpdir() as d:
                out = os.path.join(d, "r.json")
                rc, took, output = pp.kill_server_mid_case(s, ["--json", out, "--transport", "ofi", "--iface", "lo", "--test", "fi_tag_bw",
                                                               "--ofi-provider", provider, "--sizes", "64K", "-n", "2000000",
                                                               "--timeout-case", "4s"],
                                                            after=0.5 if provider != "shm" else 1.5,
                                                            connected=provider != "shm")
                self.assertEqual(rc, 1, output)
                self.assertLess(took, 4 + 3, output)
                r = pp.load(out)["results"][0]
                self.assertIn(r["status"], ("error", "unreachable"), r)
                self.assertIn("case 1", r["message"])

    def test_shm_regions_are_not_named_after_the_pid(self):
        # libfabric's shm names its /dev/shm file after the process by default ("<pid>:<uid>:<n>"): a
        # file left by a killed process made a later process of the same pid fail fi_enable with
        # EBUSY once the pids came round (CI: "fi_enable: Device or resource busy"). pairperf names
        # each region itself, unique to the process, the moment and the endpoint.
        if shutil.which("strace") is None:
            self.skipTest("strace is not installed (scripts/setup installs it)")
        proc, trace = pp.traced(["run", "--no-json", "-t", "ofi", "--ofi-provider", "shm", "--test", "fi_tag_lat",
                                 "--sizes", "8", "-n", "100"], calls="openat")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        created = re.findall(r'openat\(AT_FDCWD, "/dev/shm/([^"]+)", [^)]*O_CREAT[^)]*O_EXCL', trace)
        self.assertEqual(len(created), 2, trace[-3000:])  # one region a side
        for name in created:
            self.assertRegex(name, r"^pairperf-\d+-[0-9a-f]+-\d+:\d+:\d+$")
        self.assertEqual(len(set(created)), 2)

    def test_a_run_without_ofi_cases_never_probes_libfabric(self):
        # Loading libfabric costs 0.3 s a process (the constructors of the psm libraries it links
        # sleep 0.2 s, its providers read /proc/kallsyms): a local run of other transports leaves
        # its discovery out, on the client and on the local server alike.
        if shutil.which("strace") is None:
            self.skipTest("strace is not installed (scripts/setup installs it)")

        def executed(args):
            proc, trace = pp.traced(["run", "--no-json", "--sizes", "8", "-n", "100"] + args)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertIn('"server"', trace, "the local server's start is traced too")
            return trace

        trace = executed(["-t", "tcp", "--test", "tcp_lat"])
        self.assertNotIn("pairperf-ofi-discovery", trace)
        # The trace would show it: an OFI run asks its child on each side.
        trace = executed(["-t", "ofi", "--ofi-provider", "tcp;ofi_rxm", "--test", "fi_tag_lat"])
        self.assertEqual(trace.count('["pairperf-ofi-discovery"]'), 2, trace)

    def test_doctor_judges_fi_provider_against_each_sides_libfabric(self):
        # EFA absent: FI_PROVIDER=efa on the server names a provider its libfabric lacks.
        with pp.Server(env=pp.clean_env(FI_PROVIDER="efa")) as s, pp.tmpdir() as d:
            out = os.path.join(d, "doctor.json")
            proc, _ = pp.run(["doctor", s.address, "--json", out, "--no-ucx", "--duration", "0.1s", "--noise-threshold", "100"],
                             timeout=120, env=pp.clean_env(FI_PROVIDER="efa"))
            doc = pp.load(out)
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        found = [f for f in doc["findings"] if f["subject"] == "FI_PROVIDER"]
        self.assertEqual({f["side"] for f in found}, {"client", "server"}, doc["findings"])
        self.assertIn("efa", found[0]["problem"])
        self.assertIn("tcp;ofi_rxm", found[0]["problem"], "what the side's libfabric has is named")
        self.assertEqual(doc["server"]["variables"]["FI_PROVIDER"], "efa")


if __name__ == "__main__":
    pp.main()
