#!/usr/bin/env python3
"""NCCL itself, as the oracle of the NCCL scenario tests: loads one libnccl.so.2 with ctypes (none of
pairperf's code), calls ncclGetUniqueId with NCCL_DEBUG=INFO in this process's environment, and prints
one JSON line: the library's version, the result, the interface and address of NCCL's own line
"Bootstrap: Using NAME:ADDRESS<PORT>" (2.18: "Bootstrap : Using"), and a TCP address on which NCCL's
bootstrap listens for the other ranks: the root that ncclGetUniqueId starts (its address is in the id:
8 bytes of magic, then the sockaddr), or, where the id holds no local root (NCCL_COMM_ID), a listener
this script opens on the address NCCL chose, as each rank's bootstrap does. It then waits, at most
--hold seconds, for a line on stdin (the test connects from the other node meanwhile) and exits.

  nccl_oracle.py LIBRARY [--hold SECONDS]"""
import ctypes
import json
import os
import re
import select
import socket
import struct
import sys
import tempfile


def main():
    library = sys.argv[1]
    hold = float(sys.argv[sys.argv.index("--hold") + 1]) if "--hold" in sys.argv else 20.0
    log = tempfile.NamedTemporaryFile(prefix="nccl-oracle-", suffix=".log", delete=False)
    log.close()
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,BOOTSTRAP,ENV,NET", NCCL_DEBUG_FILE=log.name)
    out = {"library": library}
    try:
        nccl = ctypes.CDLL(library)
        version = ctypes.c_int()
        nccl.ncclGetVersion(ctypes.byref(version))
        v = version.value
        out["version"] = f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 20900 else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"
        uid = ctypes.create_string_buffer(128)
        rc = nccl.ncclGetUniqueId(uid)
        out["rc"] = rc
    finally:
        text = open(log.name, errors="replace").read()
        os.unlink(log.name)
    out["log"] = [l.split("NCCL ", 1)[1] for l in text.splitlines() if "NCCL INFO" in l or "NCCL WARN" in l]
    m = re.search(r"Bootstrap ?: Using ([^:\s]+):(\S+?)<\d+>", text)
    out["iface"], out["address"] = (m.group(1), m.group(2).split("%")[0]) if m else ("", "")
    listener = None
    if rc == 0:
        family = struct.unpack_from("<H", uid.raw, 8)[0]
        if family == socket.AF_INET:
            port = struct.unpack_from(">H", uid.raw, 10)[0]
            root = (socket.AF_INET, socket.inet_ntop(socket.AF_INET, uid.raw[12:16]), port, 0)
        else:
            port = struct.unpack_from(">H", uid.raw, 10)[0]
            scope = struct.unpack_from("<I", uid.raw, 32)[0]
            root = (socket.AF_INET6, socket.inet_ntop(socket.AF_INET6, uid.raw[16:32]), port, scope)
        if root[1] == out["address"] and root[2] != 0:
            out["listen"] = {"family": root[0], "address": root[1], "port": root[2], "scope": root[3], "by": "NCCL's root"}
        elif out["address"]:
            fam = socket.AF_INET6 if ":" in out["address"] else socket.AF_INET
            listener = socket.socket(fam, socket.SOCK_STREAM)
            scope = socket.if_nametoindex(out["iface"]) if fam == socket.AF_INET6 else 0
            listener.bind((out["address"], 0, 0, scope) if fam == socket.AF_INET6 else (out["address"], 0))
            listener.listen(4)
            out["listen"] = {"family": fam, "address": out["address"], "port": listener.getsockname()[1],
                             "scope": scope, "by": "a listener on NCCL's bootstrap address"}
    print(json.dumps(out), flush=True)
    select.select([sys.stdin], [], [], hold)


if __name__ == "__main__":
    main()
