"""Which step of a CUDA worker's life sets a C signal handler, and where its code lies.

The seal (worker/seal/sample.py) takes the caught signals before any candidate code runs and fails a timed sample
after which they differ (KJ-R026): a handler set through the C library could run the candidate's code between the
sample and its checked output's copy. A library the honest path uses that sets one lazily, after the seal is taken,
would fail honest candidates. This probe takes the steps such a worker takes, each in turn in one process, and
prints what each changed, as a Markdown table (on the GPU machine: `python scripts/seal_signals_probe.py`).
"""

from __future__ import annotations

import mmap
import os
import sys
import tempfile
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from kerneljudge.worker.seal import signal_handlers  # noqa: E402


def caught() -> dict[int, int]:
    """Each caught signal and where its handler's code is."""
    return {number: signal_handlers.handler(number) for number in signal_handlers.caught_now()}


def change(before: dict[int, int], after: dict[int, int], roots: tuple[str, ...]) -> str:
    """The handlers a step set or changed, each with the object its code lies in (and whether the seal trusts it)."""
    named = []
    for number, address in sorted(after.items()):
        if before.get(number) != address and address not in signal_handlers.IGNORED:
            where = signal_handlers.home(address)
            trusted = signal_handlers.installed(address, roots)
            named.append(
                f"{signal_handlers.name(number)} in {where or 'no shared object'}{'' if trusted else ' (a door)'}"
            )
    named += [f"{signal_handlers.name(n)} no longer caught" for n in sorted(set(before) - set(after))]
    return "; ".join(named) or "-"


def steps() -> list[tuple[str, Callable[[], object]]]:
    import torch

    device = torch.device("cuda")

    def register_host_memory() -> object:
        from kerneljudge.protocol.pinned import Driver

        fd = os.memfd_create("probe")
        os.ftruncate(fd, 64 << 20)
        view = mmap.mmap(fd, 64 << 20)
        import ctypes

        address = ctypes.addressof(ctypes.c_char.from_buffer(view))
        return Driver().register(address, 64 << 20, False)

    def triton_kernel() -> object:
        import triton
        import triton.language as tl

        @triton.jit
        def double(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        x = torch.ones(4096, device=device)
        double[(4,)](x, 4096, BLOCK=1024)
        torch.cuda.synchronize()
        return float(x.sum())

    def graph() -> object:
        x = torch.ones(1 << 20, device=device)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x * 2
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2
        g.replay()
        torch.cuda.synchronize()
        return float(y[0])

    def persisting_l2_reset() -> object:
        import ctypes

        major = str(torch.version.cuda).split(".")[0]
        return ctypes.CDLL(f"libcudart.so.{major}").cudaCtxResetPersistingL2Cache()

    def compiled() -> object:
        fn = torch.compile(lambda t: torch.relu(t) + 1)
        return float(fn(torch.ones(1024, device=device)).sum())

    return [
        ("CUDA context and a first op", lambda: torch.zeros(1, device=device) + 1),
        ("1 GiB device allocation", lambda: torch.empty(1 << 30, dtype=torch.uint8, device=device).fill_(1)),
        ("pinned host tensor and a copy", lambda: torch.ones(1 << 24, pin_memory=True).to(device)),
        ("cuMemHostRegister of a memfd mapping", register_host_memory),
        ("GPU sleep and events", lambda: (torch.cuda._sleep(1000), torch.cuda.synchronize())),
        ("a Triton kernel compiled and run", triton_kernel),
        ("a CUDA graph captured and replayed", graph),
        ("libcudart's persisting-L2 reset", persisting_l2_reset),
        ("torch.compile of a small function", compiled),
    ]


def main() -> int:
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="probe-triton-"))
    start = caught()
    import torch  # noqa: F401

    rows = [("import torch", change(start, caught(), signal_handlers.library_roots()))]
    for name, step in steps():
        before = caught()
        try:
            step()
            note = ""
        except Exception as exc:  # a step that fails still says what it changed
            note = f" (failed: {type(exc).__name__}: {str(exc)[:80]})"
        rows.append((name, change(before, caught(), signal_handlers.library_roots()) + note))
    print("| step | handlers set: the signal, where its code lies |\n|---|---|")
    for name, changed in rows:
        print(f"| {name} | {changed} |")
    print(
        f"\ncaught first: {sorted(start)}; last: {sorted(caught())}; trusted roots: {signal_handlers.library_roots()}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
