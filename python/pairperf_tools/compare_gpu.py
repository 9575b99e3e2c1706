"""compare-peers' GPU suite (--suite gpu): GPU memory through UCX, two processes on one GPU,
against cudaMemcpy device to device and ucx_perftest with the same TLS, and the fallback without
cuda_ipc for contrast; each pairperf row's path verdict and lanes are printed."""
import os
import shutil
import sys

from .compare_rows import print_rows, rounds_row
from .peer_runners import gpu_unavailable, latency_pinning, memcpy_d2d, micro_binary, pairperf_ucx, ucx_perftest


GPU_SIZES = [1 << 20, 16 << 20, 64 << 20]
GPU_FAST_TLS = "cuda_ipc,cuda_copy,tcp"
GPU_FALLBACK_TLS = "cuda_copy,tcp"


def gpu_row_text(r):
    path = r.get("gpu_path", {})
    prov = r.get("provenance", {})
    lanes = ", ".join(f"{l['transport']}/{l['device']}" for l in prov.get("lanes", [])) or "?"
    return f"{path.get('verdict', '?')} ({path.get('why', '')}); lanes: {lanes}; protocol: {prov.get('protocol', '?')}"


def compare_gpu(a):
    micro = micro_binary(a)
    for tool, path in (("ucx_perftest", shutil.which("ucx_perftest")), ("pairperf_micro", micro if os.access(micro, os.X_OK) else None)):
        if path is None:
            print(f"compare-peers: {tool} not found (scripts/setup builds pairperf_micro; ucx_perftest comes with the CUDA UCX)", file=sys.stderr)
            return 2
    why = gpu_unavailable(a.pairperf)
    if why:
        print(f"compare-peers: the gpu suite cannot run here: {why}", file=sys.stderr)
        return 3
    fast = {s: [] for s in GPU_SIZES}
    memcpy = {s: [] for s in GPU_SIZES}
    perftest = {s: [] for s in GPU_SIZES}
    fallback, verdicts = [], {}
    lat_pp, lat_up = [], []
    pin = latency_pinning()
    iters = {1 << 20: 2000, 16 << 20: 500, 64 << 20: 200}
    for i in range(a.rounds):
        print(f"gpu: round {i + 1}/{a.rounds} ...", file=sys.stderr, flush=True)

        def pp_fast():
            for s in GPU_SIZES:
                r = pairperf_ucx(a.pairperf, "tag_bw", str(s), iters[s], iters[s] // 10, [GPU_FAST_TLS], extra=["--mem", "cuda,cuda"])[0]
                fast[s].append(r["bandwidth_Bps"]["receiver"])
                verdicts[f"{GPU_FAST_TLS} {s >> 20} MiB"] = gpu_row_text(r)

        def peers():
            for s, bps in memcpy_d2d(micro, 0.5).items():
                if s in memcpy:
                    memcpy[s].append(bps)
            for s in GPU_SIZES:
                perftest[s].append(ucx_perftest("tag_bw", s, iters[s], iters[s] // 10, GPU_FAST_TLS, mem="cuda,cuda")["bandwidth_Bps"])

        def pp_fallback():
            r = pairperf_ucx(a.pairperf, "tag_bw", str(16 << 20), 100, 10, [GPU_FALLBACK_TLS], extra=["--mem", "cuda,cuda"])[0]
            fallback.append(r["bandwidth_Bps"]["receiver"])
            verdicts[f"{GPU_FALLBACK_TLS} 16 MiB"] = gpu_row_text(r)

        def pp_lat():
            extra = ["--mem", "cuda,cuda"] + (["--cpu", f"{pin[0]},{pin[1]}"] if pin else [])
            lat_pp.append(pairperf_ucx(a.pairperf, "tag_lat", "8", 20000, 2000, [GPU_FAST_TLS], extra=extra)[0]["latency_s"]["p50"])

        def up_lat():
            lat_up.append(ucx_perftest("tag_lat", 8, 20000, 2000, GPU_FAST_TLS, mem="cuda,cuda", pin=pin)["p50_s"])

        # Alternate which tool goes first, so drift of the machine hits both alike.
        for step in ([pp_fast, peers, pp_lat, up_lat, pp_fallback] if i % 2 == 0 else [peers, pp_fast, up_lat, pp_lat, pp_fallback]):
            step()
    rows = []
    for s in GPU_SIZES:
        rows.append(rounds_row(f"cuda_ipc tag_bw {s >> 20} MiB (GB/s)", fast[s], "memcpyD2D", memcpy[s], 1e-9, ">= 0.90"))
    # The same UCX protocol through ucx_perftest: where both sit below cudaMemcpy, the gap is UCX's
    # (its rendezvous per message), not pairperf's.
    for s in GPU_SIZES:
        rows.append(rounds_row(f"cuda_ipc tag_bw {s >> 20} MiB (GB/s)", fast[s], "perftest", perftest[s], 1e-9, ">= 0.97"))
    rows.append(rounds_row("cuda,cuda tag_lat 8 B p50 (us)", lat_pp, "perftest", lat_up, 1e6, "<= 1.03"))
    rows.append(rounds_row(f"{GPU_FALLBACK_TLS} vs cuda_ipc 16 MiB (GB/s)", fallback, "cuda_ipc", fast[16 << 20], 1e-9, "< 1"))
    print("\npath verdicts (pairperf's gpu_path for each TLS set):")
    for k, v in verdicts.items():
        print(f"  UCX_TLS={k}: {v}")
    report = {"suite": "gpu", "rounds": a.rounds, "gpu": {"tag_bw_Bps": {str(s): fast[s] for s in GPU_SIZES},
                                         "memcpy_d2d_Bps": {str(s): memcpy[s] for s in GPU_SIZES},
                                         "ucx_perftest_Bps": {str(s): perftest[s] for s in GPU_SIZES}, "fallback_16M_Bps": fallback,
                                         "tag_lat_8_p50_s": {"pairperf": lat_pp, "ucx_perftest": lat_up},
                                         "verdicts": verdicts}}
    print_rows(a, rows, report, where="on one GPU, two processes")
    return 0
