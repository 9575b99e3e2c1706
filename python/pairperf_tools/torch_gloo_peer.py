"""torch.distributed on its gloo backend, the same two loops as pairperf_gloo_loop: the torch peer of
scripts/compare-peers' gloo rows. Run with the interpreter that has torch (Debian's python3-torch
is for /usr/bin/python3); it starts its two ranks itself (the parent is rank 1, a child rank 0) and
prints one JSON object, as pairperf_gloo_loop does.

  lat  rank 0: irecv, send, wait (torch's calls; each makes its own gloo unbound buffer and waits
       in gloo); rank 1: waits for a request, posts the next irecv, answers with send. One-way
       latency = round trip / 2, every round trip a sample.
  bw   rank 0 keeps --window isends in flight to rank 1, which keeps --window irecvs; rank 1 times
       from its "go" to its last arrival.

Usage: python3 -m pairperf_tools.torch_gloo_peer --test lat|bw --size N --iterations N
                                                 [--warmup N] [--window N] [--timeout S]
Exit status: 0 measured, 1 failed, 2 usage.
"""
import argparse
import datetime
import json
import multiprocessing
import os
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pingpong(dist, torch, rank, args):
    s = torch.zeros(args.size, dtype=torch.uint8)
    r = torch.zeros(args.size, dtype=torch.uint8)
    total = args.warmup + args.iterations
    samples = []
    if rank == 0:
        for i in range(total):
            t0 = time.perf_counter()
            req = dist.irecv(r, 1)
            dist.send(s, 1)
            req.wait()
            if i >= args.warmup:
                samples.append(time.perf_counter() - t0)
        samples.sort()
        at = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] / 2  # noqa: E731
        return {"latency_s": {"p50": at(0.5), "p99": at(0.99), "avg": sum(samples) / len(samples) / 2},
                "iterations": args.iterations}
    req = dist.irecv(r, 0)
    for i in range(total):
        req.wait()
        if i + 1 < total:
            req = dist.irecv(r, 0)
        dist.send(s, 0)
    return None


def stream(dist, torch, rank, args, n, slots):
    go = torch.zeros(8, dtype=torch.uint8)
    window = len(slots)
    inflight = [None] * window
    if rank == 0:
        dist.recv(go, 1)
        posted = 0
        while posted < min(window, n):
            inflight[posted % window] = dist.isend(slots[posted % window], 1)
            posted += 1
        for done in range(n):
            inflight[done % window].wait()
            if posted < n:
                inflight[posted % window] = dist.isend(slots[posted % window], 1)
                posted += 1
        dist.recv(go, 1)
        return 0.0
    posted = 0
    while posted < min(window, n):
        inflight[posted % window] = dist.irecv(slots[posted % window], 0)
        posted += 1
    start = time.perf_counter()
    dist.send(go, 0)
    for done in range(n):
        inflight[done % window].wait()
        if posted < n:
            inflight[posted % window] = dist.irecv(slots[posted % window], 0)
            posted += 1
    span = time.perf_counter() - start
    dist.send(go, 0)
    return span


def rank_main(rank, port, args, queue):
    try:
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=args.timeout))
        if args.test == "lat":
            out = pingpong(dist, torch, rank, args)
        else:
            slots = [torch.zeros(args.size, dtype=torch.uint8) for _ in range(args.window)]
            stream(dist, torch, rank, args, args.warmup, slots)
            span = stream(dist, torch, rank, args, args.iterations, slots)
            out = None if rank == 0 else {"bandwidth_Bps": args.iterations * args.size / span,
                                          "span_s": span, "iterations": args.iterations}
        dist.destroy_process_group()
        queue.put((rank, out, None))
    except Exception as e:  # noqa: BLE001: reported to the parent, which exits 1
        queue.put((rank, None, f"{type(e).__name__}: {e}"))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--test", choices=("lat", "bw"), default="lat")
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args(argv)
    if args.size < 1 or args.iterations < 1 or args.warmup < 0 or not 1 <= args.window <= 1024:
        print("torch_gloo_peer: --size, --iterations >= 1, --warmup >= 0, --window 1..1024", file=sys.stderr)
        return 2
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    port = free_port()
    child = ctx.Process(target=rank_main, args=(0, port, args, queue), daemon=True)
    child.start()
    rank_main(1, port, args, queue)
    results = {}
    deadline = time.monotonic() + args.timeout + 10
    while len(results) < 2 and time.monotonic() < deadline:
        try:
            rank, out, err = queue.get(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001: queue.Empty
            break
        results[rank] = (out, err)
    child.join(timeout=5)
    if child.is_alive():
        child.kill()
    errors = [f"rank {r}: {e}" for r, (_, e) in sorted(results.items()) if e]
    if errors or len(results) < 2:
        print("torch_gloo_peer: " + ("; ".join(errors) or "a rank did not finish"), file=sys.stderr)
        return 1
    import torch
    out = {"tool": "torch.distributed gloo", "torch": torch.__version__, "test": args.test,
           "size_bytes": args.size, "window": args.window}
    for r in (0, 1):
        if results[r][0]:
            out.update(results[r][0])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
