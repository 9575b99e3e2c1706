"""`cmake --install` into an empty prefix gives a working pairperf: the installed binary finds its
private files (report, pairperf-mpi) relative to itself, with the prefix moved after install and
no build or source path, and the binaries are stripped."""
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import pairperf_testlib as pp

BUILD = os.path.dirname(pp.BIN)
HAVE_MPI = os.path.exists(os.path.join(BUILD, "libexec", "pairperf-mpi"))


class Installed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = pp.tmpdir()
        first = os.path.join(cls.tmp.name, "first")
        r = subprocess.run(["cmake", "--install", BUILD, "--prefix", first, "--strip"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        # Moved after install: nothing may depend on where it was installed.
        cls.prefix = os.path.join(cls.tmp.name, "moved")
        shutil.move(first, cls.prefix)
        cls.bin = os.path.join(cls.prefix, "bin", "pairperf")
        # No hint of the build or source tree: a clean environment, another working folder (the
        # sanitizers' settings pass, as scripts/test --sanitize sets them).
        cls.env = {"PATH": "/usr/bin:/bin", "HOME": cls.tmp.name}
        cls.env.update({k: v for k, v in os.environ.items() if k.endswith("SAN_OPTIONS")})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_installed(self, *args, timeout=120, env=None):
        return subprocess.run([self.bin] + list(args), capture_output=True, text=True,
                              timeout=timeout, cwd=self.tmp.name, env=env or self.env)

    def test_installs_what_the_readme_lists(self):
        files = sorted(os.path.relpath(p, self.prefix)
                       for p in glob.glob(os.path.join(self.prefix, "**"), recursive=True)
                       if os.path.isfile(p))
        for want in ["bin/pairperf", "libexec/pairperf/report", "libexec/pairperf/explain-catalog.json",
                     "libexec/pairperf/explain-formats.json",
                     "share/doc/pairperf/README.md",
                     # README's links into docs/ resolve in the installed tree too.
                     "share/doc/pairperf/docs/README.md", "share/doc/pairperf/docs/commands/run.md",
                     "share/doc/pairperf/docs/exit-codes.md",
                     "share/pairperf/python/pairperf_tools/report.py",
                     "share/pairperf/python/pairperf_tools/documents.py"]:
            self.assertIn(want, files)
        # Every document's schema, the ones the tools write as well as the binary's.
        schemas = os.path.join(pp.SOURCE_DIR, "results")
        for name in sorted(os.listdir(schemas)):
            if name.endswith("schema.json"):
                self.assertIn(f"share/pairperf/schemas/{name}", files)

        if HAVE_MPI:
            self.assertIn("libexec/pairperf/pairperf-mpi", files)
        pages = [f for f in files if f.startswith("share/man/man1/")]
        if shutil.which("help2man"):
            # A page for every subcommand the installed binary lists (history was missing once).
            commands = pp.subcommands(os.path.join(self.prefix, "bin", "pairperf"))
            self.assertIn("history", commands, commands)
            for cmd in commands:
                self.assertIn(f"share/man/man1/pairperf-{cmd}.1.gz", pages, (cmd, pages))
            self.assertIn("share/man/man1/pairperf-run.1.gz", pages, files)
            with gzip.open(os.path.join(self.prefix, "share/man/man1/pairperf-run.1.gz"), "rt") as f:
                page = f.read()
            self.assertIn(".TH PAIRPERF-RUN", page)
            self.assertIn(r"\-\-expect", page)

    def test_the_installed_tools_find_the_installed_schemas(self):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); from pairperf_tools import documents; "
                "print('\\n'.join(documents.schema_path(n) for n in {**documents.SCHEMA_FILES, **documents.FOREIGN_FILES}))")
        r = subprocess.run([sys.executable, "-c", code, os.path.join(self.prefix, "share", "pairperf", "python")],
                           capture_output=True, text=True, timeout=60, env=self.env, cwd=self.tmp.name)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        paths = r.stdout.split()
        self.assertEqual(len(paths), len([n for n in os.listdir(os.path.join(pp.SOURCE_DIR, "results")) if n.endswith("schema.json")]), paths)
        for path in paths:
            self.assertTrue(path.startswith(os.path.join(self.prefix, "share", "pairperf", "schemas")), path)

    def test_binaries_are_stripped_and_name_no_build_path(self):
        for rel in ["bin/pairperf"] + (["libexec/pairperf/pairperf-mpi"] if HAVE_MPI else []):
            path = os.path.join(self.prefix, rel)
            sections = subprocess.run(["readelf", "-S", path], capture_output=True, text=True).stdout
            self.assertNotIn(".debug_info", sections, rel)
            with open(path, "rb") as f:
                blob = f.read()
            if b"__asan_init" in blob:
                continue  # a sanitizer build: instrumentation records source names and grows it
            self.assertNotIn(pp.SOURCE_DIR.encode(), blob, f"{rel} names the source tree")
            self.assertLess(len(blob), 16 << 20, f"{rel}: {len(blob)} bytes")

    def test_run_and_report_work_from_the_prefix_alone(self):
        out = os.path.join(self.tmp.name, "r.json")
        r = self.run_installed("run", "-t", "tcp", "--test", "tcp_lat", "--sizes", "8", "-n", "200",
                               "--json", out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            self.skipTest("python3-matplotlib is not installed here")
        pics = os.path.join(self.tmp.name, "pics")
        r = self.run_installed("report", out, "--out", pics)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(os.path.exists(os.path.join(pics, "index.html")), os.listdir(pics))

    def test_explain_reads_the_installed_catalog(self):
        log = os.path.join(pp.SOURCE_DIR, "tests", "fixtures", "explain", "source", "issue-quotes", "ucx-refused.log")
        r = self.run_installed("explain", log)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn(f"({os.path.join(self.prefix, 'libexec', 'pairperf', 'explain-catalog.json')})", r.stdout)
        self.assertIn("ucx.connect_failed", r.stdout)
        self.assertIn(f"formats of the libraries' sources ({os.path.join(self.prefix, 'libexec', 'pairperf', 'explain-formats.json')})", r.stdout)

    def test_info_names_the_files_beside_the_binary(self):
        r = self.run_installed("info", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        files = json.loads(r.stdout)["private_files"]
        self.assertEqual(files["report"], os.path.join(self.prefix, "libexec", "pairperf", "report"))
        self.assertEqual(files["explain-catalog.json"], os.path.join(self.prefix, "libexec", "pairperf", "explain-catalog.json"))
        if HAVE_MPI:
            self.assertEqual(files["pairperf-mpi"],
                             os.path.join(self.prefix, "libexec", "pairperf", "pairperf-mpi"))

    def test_report_without_its_script_says_so(self):
        bare = os.path.join(self.tmp.name, "bare")
        os.makedirs(os.path.join(bare, "bin"), exist_ok=True)
        shutil.copy2(self.bin, os.path.join(bare, "bin", "pairperf"))
        r = subprocess.run([os.path.join(bare, "bin", "pairperf"), "report", "x.json", "--out", "o"],
                           capture_output=True, text=True, timeout=30, cwd=self.tmp.name, env=self.env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("its script 'report' is not installed", r.stderr)
        self.assertIn("libexec/pairperf", r.stderr)
        # Without pairperf-mpi beside it, mesh under MPI says what to install.
        r = subprocess.run([os.path.join(bare, "bin", "pairperf"), "mesh"], capture_output=True,
                           text=True, timeout=30, cwd=self.tmp.name, env=self.env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("install pairperf-mpi", r.stderr)
        r = subprocess.run([os.path.join(bare, "bin", "pairperf"), "info", "--json"],
                           capture_output=True, text=True, timeout=60, cwd=self.tmp.name, env=self.env)
        info = json.loads(r.stdout)
        self.assertEqual(info["private_files"], {"report": None, "pairperf-mpi": None, "explain-catalog.json": None,
                                                 "explain-formats.json": None})
        self.assertEqual(pp.schema_errors_of(info), [])  # null where none is found (a GPU bundle's info)

    @unittest.skipUnless(HAVE_MPI, "built without MPI")
    def test_mesh_hands_over_to_pairperf_mpi(self):
        mpirun = shutil.which("mpirun")
        if not mpirun:
            self.skipTest("no mpirun")
        env = dict(self.env, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        if "ASAN_OPTIONS" in env:  # LeakSanitizer cannot run inside Open MPI's ranks
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
        r = subprocess.run([mpirun, "--oversubscribe", "-np", "2", self.bin, "mesh", "--iface", "lo",
                            "--test", "tcp_lat", "--one-way", "--no-retest", "-d", "0.05s",
                            "--json", os.path.join(self.tmp.name, "mesh.json")],
                           capture_output=True, text=True, timeout=180, cwd=self.tmp.name, env=env)
        # Two busy ranks on a small machine may make the link slow (3); none may fail (1).
        self.assertIn(r.returncode, (0, 3), r.stdout + r.stderr)
        doc = pp.load(os.path.join(self.tmp.name, "mesh.json"))
        self.assertEqual(len(doc["mesh"]["nodes"]), 2, doc.get("outcome"))


if __name__ == "__main__":
    pp.main()
