"""The measurement loops are instantiated for each transport's own class, with no virtual call
inside them (patterns/run.h, transports/transport.h run_phase), read from the built binary.

For every transport class that defines run_phase (pairperf::<name>_transport::run_phase):
  - the loops exist for that class: pairperf::run_pattern<pairperf::<name>_transport>, or for a
    transport that waits in its library (patterns/blocking.h: gloo),
    pairperf::run_waiting_pattern<pairperf::<name>_transport>, whose loops call its wait() and
    post() directly (by name, not through the interface);
  - no function of the loops that measure without --validate (pattern_detail::...<false, ...,
    C>, and driver<C>'s post and poll where they are not inlined) makes an indirect call through
    memory, the shape of a virtual call (`call *0x18(%rax)`). Left out by design: the validating
    loops, which fill and check each message through the checker's interface (message_check),
    and the driver's check_clock, which calls the peer's stop check (a std::function) once every
    1024 idle polls, off the loop's line.
For UCX, the transport whose latency row is tightest: its ping-pong server loop calls
ucp_worker_progress, ucp_tag_send_nbx and ucp_tag_recv_nbx itself (its post and poll inlined:
nothing between the loop and the library but the entry that jumps into the loaded libucp,
pairperf::ucx::api::*, as a PLT entry would).
The detector's control: the closing message's driver over the transport interface (instantiated
for pairperf::transport, untimed) must show its virtual poll, or the check proves nothing.

Only an optimized build without sanitizers is meaningful (tests/CMakeLists.txt registers it so);
needs objdump (binutils)."""
import os
import re
import shutil
import subprocess
import sys

BIN = os.environ.get("PAIRPERF_BIN", "build/pairperf")
HEADER = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INDIRECT = re.compile(r"\bcall\s+\*-?(0x[0-9a-f]+)?\(")  # call through memory: a vtable slot


def functions(binary):
    """{demangled name: [instruction lines]} of the binary's text."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", binary], capture_output=True,
                         text=True, check=True, timeout=120).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            name = m.group(1)
            funcs[name] = []
        elif name is not None and line.strip():
            funcs[name].append(line)
    return funcs


def loop_functions(funcs, cls):
    """The non-validating loops instantiated for class `cls`, and its driver's post and poll."""
    mine = []
    for name in funcs:
        head = name.split("(")[0]
        if head.startswith("pairperf::pattern_outcome pairperf::pattern_detail::"):
            if re.search(rf"<false, (\w+, )?{re.escape(cls)}>$", head):
                mine.append(name)
        elif head in (f"pairperf::pattern_detail::driver<{cls}>::poll",
                      f"pairperf::pattern_detail::driver<{cls}>::post",
                      f"pairperf::pattern_detail::waiter<{cls}>::wait",
                      f"pairperf::pattern_detail::waiter<{cls}>::post"):
            mine.append(name)
    return mine


def main():
    if not shutil.which("objdump"):
        print("SKIP: objdump (binutils) not installed")
        return 77
    funcs = functions(BIN)
    classes = sorted({m.group(1) for n in funcs
                      if (m := re.match(r"^(pairperf::\w+_transport)::run_phase\(", n))})
    print("transports with run_phase:", ", ".join(classes))
    failures = []
    if not classes:
        failures.append("no transport's run_phase found in the binary")
    for cls in classes:
        waiting = any(f"pairperf::run_waiting_pattern<{cls}>(" in n for n in funcs)
        if not waiting and not any(f"pairperf::run_pattern<{cls}>(" in n for n in funcs):
            failures.append(f"{cls}: no run_pattern<{cls}> (its run_phase does not instantiate the loops "
                            "for its own class)")
            continue
        loops = loop_functions(funcs, cls)
        if waiting:
            direct = [n for n in loops if any(f"<{cls}::wait(" in l for l in funcs[n])]
            print(f"{cls}: waiting loops; {len(direct)} of them call {cls}::wait directly")
            if not direct:
                failures.append(f"{cls}: its waiting loops never call {cls}::wait by name")
        calls = {n: [l.strip() for l in funcs[n] if INDIRECT.search(l)] for n in loops}
        bad = {n: c for n, c in calls.items() if c}
        print(f"{cls}: {len(loops)} loop functions, indirect calls in {len(bad)}")
        for n, c in bad.items():
            failures.append(f"{cls}: indirect call in {n.split('(')[0]}: {c[0]}")

    if "pairperf::ucx_transport" in classes:
        name = next((n for n in funcs if n.startswith(
            "pairperf::pattern_outcome pairperf::pattern_detail::pingpong_server<false, false, "
            "pairperf::ucx_transport>(")), None)
        if name is None:
            # Inlined further up: the counted two-sided loops hold it.
            name = next(n for n in funcs if "run_two_sided<false, pairperf::ucx_transport>(" in n)
        called = " ".join(funcs[name])
        for fn in ("ucp_worker_progress", "ucp_tag_send_nbx", "ucp_tag_recv_nbx"):
            # The loaded library's function through its out-of-line entry (transports/ucx/ucx_library.h),
            # which jumps through the library's table as a PLT entry jumps through the GOT.
            ok = f"<pairperf::ucx::api::{fn}(" in called
            print(f"ucx ping-pong server loop calls {fn} itself: {ok}")
            if not ok:
                failures.append(f"the UCX ping-pong server loop ({name.split('(')[0]}) does not call {fn} "
                                "itself: the transport's post or poll is not inlined into it")

    control = [n for n in funcs if "receive_closing_message<pairperf::transport>(" in n]
    seen = bool(control) and any(INDIRECT.search(l) for l in funcs[control[0]])
    print("control: the interface's closing-message loop shows its virtual call:", seen)
    if not seen:
        failures.append("the control found no virtual call in receive_closing_message<pairperf::transport>: "
                        "the detector does not see virtual calls")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
