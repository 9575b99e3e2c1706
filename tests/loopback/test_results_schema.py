"""The README's main job as a user runs it, and its results file against results/schema.json."""
import copy
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

VALIDATOR = os.path.join(pp.SOURCE_DIR, "scripts", "validate-results")


def validate(path):
    return subprocess.run([sys.executable, VALIDATOR, path], capture_output=True, text=True, timeout=60)


class Schema(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = pp.tmpdir()
        # Exactly the main job: no peer, no options, from a fresh working directory.
        cls.proc, cls.took = pp.run(["run"], cwd=cls.tmp.name, timeout=300)
        cls.files = glob.glob(os.path.join(cls.tmp.name, "results", "runs", "*.json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_default_local_sweep_prints_a_table_and_writes_a_valid_file(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)
        self.assertIn("lat p50", self.proc.stdout)
        doc = pp.load(self.files[0])
        self.assertIn(f"{len(doc['results'])} ok, 0 skipped, 0 not ok", self.proc.stdout)
        transports = {r["case"]["transport"] for r in doc["results"]}
        self.assertIn("tcp", transports)
        if "ucx" in doc["context"]["tool"]["transports"]:
            # Locally UCX runs over TCP, shared memory and its own default choice.
            self.assertEqual({r["case"]["tls"] for r in doc["results"] if r["case"]["transport"] == "ucx"}, {"tcp", "posix,sysv,cma", ""})
        if "ofi" in doc["context"]["tool"]["transports"]:
            # Locally libfabric runs over its tcp provider (under rxm) and shared memory.
            self.assertEqual({r["case"]["tls"] for r in doc["results"] if r["case"]["transport"] == "ofi"}, {"tcp;ofi_rxm", "shm"})
        self.assertEqual(len(self.files), 1)
        self.assertIn(f"results: results/runs/{os.path.basename(self.files[0])}", self.proc.stdout)
        v = validate(self.files[0])
        self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
        doc = pp.load(self.files[0])
        self.assertEqual(doc["context"]["server_address"].split(":")[0], "127.0.0.1")
        self.assertEqual(doc["context"]["argv"][1:], ["run"])
        self.assertTrue(doc["context"]["tool"]["git_revision"])
        # Each case's wall time holds its measured phases; the context sums up the fixed cost.
        for r in doc["results"]:
            self.assertGreaterEqual(r["wall_s"], r["elapsed_s"], r["case"])
        overhead = doc["context"]["overhead"]
        self.assertEqual(overhead["cases"], len(doc["results"]))
        self.assertAlmostEqual(overhead["measured_s"], sum(r["elapsed_s"] for r in doc["results"]), places=6)
        self.assertLessEqual(overhead["per_case_s"]["min"], overhead["per_case_s"]["median"])
        self.assertLessEqual(overhead["per_case_s"]["median"], overhead["per_case_s"]["max"])
        self.assertLess(overhead["per_case_s"]["median"] * len(doc["results"]), overhead["run_wall_s"])
        self.assertIn(doc["context"]["client"]["loop_clock"]["source"], ("tsc", "monotonic"))

    def test_schema_rejects_what_breaks_the_contract(self):
        doc = pp.load(self.files[0])
        with pp.tmpdir() as d:
            def check(mutate, expect_in):
                bad = copy.deepcopy(doc)
                mutate(bad)
                path = os.path.join(d, "bad.json")
                with open(path, "w") as f:
                    json.dump(bad, f)
                v = validate(path)
                self.assertEqual(v.returncode, 1, f"accepted a document that should fail ({expect_in})")
                self.assertIn(expect_in, v.stderr)

            check(lambda b: b["results"][0].pop("latency_s"), "latency_s")
            check(lambda b: b["results"][0].update(status="meh"), "meh")
            check(lambda b: b["results"][0].update(status="error"), "message")
            check(lambda b: b["results"][6]["bandwidth_Bps"].pop("receiver"), "receiver")
            check(lambda b: b["results"][6]["bandwidth_Bps"].update(receiver="fast"), "fast")
            check(lambda b: b.update(schema_version="2.0.0"), "2.0.0")
            check(lambda b: b["context"].pop("env"), "env")
            check(lambda b: b["context"]["client"]["loop_clock"].update(source="hpet"), "hpet")
            check(lambda b: b["context"]["overhead"]["per_case_s"].update(median=-1), "-1")
            check(lambda b: b["results"][0].update(wall_s="slow"), "slow")

    def test_jsonl_and_skipped_rows_validate(self):
        with pp.Server() as s, pp.tmpdir() as d:
            out = os.path.join(d, "r.jsonl")
            proc, _ = pp.run(["run", s.address, "--no-json", "--jsonl", out, "--transport", "tcp", "--sizes", "8", "-n", "10", "--mem", "host",
                              "--mem", "cuda"], timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            v = validate(out)
            self.assertEqual(v.returncode, 0, v.stdout + v.stderr)
            with open(out) as f:
                statuses = [json.loads(l)["status"] for l in list(f)[1:]]
            self.assertEqual(statuses.count("skipped"), 3)


if __name__ == "__main__":
    pp.main()
