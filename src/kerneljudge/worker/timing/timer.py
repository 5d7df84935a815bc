"""Timing inside a worker: timed samples of many calls, CUDA graphs of them, the L2 flush, the precursor.

The worker only measures and reports per-call times; the parent pairs, checks and decides
(kerneljudge/timing). Both kinds of worker time their model the same way, so that candidate and
reference differ only in the model.
"""

from __future__ import annotations

import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.protocol import wire
from kerneljudge.worker import evidence
from kerneljudge.worker.seal import commit as sample_commit
from kerneljudge.worker.seal import sample as sample_seal
from kerneljudge.worker.seal import timed_outputs
from kerneljudge.worker.timing.graph import GraphTimer

# The GPU clocks a precursor's sleep may be calibrated to, in cycles per millisecond (100 MHz to 5 GHz; an
# H100 or H200 runs at about 2 GHz). A calibration outside comes from a clock that lies (a candidate that
# patched CUDA events to report no time made a 1 ms precursor sleep a second a sample, and the worker ran
# out of time before the parent could catch the lie): it is held to the range, so the sleep stays bounded.
CYCLES_PER_MS = (1e5, 5e6)


def plausible_cycles(cycles_per_ms: float) -> float:
    return min(max(cycles_per_ms, CYCLES_PER_MS[0]), CYCLES_PER_MS[1])


def profiler_range(torch: Any, start: bool) -> None:
    """cudaProfilerStart/Stop: `ncu --profile-from-start off` then profiles only what lies between."""
    try:
        runtime = torch.cuda.cudart()
        if start:
            runtime.cudaProfilerStart()
        else:
            runtime.cudaProfilerStop()
    except Exception:  # no profiler API in this build: the bracket is a convenience, never evidence
        pass


class Timer(GraphTimer):
    """The timing half of a worker (worker/base.py): `op_time`, and the state it keeps between requests."""

    torch: Any
    device: Any
    model: Any
    role: str
    pinned_flags: dict[str, Any]  # the numerics flags and threads before any candidate code ran (worker/base.py)
    threads_baseline: set[int]

    def __init__(self) -> None:
        self.flush: Any = None  # the L2-flush buffer, kept between timing requests
        self.cycles_per_ms: float | None = None  # GPU sleep cycles per millisecond, measured once
        self.cudart: Any = None  # the CUDA runtime library, opened once (persisting-L2 reset)
        self.kept: list[Any] = []  # copies of the outputs `time` requests kept, oldest first, until `captured` asks
        self.seal: sample_seal.Seal | None = None  # a candidate's worker's, taken before its code runs
        self.reset_timing_state()

    def reset_timing_state(self) -> None:
        """What belongs to one built model: its compiled form, its graphs, the staged timing pool."""
        self.compiled: Any = None  # the model under torch.compile, once `compile` has run
        self.staged: list[Any] = []  # the timing pool, staged once and named by `time` requests
        self.graphs: dict[tuple[bool, int], Any] = {}  # CUDA graphs of timed samples (`graph_for`)

    def op_time(self, request: protocol.Time, args: Any) -> None:
        """Time `calls` consecutive forwards per sample; report per-call milliseconds.

        `args` is a pool of input sets; call i of sample s uses set `wire.timed_set(s, i, len(pool))`, so
        consecutive calls see different inputs. Every call's output of a sample is held until the sample
        is over (both roles alike, so that they use memory alike). With `ask_keep` the worker then answers
        `sampled` and waits for the parent's `keep`, which names the call whose output it keeps for the
        parent to fetch with `captured`, a request of its own, or none: the kept call is drawn after the
        calls, so nothing in this process tells a call that will be checked from one that will not (H03;
        the position sent in the request could be read from this process's frames). The kept output is
        copied at once, and outside a graph the device is waited for before the next call runs, so that
        a candidate that learns the position afterwards cannot mend that output. Sent in this request, a
        multi-GiB output's copy to the host was most of the round trip the parent's clock sets against the
        claimed times (KernelBench's 4 GiB 9_Tall_skinny on an H200: an honest candidate looked like it
        under-reported its time). The outputs earlier requests kept are dropped first, unless
        `keep_earlier` (the parent fetches them after the samples, oldest first: judgment/stages/timed_calls.py).
        On CUDA, `precursor_ms` > 0 puts a GPU sleep of that length before each sample's start event, so the
        GPU is still busy while the host issues the sample's calls; `host_ms` reports how long each issue
        took. `graph` replays a CUDA graph of the sample's calls instead of issuing them (`graph_for`).
        `compiled` times the torch.compile'd model (reference role); `method` "do_bench" asks Triton.
        """
        torch = self.torch
        calls, samples, warmup = request.calls, request.samples, request.warmup
        pool = self.staged if request.staged else [self.to_device(list(inputs)) for inputs in args]
        model = self.compiled if request.compiled else self.model
        if model is None:
            self.send(self.describe_exception("time", RuntimeError("no compiled model: send `compile` first")))
            return
        if not request.keep_earlier:
            self.kept = []  # earlier requests' outputs, freed before this one's calls
        kept_before = len(self.kept)
        cuda = self.device.type == "cuda"
        flush = self.flush_buffer(request.flush_bytes)  # before the samples, not in them
        l2_reset = self.reset_persisting_l2() if cuda else None
        # Bracket the measured samples for `ncu --profile-from-start off` (no-ops without a profiler attached).
        bracket = request.profile_range and cuda
        made: list[Any] = []  # every call's output of the sample being timed (a graph's: its capture's)
        replaced: set[str] = set()  # watched functions found replaced, before a kept copy or after the samples
        overwritten: list[bool] = []  # whether a later call of its sample wrote where the kept output lies
        lazy: list[str | None] = []  # the first output of the kept call's sample that was no plain tensor, if any
        differing: list[list[str] | None] = []  # where an output of that sample differed from its first's
        kept_copy: Any = None  # storage for the kept output, made before the seal
        sealed_open: list[list[str]] = []  # what the seal found open before the named call's copy
        # The threads new ones are counted against (`Seal.begin`): Python's before any call of the candidate's, native
        # ones again once the warm-up or the graph's capture is over (CUDA's own may start there), as sampling begins.
        before = self.seal.begin(self.threads_baseline) if self.seal is not None else (set(), 0)
        streams = evidence.StreamWatch(self.device)  # the stream the request began on, against the one it leaves
        times_ms: list[float] = []
        host_ms: list[float] = []
        busy_ms: list[float] = []
        drains: list[tuple[Any, Any]] = []  # (end, drained) event pairs of each sample, where drained
        drain_ms: list[float] = []
        idle_drain: float | None = None  # an idle device's drain, where samples are drained

        def run_sample(s: int) -> None:
            for i in range(calls):
                made.append(model(*pool[wire.timed_set(s, i, len(pool))]))

        def keep_named(s: int) -> None:
            """After sample `s`: the output of the call the parent names now kept, as a copy. Before the worker
            says the sample is over, the sample's outputs are looked at (plain tensors made alike), storage for the
            copy is made and the seal is looked at (worker/seal/sample.py); from then to the copy only the worker's
            sealed code runs, the garbage collector off. Of the sample whose call the parent checks, the digests of
            every call's output go to the parent before it names the call (`asked_keep`, worker/seal/commit.py),
            so that an output mended after the name (the copy, or the original before it) is seen when it is
            fetched."""
            nonlocal kept_copy
            seal = self.seal if request.ask_keep else None
            doors: list[str] = []
            spans: list[list[tuple[int, int]]] = []  # each call's output's storage, taken before the seal
            if seal is not None:
                if graph is not None:
                    self.synchronize()  # the whole sample done first: no work of it can wait for the `keep`
                replaced.update(evidence.replaced_apis())
                # A tensor subclass could answer the copy, or any look at its storage, with work it never did
                # (H22); outputs made unlike each other would hide a call in another precision behind the copy.
                lazy.append(timed_outputs.not_plain(made))
                differing.append(None if lazy[-1] is not None else timed_outputs.unlike(made))
                inputs = [t for given in (static if graph is not None else pool) for t in given]
                spans = timed_outputs.call_spans(made, besides=inputs)
                if lazy[-1] is None and differing[-1] is None and kept_copy is None:
                    kept_copy = timed_outputs.empty_alike(made[0])
                doors = seal.open_doors(before)
            was = sample_seal.gc_off()
            try:
                plain = seal is not None and lazy[-1] is None and differing[-1] is None
                call = self.asked_keep(s, calls, made, plain) if request.ask_keep else -1
                if call >= 0 and seal is not None:
                    doors += seal.kernels_replaced()
                    if doors:
                        sealed_open.append(doors)
                    elif lazy[-1] is None and differing[-1] is None:
                        overwritten.append(timed_outputs.written_over(spans, call))
                        if not sample_seal.copy_kept(kept_copy, made[call]):
                            differing.append(["container", f"call {call}'s output could not be copied like call 0's"])
                        sample_seal.device_wait(cuda)  # copied before the candidate's next call could mend the original
                        list.append(self.kept, kept_copy)  # (no `append` of its runs)
                        kept_copy = None
            finally:
                sample_seal.gc_back(was)
            if graph is None:
                made.clear()
                if kept_copy is not None:
                    kept_copy = None  # made alike this sample's outputs; the next sample's may differ

        graph, static = None, None
        try:
            with torch.no_grad():
                if request.method == "do_bench":
                    from triton.testing import do_bench  # Triton's defaults, as published figures use them

                    self.send({"type": "timed", "times_ms": [float(do_bench(lambda: model(*pool[0])))]})
                    return
                if request.graph and cuda:
                    try:
                        graph, static, made = self.graph_for(model, request.compiled, pool, calls)
                    except BaseException as exc:
                        self.send({**self.describe_exception("graph", exc), "type": "graph_unsupported"})
                        return
                    # The kept output's storage made now: an allocation between samples stalls the host.
                    kept_copy = timed_outputs.empty_alike(made[0]) if request.ask_keep and self.seal else None
                else:
                    for _ in range(warmup):
                        model(*pool[0])
                self.synchronize()
                before = (before[0], sample_seal.native_tasks())
                if cuda:
                    cycles = self.sleep_cycles(float(request.precursor_ms))
                    # Without a graph a call may leave work on a stream the end event does not follow (H20): each
                    # sample is drained, the whole device waited for and an event recorded after, which the
                    # parent sets against an idle device's drain (timing/drain.py). A graph cannot hold unjoined
                    # work (its capture fails), so its samples need none.
                    idle_drain = self.drain_floor() if graph is None else None
                    events = []
                    for s in range(samples):
                        if graph is not None:  # the sample's inputs into the graph's buffers, untimed
                            self.load_static(static, pool, s)
                        busy = torch.cuda.Event(enable_timing=True)
                        start = torch.cuda.Event(enable_timing=True)
                        end = torch.cuda.Event(enable_timing=True)
                        if flush is not None:
                            flush.zero_()  # evict L2 before the sample, outside the event pair
                        busy.record()
                        if cycles:
                            torch.cuda._sleep(cycles)
                        if bracket:
                            profiler_range(torch, True)
                        t0 = time.perf_counter_ns()
                        start.record()
                        if graph is not None:
                            graph.replay()
                        else:
                            run_sample(s)
                        end.record()
                        host_ms.append((time.perf_counter_ns() - t0) / 1e6)
                        if idle_drain is not None:
                            self.synchronize()  # every stream of the device
                            drained = torch.cuda.Event(enable_timing=True)
                            drained.record()
                            drains.append((end, drained))
                        if bracket:
                            profiler_range(torch, False)
                        keep_named(s)  # after the end event (and the drain): a graph's replays reuse its outputs
                        events.append((busy, start, end))
                    self.synchronize()
                    times_ms = [s.elapsed_time(e) / calls for _, s, e in events]
                    busy_ms = [b.elapsed_time(s) for b, s, _ in events]
                    drain_ms = [e.elapsed_time(d) for e, d in drains]
                    if cycles:  # keep the sleep's length true to the request (clocks differ from the probe's)
                        self.cycles_per_ms = plausible_cycles(cycles / max(sorted(busy_ms)[len(busy_ms) // 2], 1e-3))
                else:
                    for s in range(samples):
                        t0 = time.perf_counter_ns()
                        run_sample(s)
                        host_ms.append((time.perf_counter_ns() - t0) / 1e6)
                        times_ms.append(host_ms[-1] / calls)
                        keep_named(s)
        except BaseException as exc:
            self.send(self.describe_exception("time", exc))
            return
        streams.returned()  # outside every sample; the request's stream current again
        header_out: dict[str, Any] = {
            "type": "timed",
            "times_ms": times_ms,
            "host_ms": host_ms,
            "busy_ms": busy_ms,  # how long each sample's precursor kept the GPU busy (CUDA events)
            "l2_reset": l2_reset,
            "kept": len(self.kept) - kept_before,  # outputs this request kept for `captured`
            "kept_overwritten": any(overwritten),
            "not_plain": next((kind for kind in lazy if kind is not None), None),
            "outputs_differ": next((what for what in differing if what is not None), None),
            "sealed_open": sealed_open[0][:20] if sealed_open else [],
        }
        if request.ask_keep:
            # What the request left (threads, children, flags, hooks, replaced functions: a thread started in a
            # timed call could read the parent's `keep` before the worker does), replaced functions also as they
            # were at each kept copy. The reference's own is the judge's and goes unread: it is gathered so that
            # its time is on both sides of the parent's clock (judgment/stages/untimed_work.py).
            found = evidence.import_evidence(self.pinned_flags, self.threads_baseline)
            header_out["evidence"] = {
                **found,
                "apis_replaced": sorted(replaced.union(found["apis_replaced"])),
                "streams": streams.record(),
            }
        if idle_drain is not None:  # from each sample's end event to the whole device drained, and when idle
            header_out.update(drain_ms=drain_ms, drain_floor_ms=idle_drain)
        self.send(header_out)

    def take_seal(self) -> None:
        """Take the seal (worker/seal/sample.py) once, before any code of the candidate's runs: both workers take
        and look at it alike, so that what it costs between samples is the same on both sides (the parent's clock
        sets the candidate's round trips against the reference's, timing/crosscheck.py)."""
        if self.seal is None:
            evidence.refuse_audit_hooks()
            sample_commit.warm(self.device)  # the commit's first operators' one-off cost, paid here, not in a request
            self.seal = sample_seal.Seal(self)

    def asked_keep(self, sample: int, calls: int, made: list[Any], plain: bool) -> int:
        """Say sample `sample` is over (`sampled`) and read the parent's `keep`: the call whose output to keep,
        or -1. Where the parent asks for a `commit` of n outputs first, the digests of n of the sample's outputs
        (`made`, its calls' in turn: every one where n is its calls; if `plain`: plain tensors made alike; none
        otherwise) go to it before the `keep` is read (worker/seal/commit.py). Anything else in their place breaks
        the request."""
        sample_seal.write_sampled(self.resp_fd, sample)
        call = sample_seal.read_keep(self.req_fd)
        asked = sample_seal.committed_calls(call)
        if asked is not None:
            digests = sample_commit.commit_digests([made[i % calls] for i in range(asked)]) if plain else []
            sample_commit.write_committed(self.resp_fd, sample, digests)
            call = sample_seal.read_keep(self.req_fd)
        if call is None or not -1 <= call < calls:
            raise protocol.ProtocolError(f"`sampled` answered by something other than a keep of one of {calls} calls")
        return call

    def drain_floor(self, tries: int = 5) -> float:
        """What draining an idle device takes between two events (the host's wait and the next record): the
        least of a few tries."""
        torch = self.torch
        seen = []
        for _ in range(tries):
            before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            before.record()
            self.synchronize()
            after.record()
            after.synchronize()
            seen.append(before.elapsed_time(after))
        return min(seen)

    def op_captured(self, request: protocol.Captured, args: Any) -> None:
        """The oldest output a `time` request kept and this worker still keeps, sent back (then dropped here)."""
        if not self.kept:
            self.send(self.describe_exception("time", RuntimeError("no kept output: `time` with `ask_keep` first")))
            return
        self.send_captured({"type": "captured"}, self.kept.pop(0))

    def send_captured(self, header_out: dict[str, Any], captured: Any) -> None:
        """Send a response with one call's output described and, where it is plain tensors, attached."""
        described = self.describe_output(captured)
        header_out.update(described)
        if not all(d["plain_tensor"] for d in described["items"]):
            self.send(header_out)
            return
        items = list(captured) if isinstance(captured, (tuple, list)) else [captured]
        self.send_values(header_out, captured=items)

    def sleep_cycles(self, precursor_ms: float) -> int:
        """GPU clock cycles of `torch.cuda._sleep` that last about `precursor_ms`, from one measurement."""
        if precursor_ms <= 0:
            return 0
        if self.cycles_per_ms is None:
            torch = self.torch
            probe = 2_000_000
            for _ in range(2):  # the first also loads the kernel
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.cuda._sleep(probe)
                end.record()
                end.synchronize()
            self.cycles_per_ms = plausible_cycles(probe / max(start.elapsed_time(end), 1e-3))
        return int(precursor_ms * self.cycles_per_ms)

    def reset_persisting_l2(self) -> bool:
        """Return every persisting L2 line to normal (cudaCtxResetPersistingL2Cache); False if unavailable."""
        import ctypes

        try:
            if self.cudart is None:
                major = str(self.torch.version.cuda).split(".")[0]
                self.cudart = ctypes.CDLL(f"libcudart.so.{major}")  # torch has loaded it: dlopen returns that copy
            self.synchronize()
            return self.cudart.cudaCtxResetPersistingL2Cache() == 0
        except Exception:
            return False

    def flush_buffer(self, nbytes: int) -> Any:
        """A device buffer of `nbytes` to overwrite before each sample (L2 flush); kept between requests."""
        if nbytes <= 0 or self.device.type != "cuda":
            return None
        if self.flush is None or self.flush.numel() != nbytes:
            self.flush = self.torch.empty(nbytes, dtype=self.torch.int8, device=self.device)
        return self.flush
