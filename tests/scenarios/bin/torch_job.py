#!/usr/bin/python3
"""A torch.distributed job as applications start one (Debian's python3-torch, which links Debian's
libgloo0), for the logs `pairperf explain` reads: torch's own errors propagate (a traceback, as in
an application's log). Usage: torch_job.py MODE RANK WORLD MASTER_ADDR MASTER_PORT TIMEOUT_S, MODE
one of allreduce (join the gloo process group, one all_reduce, print "ok") or unanswered-send (rank
0 sends a tensor that rank 1 never receives: rank 1 sleeps past the timeout, then exits 0)."""
import datetime
import sys
import time

import torch
import torch.distributed as dist

mode, rank, world, addr, port, timeout_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
timeout = datetime.timedelta(seconds=timeout_s)
store = dist.TCPStore(addr, port, world, rank == 0, timeout=timeout)
dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
if mode == "allreduce":
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    print("ok", t.tolist(), flush=True)
elif mode == "unanswered-send":
    if rank == 0:
        dist.send(torch.ones(1 << 16), dst=1)
    else:
        time.sleep(timeout_s * 2 + 2)
    print("ok", flush=True)
else:
    sys.exit(f"unknown mode {mode}")
