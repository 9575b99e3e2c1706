"""What the package, image and manifest tests share: why they cannot run here (printed, never
silent), and the scripts they drive."""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import pairperf_testlib as pp  # noqa: E402

SCRIPTS = os.path.join(pp.SOURCE_DIR, "scripts")
BUILD = os.path.dirname(pp.BIN)
# apt's and mmdebstrap's words for a mirror it cannot reach: the tree cannot be built here.
OFFLINE = re.compile(r"Temporary failure resolving|Could not resolve|Failed to fetch|"
                     r"Network is unreachable|Connection timed out|Unable to connect")


def missing(*needs):
    """The reason these tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (mmdebstrap's root mode, namespaces, mounts)"
    for tool, package in needs:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install {package}; scripts/setup does)"
    if not os.path.exists(os.path.join(BUILD, "CPackConfig.cmake")):
        return f"{BUILD} is not a configured build tree"
    return None


def script(name, *args, timeout=900):
    return subprocess.run([os.path.join(SCRIPTS, name)] + list(args), capture_output=True,
                          text=True, timeout=timeout)


def make_rootfs(out, *args):
    """scripts/package then scripts/make-rootfs; returns (None, log) or (reason to skip, log).
    A failure that is not the mirror being out of reach raises."""
    debs = os.path.join(os.path.dirname(out), "debs")
    r = script("package", BUILD, "--out", debs, timeout=600)
    if r.returncode != 0:
        raise AssertionError("scripts/package failed:\n" + r.stdout + r.stderr)
    r = script("make-rootfs", out, "--debs", debs, *args, timeout=900)
    log = r.stdout + r.stderr
    if r.returncode != 0:
        if OFFLINE.search(log):
            return "Debian's mirror cannot be reached from here: " + OFFLINE.search(log).group(0), log
        raise AssertionError("scripts/make-rootfs failed:\n" + log)
    return None, log


def in_root(root, *command, timeout=300, args=()):
    return subprocess.run([os.path.join(SCRIPTS, "rootfs-run"), root, "--timeout", str(timeout)]
                          + list(args) + ["--"] + list(command),
                          capture_output=True, text=True, timeout=timeout + 30)
