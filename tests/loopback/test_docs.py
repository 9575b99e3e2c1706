"""The documentation against the program: every subcommand and every option that `--help` lists is
documented in docs/, every pairperf command shown in README.md or docs/ parses, every relative link
resolves, and README stays a front door (its two commands first, at most 150 lines)."""
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import unittest

import pairperf_testlib as pp

DOCS = os.path.join(pp.SOURCE_DIR, "docs")
README = os.path.join(pp.SOURCE_DIR, "README.md")


def help_text(*args):
    proc = subprocess.run([pp.BIN, *args, "--help"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise AssertionError(f"pairperf {' '.join(args)} --help exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def long_options(command):
    """Every long option of one subcommand's --help (`-n,--iterations INT` gives --iterations)."""
    return sorted(set(re.findall(r"(?:^|[\s,])(--[a-z][a-z0-9-]*)", help_text(command))) - {"--help"})


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def markdown_files():
    files = [README]
    for root, _, names in os.walk(DOCS):
        files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".md")]
    return files


def sh_blocks(path):
    """(line number, text) of each logical line in the file's ```sh blocks (`\\` continuations joined)."""
    lines, inside, pending, start = [], False, "", 0
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.startswith("```"):
                inside = line.strip() in ("```sh", "```bash", "```shell")
                continue
            if not inside:
                continue
            if not pending:
                start = number
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            lines.append((start, pending + line))
            pending = ""
    return lines


WRAPPERS = {"sudo", "env", "exec", "time", "nohup"}
LAUNCHERS = {"mpirun", "mpiexec", "srun"}


def pairperf_argv(line):
    """The pairperf arguments of one shell line, or None when it runs no pairperf. A line may be
    `VAR=x pairperf ...`, `mpirun OPTIONS pairperf ...`, `srun ...`, and end in a comment, a pipe,
    `&&`, `;`, `&` or a redirection; only the pairperf command itself is returned."""
    try:
        # punctuation_chars: split `a>b`, `a|b` and `a;b` as a shell would.
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError as e:
        raise AssertionError(f"not a shell line ({e}): {line}")
    for op, target in zip(words, words[1:]):
        # `--expect bw>=8GB/s@1M` unquoted is a redirection to a file named `=8GB/s@1M`.
        if op in (">", "<") and target.startswith("="):
            raise AssertionError(f"an unquoted comparison is a shell redirection; quote it: {line}")
    i = 0
    while i < len(words) and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[i]) or words[i] in WRAPPERS):
        i += 1
    if i < len(words) and os.path.basename(words[i]) in LAUNCHERS:
        i = next((k for k in range(i + 1, len(words)) if os.path.basename(words[k]) == "pairperf"), len(words))
    if i >= len(words) or os.path.basename(words[i]) != "pairperf":
        return None
    rest, tail = [], words[i + 1:]
    for j, a in enumerate(tail):
        redirect = re.match(r"^[<>&|;]", a) or (a.isdigit() and tail[j + 1:j + 2] in ([">"], [">>"], ["<"], [">&"]))
        if redirect:
            break
        rest.append(a)
    return rest


class Documented(unittest.TestCase):
    def test_every_subcommand_has_its_page(self):
        names = pp.subcommands()
        self.assertGreaterEqual(len(names), 8, names)
        for name in names:
            with self.subTest(command=name):
                self.assertTrue(os.path.isfile(os.path.join(DOCS, "commands", f"{name}.md")),
                                f"docs/commands/{name}.md is missing")

    def test_every_option_is_documented(self):
        missing = []
        for name in pp.subcommands():
            page = os.path.join(DOCS, "commands", f"{name}.md")
            if not os.path.isfile(page):
                continue  # the test above names it
            text = read(page)
            for option in long_options(name):
                if not re.search(re.escape(option) + r"(?![a-z0-9-])", text):
                    missing.append(f"{name} {option}")
        self.assertEqual(missing, [], "options in --help that docs/commands/<command>.md never names")

    def test_every_shown_command_parses(self):
        env = pp.clean_env(PAIRPERF_PARSE_ONLY="1")
        checked, failed = 0, []
        for path in markdown_files():
            for number, line in sh_blocks(path):
                argv = pairperf_argv(line)
                if argv is None:
                    continue
                proc = subprocess.run([pp.BIN, *argv], capture_output=True, text=True, timeout=30, env=env)
                checked += 1
                if proc.returncode != 0:
                    where = os.path.relpath(path, pp.SOURCE_DIR)
                    failed.append(f"{where}:{number}: {line.strip()}\n    exit {proc.returncode}: "
                                  f"{(proc.stderr or proc.stdout).strip().splitlines()[:1]}")
        print(f"{checked} pairperf commands in README.md and docs/ parsed", file=sys.stderr)
        self.assertGreater(checked, 50, "too few commands found: is the ```sh block reader broken?")
        self.assertEqual(failed, [], "\n".join(failed))

    def test_parse_only_still_refuses_bad_command_lines(self):
        # The check above means something only if a bad command line fails it.
        env = pp.clean_env(PAIRPERF_PARSE_ONLY="1")
        bad = subprocess.run([pp.BIN, "run", "--no-such-option"], capture_output=True, text=True,
                             timeout=30, env=env)
        self.assertEqual(bad.returncode, 2, bad.stderr)
        good = subprocess.run([pp.BIN, "run", "--sizes", "8:1M"], capture_output=True, text=True,
                              timeout=30, env=env)
        self.assertEqual(good.returncode, 0, good.stderr)
        self.assertEqual(good.stdout, "", "parse-only ran something")

    def test_relative_links_resolve(self):
        broken = []
        for path in markdown_files():
            text = read(path)
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                file_part = target.split("#", 1)[0]
                if not os.path.exists(os.path.join(os.path.dirname(path), file_part)):
                    broken.append(f"{os.path.relpath(path, pp.SOURCE_DIR)}: {target}")
        self.assertEqual(broken, [], "links to files that do not exist")


class FrontDoor(unittest.TestCase):
    def test_readme_is_short_and_starts_with_the_two_commands(self):
        lines = read(README).splitlines()
        self.assertLessEqual(len(lines), 150, "README.md is a front door; reference goes to docs/")
        blocks = [number for number, _ in sh_blocks(README)]
        self.assertTrue(blocks, "README.md has no ```sh block")
        first = [line for number, line in sh_blocks(README)][:2]
        self.assertEqual(first, ["scripts/setup && build/pairperf run", "scripts/test"])
        ci = read(os.path.join(pp.SOURCE_DIR, ".ci", "run"))
        self.assertRegex(ci, r"(?m)^scripts/test\s*$", ".ci/run must call the README's test command")

    def test_no_issue_numbers_in_user_pages(self):
        found = []
        for path in markdown_files():
            for number, line in enumerate(read(path).splitlines(), 1):
                if re.search(r"\bissues? \d+\b|\(issue \d+", line, re.IGNORECASE):
                    found.append(f"{os.path.relpath(path, pp.SOURCE_DIR)}:{number}: {line.strip()}")
        self.assertEqual(found, [])


class SourceSize(unittest.TestCase):
    def test_no_source_file_over_500_lines(self):
        # Long functions are checked by scripts/lint (clang-tidy, minutes); file sizes cost nothing.
        files = subprocess.run(["git", "-C", pp.SOURCE_DIR, "ls-files", "*.cpp", "*.h", "*.py", "*.cu"],
                               capture_output=True, text=True, timeout=30)
        if files.returncode != 0:
            self.skipTest(f"not a git checkout: {files.stderr.strip()}")
        long = []
        for rel in files.stdout.split():
            if rel.startswith(("tests/fixtures/", "tests/fuzz/corpus/", ".deps/")):
                continue
            path = os.path.join(pp.SOURCE_DIR, rel)
            if os.path.isfile(path):
                count = len(read(path).splitlines())
                if count > 500:
                    long.append(f"{rel}: {count} lines")
        self.assertEqual(long, [], "split these where the logic has a seam")


if __name__ == "__main__":
    pp.main()
