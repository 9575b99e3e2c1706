#!/usr/bin/python3
"""The real program the gloo tests compare pairperf with: a torch.distributed job on the gloo
backend (Debian's python3-torch, which links Debian's libgloo0), as vLLM and training jobs start
one. Usage: gloo_job.py RANK WORLD MASTER_ADDR MASTER_PORT TIMEOUT_S. Rank 0 hosts the TCPStore;
each rank joins the process group and runs one all_reduce. Prints "ok" and exits 0 when the
collective gave the right sum; anything torch raises ends it with exit 1 and torch's message."""
import datetime
import sys

import torch
import torch.distributed as dist

rank, world, addr, port, timeout_s = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
timeout = datetime.timedelta(seconds=timeout_s)
try:
    store = dist.TCPStore(addr, port, world, rank == 0, timeout=timeout)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
    t = torch.ones(4) * (rank + 1)
    dist.all_reduce(t)
    expected = float(sum(range(1, world + 1)))
    if t.tolist() != [expected] * 4:
        print(f"wrong sum {t.tolist()}", flush=True)
        sys.exit(1)
    print("ok", flush=True)
except Exception as e:  # torch's own error is the outcome
    print(f"failed: {type(e).__name__}: {e}", flush=True)
    sys.exit(1)
