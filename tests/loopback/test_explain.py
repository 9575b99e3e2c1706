"""`pairperf explain` on logs of real failures, as a user runs it (no root, no network):

- tests/fixtures/explain/recorded/: logs the real programs wrote when they failed between network
  namespaces (tests/scenarios/bin/record_failure_logs.py: torch.distributed on gloo, ucx_perftest,
  fi_pingpong, pairperf; scenarios.explain records them again and checks the live ones the same way);
- tests/fixtures/explain/source/: logs of what cannot run here (NCCL, UCX between GPU pods), each
  line from the library's own message format, named with its file and version in its manifest,
  and the four lines the explain issue quotes.

Each case: the signatures found are the manifest's (and at most those it says a line may add), the exit code is the contract's, no
line is left unexplained, the JSON validates; and every signature of the catalog is met by some
log. Then bad input: unreadable logs and broken catalogs give exit 2 with the reason."""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

sys.path.insert(0, os.path.join(pp.SOURCE_DIR, "python"))
from pairperf_tools import explain_study  # noqa: E402

FIXTURES = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "explain")
CATALOG = os.path.join(pp.SOURCE_DIR, "diagnose", "explain-catalog.json")


def explain(*args, stdin=None, env=None):
    """Runs explain with --json - ; returns (exit code, the document or None, stderr)."""
    r = subprocess.run([pp.BIN, "explain", "--json", "-"] + list(args), capture_output=True, text=True,
                       timeout=60, input=stdin, env=env)
    doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None
    return r.returncode, doc, r.stderr


def cases(kind):
    with open(os.path.join(FIXTURES, kind, "manifest.json")) as f:
        manifest = json.load(f)
    for name, case in manifest["cases"].items():
        yield name, case, [os.path.join(FIXTURES, kind, name, log) for log in case["logs"]]


class ExplainsRealLogs(unittest.TestCase):
    seen = set()  # signature ids met by any fixture (the coverage test reads it)

    def check_cases(self, kind):
        for name, case, logs in cases(kind):
            with self.subTest(case=name):
                code, doc, err = explain(*logs)
                self.assertIsNotNone(doc, err)
                ids = [d["id"] for d in doc["diagnoses"]]
                shown = f"{kind}/{name}: exit {code}, diagnoses {ids}, unexplained {doc['unexplained']}"
                print(shown, flush=True)
                self.assertLessEqual(set(case["expect"]), set(ids), shown)
                self.assertLessEqual(set(ids), set(case["expect"]) | set(case.get("may_also", [])), shown)
                self.assertEqual(code, case["explain_exit"], shown)
                self.assertEqual(doc["outcome"]["exit_code"], code)
                self.assertEqual(doc["unexplained"], [], shown)
                self.assertEqual(pp.schema_errors_of(doc), [])
                for fact in case.get("facts", []):
                    self.assertIn(fact, [f["kind"] for f in doc["facts"]], shown)
                if "verdict_class" in case:
                    self.assertEqual((doc["verdict"] or {}).get("class"), case["verdict_class"], shown)
                for d in doc["diagnoses"]:
                    self.assertTrue(d["meaning"] and "{" not in d["meaning"], d)
                    for ev in d["evidence"]:
                        with open(os.path.join(os.path.dirname(logs[0]), os.path.basename(ev["log"]))) as f:
                            self.assertEqual(f.read().splitlines()[ev["line"] - 1].strip()[:2048], ev["text"])
                ExplainsRealLogs.seen.update(ids)
                ExplainsRealLogs.seen.update(c["id"] for c in doc["context_lines"])

    def test_1_recorded_logs_of_the_real_programs(self):
        self.check_cases("recorded")

    def test_2_logs_from_the_libraries_source_formats(self):
        self.check_cases("source")

    def test_2b_real_logs_from_public_threads(self):
        """The corpus of logs copied from public issue threads (tests/fixtures/explain/real), run
        as scripts/explain-study runs it: the tuning part must not fall below the floor it
        reached (real/floor.json); the held-out part is printed, never asserted on, so nobody
        tunes on it. Every answer validates and quotes its lines as the logs print them."""
        cases = explain_study.load_corpus(explain_study.CORPUS)
        results, docs = explain_study.study(pp.BIN, cases)
        parts = explain_study.tally(results)
        explain_study.print_table(parts, sys.stdout)
        for case, row, doc in zip(cases, results, docs):
            with self.subTest(case=case["id"]):
                self.assertIsNotNone(doc, row)
                self.assertEqual(pp.schema_errors_of(doc), [], case["id"])
                for d in doc["diagnoses"]:
                    for ev in d["evidence"]:
                        with open(ev["log"]) as f:
                            self.assertEqual(f.read().splitlines()[ev["line"] - 1].strip()[:2048], ev["text"])
                ExplainsRealLogs.seen.update(d["id"] for d in doc["diagnoses"])
                ExplainsRealLogs.seen.update(c["id"] for c in doc["context_lines"])
        with open(os.path.join(explain_study.CORPUS, "floor.json")) as f:
            floor = json.load(f)
        misses = explain_study.check_floor(parts["tuning"], floor)
        for r in results:
            if r["part"] == "tuning" and r["outcome"] not in ("right", "quiet"):
                print(f"  [tuning] {r['id']}: {r['class']} -> {(r['verdict'] or {}).get('class', '-')} "
                      f"(exit {r['exit']}): {r['outcome']}")
        self.assertEqual(misses, [], "the tuning part fell below its floor")

    def test_3_every_signature_has_a_test_log(self):
        if not {"gloo.connect_timeout", "nccl.socket_start_connect"} <= self.seen:
            self.skipTest("runs after the fixture tests (unittest orders them by name)")
        with open(CATALOG) as f:
            ids = {s["id"] for s in json.load(f)["signatures"]}
        # The hand-written signatures; the generated formats are measured by the real corpus.
        self.assertEqual(ids - self.seen, set(), "signatures no test log meets")
        self.assertEqual(pp.schema_errors(CATALOG), [])
        self.assertEqual(pp.schema_errors(os.path.join(pp.SOURCE_DIR, "diagnose", "explain-formats.json")), [])

    def test_torch_formats_come_from_three_releases_and_read_a_real_line(self):
        with open(os.path.join(pp.SOURCE_DIR, "diagnose", "explain-formats.json")) as f:
            doc = json.load(f)
        self.assertEqual([s["version"] for s in doc["sources"] if s["library"] == "torch"],
                         ["1.13.1", "2.6.0", "2.15.0"])
        torch = {f["format"]: f for f in doc["formats"] if f["library"] == "torch"}
        self.assertGreater(len(torch), 500)
        # The socket's own words class a format; what a rank sees of a cause elsewhere (a watchdog's
        # timeout, a store that failed under it) is a consequence, whatever its "rank" or "size".
        for fmt, cls in [
                ("The server socket has failed to bind. port: {}, useIpv6: {}, code: {}, name: {}, message: {}", "port"),
                ("Cannot resolve {} to a (local) address", "name_resolution"),
                ("{}Watchdog caught collective operation timeout: {} ran for {} milliseconds before timing out.",
                 "unclassified"),
                ("[Rank {}] Watchdog caught collective operation timeout: {} ran for {} milliseconds before timing out.",
                 "unclassified"),
                ("The client socket has timed out after {} while trying to connect to ({}, {}).", "unclassified"),
                ("Timed out waiting on barrier on rank {}, for key prefix: {} (world_size={}, missing_ranks={}, timeout={})",
                 "unclassified"),
                ("The port number of the rendezvous endpoint '{}' must be an integer between 0 and 65536.", "config")]:
            self.assertIn(fmt, torch)
            self.assertEqual(torch[fmt]["class"], cls, fmt)
        self.assertEqual(torch["Cannot resolve {} to a (local) address"]["file"],
                         "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp")
        # A real elastic log (pytorch/pytorch#67547): torch's Python message, with its source and
        # versions, read as a consequence whose first cause the log does not hold.
        real = os.path.join(explain_study.CORPUS, "h2-elastic-c10d-store-hostname-not-in-etc-hosts", "log.log")
        code, out, _ = explain(real)
        self.assertEqual(code, 3)
        d = out["diagnoses"][0]
        self.assertEqual(d["id"], "torch.c10d_rendezvous_backend.the_connection_to_the_c10d_store")
        self.assertIn("1.13.1, 2.6.0, 2.15.0", d["source"])
        self.assertEqual(out["verdict"]["class"], "undetermined")

    def test_mooncake_formats_need_the_fabrics_own_words(self):
        with open(os.path.join(pp.SOURCE_DIR, "diagnose", "explain-formats.json")) as f:
            doc = json.load(f)
        self.assertEqual([s["version"] for s in doc["sources"] if s["library"] == "mooncake"],
                         ["0.3.0", "0.3.4", "0.3.6", "0.3.8", "0.3.10", "0.3.12"])
        mc = {x["format"]: x for x in doc["formats"] if x["library"] == "mooncake"}
        # Its "loopback" is a local copy, and naming its RDMA transport decides nothing; a GID,
        # a DNS lookup and a socket's bind do.
        self.assertEqual(mc["EFA loopback cudaMemcpy failed: {} (dst={}, src={}, len={})"]["class"], "cuda")
        self.assertEqual(mc["Failed to query GID {} on {}/{}: {}"]["class"], "rdma")
        self.assertEqual(mc["SocketHandShakePlugin: bind (port {}): {}"]["class"], "port")
        self.assertEqual(mc["SocketHandShakePlugin: failed to get IP address of peer server {}:{}, check DNS and "
                            "/etc/hosts, or use IPv4 address instead: {}"]["class"], "name_resolution")
        self.assertNotIn("rdma", {x["class"] for x in mc.values() if "RDMA initialization failed" in x["format"]})

    def test_a_format_of_a_few_letters_is_not_classed_by_its_file(self):
        with open(os.path.join(pp.SOURCE_DIR, "diagnose", "explain-formats.json")) as f:
            formats = {(x["library"], x["format"]): x for x in json.load(f)["formats"]}
        # UCX's cuda_iface.h prints '%s() failed: %s' for CUDA calls, but its regex matches any
        # program's "bind() failed: ...": being in a CUDA file does not make it CUDA's.
        self.assertEqual(formats[("ucx", "%s() failed: %s")]["class"], "unclassified")
        # A format with words of its own still takes its file's class.
        self.assertEqual(formats[("ucx", "failed to allocate cuda_flush_desc")]["class"], "cuda")

    def test_the_issues_four_lines_get_their_diagnosis_and_check(self):
        quotes = os.path.join(FIXTURES, "source", "issue-quotes")
        r = subprocess.run([pp.BIN, "explain", os.path.join(quotes, "ucx-refused.log")], capture_output=True, text=True, timeout=60)
        print(r.stdout, flush=True)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        # UCX's advice is named for what it is, and the fix is the interface.
        self.assertIn("misleading", r.stdout)
        self.assertIn("Set UCX_NET_DEVICES to the interface that reaches the peer", r.stdout)
        self.assertIn("pairperf doctor 10.71.1.2:18515", r.stdout)
        self.assertIn("ucx-refused.log:1", r.stdout)
        r = subprocess.run([pp.BIN, "explain", "--port", "19000", os.path.join(quotes, "nccl-connect.log")],
                           capture_output=True, text=True, timeout=60)
        self.assertIn("on node-a (the node that wrote", r.stdout)
        self.assertIn("pairperf doctor 10.37.12.78:19000", r.stdout)
        self.assertIn("NCCL v2.21.5-1 src/misc/socket.cc:484", r.stdout)
        code, doc, _ = explain(os.path.join(quotes, "start-hang.log"))
        hang = doc["diagnoses"][0]
        self.assertEqual(hang["fields"], {"op": ["send"], "timeout_ms": ["1800000"]})
        self.assertTrue(hang["causes"][0]["supported"], hang["causes"])  # the 30-minute start-up
        self.assertIn("start-up", hang["causes"][0]["text"])

    def test_failures_on_two_hosts_get_the_mesh_over_them(self):
        two = os.path.join(FIXTURES, "source", "nccl-two-nodes")
        code, doc, _ = explain(os.path.join(two, "node1.log"), os.path.join(two, "node2.log"))
        self.assertEqual([c["command"] for c in doc["checks_across"]],
                         ["pairperf mesh --hosts node1:18515,node2:18515 --transport tcp"])
        r = subprocess.run([pp.BIN, "explain", os.path.join(two, "node1.log"), os.path.join(two, "node2.log")],
                           capture_output=True, text=True, timeout=60)
        self.assertIn("Versions the logs print: nccl 2.21.5 (", r.stdout)
        self.assertIn("node2.log advertises 10.38.0.5 on ib0; ", r.stdout)
        # One log, one host: no mesh.
        code, doc, _ = explain(os.path.join(two, "node1.log"))
        self.assertEqual(doc["checks_across"], [])

    def test_a_healthy_log_says_so(self):
        log = os.path.join(FIXTURES, "recorded", "ucx-healthy", "nodea-client.log")
        r = subprocess.run([pp.BIN, "explain", log], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("no failure in the logs (exit 0)", r.stdout)

    def test_standard_input_and_an_unknown_failure(self):
        text = "starting\nWeirdLib ERROR the flux capacitor failed: code 7\nRuntimeError: something else\n"
        code, doc, err = explain("-", stdin=text)
        self.assertEqual(code, 4, err)  # failure-looking lines no signature explains
        self.assertEqual([(u["log"], u["line"]) for u in doc["unexplained"]], [("-", 2), ("-", 3)])
        self.assertEqual(doc["unexplained_total"], 2)
        # A recognized failure beside an unknown one: 3, and the unknown one is still listed.
        code, doc, _ = explain("-", os.path.join(FIXTURES, "recorded", "fi-refused", "nodea-client.log"), stdin=text)
        self.assertEqual(code, 3)
        self.assertEqual(len(doc["unexplained"]), 2)

    def test_level_headers_and_failure_words_look_like_failures(self):
        # The header of glog ("Lmmdd hh:mm:ss.uuuuuu tid file:line] ", glog 0.7+ with the year:
        # google/glog src/logging.cc) and of Ray's C++ logs ("[%Y-%m-%d %H:%M:%S,%e %L %P %t] ",
        # ray src/ray/util/logging.cc kLogFormatTextPattern): an E/F or E/C level is failure-looking
        # whatever the message says; I and W are not. Real lines from public threads.
        with open(CATALOG) as f:
            headers = [re.compile(p) for p in json.load(f)["failure_looking"] if p.startswith(("^[EF]", "^\\["))]
        self.assertEqual(len(headers), 2)
        lines = {
            # kvcache-ai/Mooncake#1048, #1088; ray-project/ray#19695
            "E1111 08:02:15.854331   924 master_client.cpp:146] RPC call failed: Connection timed out": True,
            "E1120 11:10:27.133715 203020 transfer_task.cpp:305] Failed to complete transfers after 60 seconds "
            "for batch 2586731328": True,
            "[2021-10-25 05:34:10,286 C 43098 1729504] plasma_store_provider.cc:73:  Check failed: _s.ok() Bad "
            "status: IOError: Broken pipe": True,
            # kvcache-ai/Mooncake#1048, ai-dynamo/nixl#330, ray-project/ray#40687
            "I1111 08:02:15.854537   917 transfer_engine.cpp:535] Waiting for metrics reporting thread to join...": False,
            "I20250519 11:37:43.163678  1480 transfer_engine.cpp:350] Metrics reporting is disabled (set "
            "MC_TE_METRIC=1 to enable)": False,
            "[2023-10-23 03:15:21,685 W 921 921] (gcs_server) gcs_worker_manager.cc:55: Reporting worker exit, "
            "worker id = 6c4001f83e43de267c8a3e884c6beb9324a5ebcfcd05ea24bb07f8b3": False,
        }
        for line, failure in lines.items():
            with self.subTest(line=line[:40]):
                self.assertEqual(any(h.search(line) for h in headers), failure)
        # Words of failure beyond the levels: "Unable to", "cannot", "Could not", ... Real lines from
        # the corpus that nothing in the catalog explains are listed as unexplained (exit 4), never
        # read as healthy.
        for case, needle in (("kv-vllm-nixl-ucx-threads-nvshmem-uar-exhausted", "NULL value cannot allocate"),
                             ("kv-nixl-cu13-wheel-ucx-cuda-modules-not-found", "VRAM registration cannot proceed")):
            folder = os.path.join(FIXTURES, "real", case)
            with open(os.path.join(folder, "case.json")) as f:
                log = json.load(f)["logs"][0]
            with open(os.path.join(folder, log)) as f:
                line = next(l for l in f if needle in l)
            with self.subTest(line=needle):
                code, doc, err = explain("-", stdin=line)
                self.assertEqual(code, 4, (line, doc, err))
                self.assertEqual(doc["unexplained_total"], 1)
        # The I lines alone read as healthy; nothing in them is a failure.
        info = "\n".join(l for l, failure in lines.items() if not failure and l[0] == "I") + "\n"
        code, doc, err = explain("-", stdin=info)
        self.assertEqual(code, 0, (doc, err))

    def test_huge_and_binary_lines_are_read_bounded(self):
        with pp.tmpdir() as d:
            path = os.path.join(d, "big.log")
            with open(path, "wb") as f:
                f.write(b"x" * 300000 + b" Connect timeout [10.0.0.1]:1\n" + bytes(range(256)) + b"\n")
                f.write(b"[./gloo/transport/tcp/pair.h:324] Connect timeout [10.0.0.1]:80\n")
            code, doc, err = explain(path)
            self.assertEqual(code, 3, err)
            # Line 1 is cut at 2048 characters before matching; bytes(range(256)) holds a newline.
            self.assertEqual([e["line"] for e in doc["diagnoses"][0]["evidence"]], [4])
            # A matched line that is not UTF-8 is quoted with U+FFFD in the JSON (it was exit 1,
            # nlohmann's "invalid UTF-8 byte", until the fuzz harness found it).
            with open(path, "ab") as f:
                f.write(b"[./gloo/transport/tcp/pair.h:324] Connect timeout [10.0.0.1]:81 \xff\xfe\n")
            code, doc, err = explain(path)
            self.assertEqual(code, 3, err)
            self.assertIn("\ufffd", doc["diagnoses"][0]["evidence"][1]["text"])

    def test_bad_input_is_a_usage_error(self):
        code, doc, err = explain("/nonexistent/job.log")
        self.assertEqual(code, 2)
        self.assertIn("cannot read log /nonexistent/job.log", err)
        with open(CATALOG) as f:
            good = json.load(f)
        broken = [
            (lambda c: c["signatures"][0].update(pattern="(unclosed"), "not a valid regular expression"),
            (lambda c: c["signatures"][0].update(fields=["addr"]), "group(s) and 1 field name(s)"),
            (lambda c: c["signatures"][0].update(colour="red"), "unknown key 'colour'"),
            (lambda c: c["signatures"][1].update(id=c["signatures"][0]["id"]), "the id is used twice"),
            (lambda c: c["signatures"][0].update(checks=["rm -rf /"]), "is not a pairperf command"),
            (lambda c: c["signatures"][0].update(meaning="{nosuch}"), "'{nosuch}'"),
            (lambda c: c.update(schema_version="2.0.0"), "is not 1.x"),
        ]
        with pp.tmpdir() as d:
            for change, message in broken:
                catalog = json.loads(json.dumps(good))
                change(catalog)
                path = os.path.join(d, "catalog.json")
                with open(path, "w") as f:
                    json.dump(catalog, f)
                log = os.path.join(FIXTURES, "recorded", "fi-refused", "nodea-client.log")
                code, _, err = explain("--catalog", path, log)
                self.assertEqual(code, 2, f"{message}: {err}")
                self.assertIn(message, err)
                self.assertIn(path, err)
            # An installed tree without its catalog names where it looked.
            lone = os.path.join(d, "bin")
            os.makedirs(lone)
            shutil.copy(pp.BIN, lone)
            r = subprocess.run([os.path.join(lone, "pairperf"), "explain", "-"], input="", capture_output=True, text=True, timeout=60,
                               env=dict(os.environ, PAIRPERF_LIBEXEC_DIR=d))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("explain-catalog.json is not installed", r.stderr)


if __name__ == "__main__":
    pp.main()
