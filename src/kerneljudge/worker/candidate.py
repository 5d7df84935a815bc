"""The candidate worker: imports the untrusted candidate and runs it on the inputs it is sent.

Once the candidate is imported, anything in this process may have been replaced, which is why nothing
here is trusted: it reports what the call returned (written to its outbox, where the reference worker reads
it to compare) and what it observed around the call (worker/evidence.py), and the parent decides. It holds
its own two channels only: the reference's, where the oracle lies, are never handed to it.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import Any

from kerneljudge import protocol
from kerneljudge.protocol import channel, wire
from kerneljudge.protocol.limits import HOST_BUSY_KINDS
from kerneljudge.worker import evidence, trace
from kerneljudge.worker.base import TEXT_CAP, Worker
from kerneljudge.worker.correctness import perturb, seeded


class CandidateWorker(Worker):
    role = "candidate"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.prev_inputs: list[Any] = []
        self.prev_outputs: list[Any] = []
        self.returned: list[Any] = []  # weak references to every output tensor returned so far
        # The task's inputs-only module (tasks/inputs_source.py), to make trials' inputs from their seeds
        # (worker/correctness/seeded.py); never the task itself, whose Model the candidate could answer with.
        self.inputs_module: Any = None
        self.inputs_error: str | None = None
        self.last_call_s = (
            0.0  # the last call's length, which sizes a perturbed replay's load (worker/correctness/perturb.py)
        )
        self.product_ms: float | None = None  # one of that load's matrix products, measured once

    def spoil_returned(self) -> None:
        """Overwrite the storage of every output returned earlier that is still alive (NaN bytes for floating
        point, 0x5A bytes else) before the next call, parameters and buffers of the model excepted.

        An output cache, keyed on the input's content or its address, answers with a tensor it returned
        before: now spoiled, the answer fails the comparison. A candidate that writes each call's answer
        into one static buffer (torch.compile's CUDA graphs) writes over the spoiled bytes and is right,
        which is why reusing the previous output's storage is only recorded under the practical policy
        (KJ-R022, checks/runtime.py).
        """
        torch = self.torch
        model = self.model if isinstance(self.model, torch.nn.Module) else None
        kept = [evidence.storage_span(t) for t in (*model.parameters(), *model.buffers())] if model is not None else []
        alive = []
        for ref in self.returned:
            t = ref()
            if t is None:
                continue
            try:
                if any(evidence.overlaps(evidence.storage_span(t), k) for k in kept):
                    alive.append(ref)
                    continue
                raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
                raw.fill_(0xFF if t.is_floating_point() or t.is_complex() else 0x5A)
            except RuntimeError:
                # torch.compile's CUDA graphs refuse any use of an output a later run has overwritten (on an H200,
                # GPU MODE's pmpp sort): no one can hand it back as an answer either.
                continue
            alive.append(ref)
        self.returned = alive[-256:]

    def op_load(self, request: protocol.Load, args: Any) -> None:
        """Import the candidate (once) and build ModelNew from the reference's init inputs after the seed.

        `task`: the task's inputs-only source (tasks/inputs_source.py: get_inputs and what it reaches, no
        Model), loaded first (before any candidate code runs) to make trials' inputs here; what its import
        sets (flags, threads) is the baseline the candidate's evidence is read against.
        """
        began = time.perf_counter()  # the parts as this worker clocks them: task, import, build, evidence
        if request.task is not None and self.module is None and self.inputs_module is None:
            try:
                self.inputs_module = seeded.load_text(request.task, seeded.INPUTS_MODULE)
            except Exception as exc:  # the trials' inputs are shipped then
                self.inputs_error = f"{type(exc).__name__}: {exc}"[:TEXT_CAP]
            self.pinned_flags = evidence.numerics_flags()
            self.threads_baseline = evidence.python_threads()
            self.clocked("task", began)
        self.take_seal()  # before any code of the candidate's runs
        if self.module is None:  # once, before the candidate's first import: later loads would absorb its threads
            evidence.take_native_baseline()  # the threads the worker's own work started count as its own (KJ-R012)
        began = time.perf_counter()
        if not self.import_source("kj_candidate"):
            return
        self.clocked("import", began)
        self.prev_inputs, self.prev_outputs, self.returned = [], [], []
        began = time.perf_counter()
        try:
            cls = getattr(self.module, "ModelNew", None)
            if cls is None:
                raise AttributeError("the candidate defines no ModelNew")
            self.build(cls, list(args), request.seed)
        except BaseException as exc:
            self.send(self.describe_exception("init", exc))
            return
        self.clocked("build", began)
        began = time.perf_counter()
        found = evidence.import_evidence(self.pinned_flags, self.threads_baseline)
        self.clocked("evidence", began)
        self.send({"type": "loaded", "evidence": found})

    def poison(self, nbytes: int) -> int:
        """Fill memory the allocator will hand out next with NaN, so unwritten output cannot look plausible; the
        bytes poisoned. The judge's own allocation: where the device cannot hold `nbytes` (twice the output) it
        frees the allocator's cache and tries again, then poisons half (one output, what the candidate's output
        is placed in), then none; never the candidate's out-of-memory (KernelBench's 6 GiB elementwise problems
        on an H100 ran short here, 2026-12-05)."""
        for size, again in ((nbytes, False), (nbytes, True), (nbytes // 2, True)):
            if size <= 0:
                return 0
            if again:
                self.release_cached()
            try:
                junk = self.torch.full((-(-size // 4),), float("nan"), device=self.device)
            except RuntimeError as exc:  # torch.OutOfMemoryError on CUDA, a RuntimeError on the CPU
                if not any(sign in str(exc).lower() for sign in ("out of memory", "can't allocate memory")):
                    raise
                continue
            del junk
            return size
        return 0

    def op_stage(self, request: protocol.Stage, args: Any) -> None:
        """Keep the timing pool on the device: the input sets the reference wrote to the inbox, or those
        `made` describes, made here (worker/correctness/seeded.py; "inputs_differ" where one is not the reference's)."""
        sets = [list(inputs) for inputs in args]
        if request.made is not None:
            sets = []
            for spec in request.made:
                inputs = self.remade(spec)
                if inputs is None:
                    return
                sets.append(inputs)
        try:
            self.staged = sets
            self.graphs = {}
            self.synchronize()
        except BaseException as exc:
            self.send(self.describe_exception("time", exc))
            return
        self.send({"type": "staged", "sets": len(self.staged)})

    def reuse_storage(self, inputs: list[Any]) -> list[Any]:
        """A canary: the new values copied into the previous call's input tensors (same storage)."""
        torch = self.torch
        if len(self.prev_inputs) != len(inputs):
            return inputs
        reused = []
        for old, new in zip(self.prev_inputs, inputs, strict=True):
            if (
                isinstance(new, torch.Tensor)
                and isinstance(old, torch.Tensor)
                and old.shape == new.shape
                and old.dtype == new.dtype
                and old.stride() == new.stride()
                and (old.is_contiguous() or wire.layout(old) is not None)
            ):
                old.copy_(new)
                reused.append(old)
            else:
                reused.append(new)
        return reused

    def op_call(self, request: protocol.Call, args: Any) -> None:
        """Run the candidate once on private device copies of the inputs and report the output.

        With `trace` set (on CUDA) the call, the wait for its stream and the judge's own
        evidence work run under the profiler, each in a named range, and the kernel
        events go back with the output. With `perturb` set (on CUDA) the call runs under the conditions it
        names (worker/correctness/perturb.py).
        """
        torch = self.torch
        inputs = list(args)  # read onto this device from the inbox: private copies already
        if not request.reuse_inputs:
            self.prev_inputs = []
        if request.made is not None:
            self.release_cached()  # what the last call cut its blocks for, before multi-GiB inputs are made
            made = time.perf_counter()
            inputs = self.remade(request.made)
            if inputs is None:
                return
            self.clocked("inputs", made)
        try:
            self.spoil_returned()  # before the canary writes new values into storage an output may share
        except Exception as exc:
            self.send(self.describe_exception("call", exc))
            return
        self.release_cached()
        if request.reuse_inputs:
            inputs = self.reuse_storage(inputs)
        tracer = trace.KernelTrace(torch) if request.trace and self.device.type == "cuda" else None
        perturbed: dict[str, Any] = {}
        poisoned = request.poison_bytes
        with contextlib.ExitStack() as stack:
            span = tracer.range if tracer is not None else (lambda name: contextlib.nullcontext())
            try:
                watch = evidence.CallWatch(inputs, self.pinned_flags, self.device)
                judges_before = evidence.native_thread_ids()  # what the judge's own setup below starts is its own
                if tracer is not None:
                    stack.enter_context(tracer.active())
                    with span("marker"):  # one tiny kernel that names the current stream in the trace
                        torch.zeros(1, device=self.device)
                perturbed = stack.enter_context(perturb.perturbed(self, request.perturb, self.last_call_s))
                # Poison last, after the judge's own allocations, so the next allocation is the candidate's.
                poisoned = self.poison(request.poison_bytes)
                if request.call_seed is not None:  # the random state the reference's call started from
                    self.set_seed(request.call_seed)
                watch.judge_threads(evidence.native_thread_ids() - judges_before)
                watch.host_busy = perturbed.get("applied") in HOST_BUSY_KINDS
                perturb.begin_call(self)  # a pending sm_hold counts from here, on the call's stream
                began = time.perf_counter()
                watch.calling()  # the stream the call is made on, compared with the one it leaves (KJ-R028)
                with torch.no_grad(), span("call"):
                    out = self.model(*inputs)
                watch.returned()  # every thread's CPU clock from here (KJ-R012); the call's stream current again
                perturb.end_call(self)  # a pending sm_hold ends once the call's stream has run what the call put there
                if tracer is not None:
                    # A tiny kernel on the call's stream after everything the call put there: work the call left
                    # on another stream without making this one wait for it may still run when this one does.
                    with span("tail"), watch.on_entry():
                        torch.zeros(1, device=self.device)
                # Snapshot after the current stream finishes, compare after the whole device has: a
                # difference means work was still running elsewhere when the call returned.
                with span("sync"):
                    self.stream_synchronize()
                self.last_call_s = time.perf_counter() - began
                self.clocked("call", began)
            except BaseException as exc:
                self.send(self.describe_exception("call", exc))
                return
            items = list(out) if isinstance(out, (tuple, list)) else [out]
            watched: list[Any] = []
            try:
                # Only outputs that really are tensors on this device can be re-read; the parent judges the rest.
                watched = [x for x in items if type(x) is torch.Tensor and x.device.type == self.device.type]
                with span("evidence"):
                    began = time.perf_counter()
                    observed = watch.after(watched, self.prev_outputs, self.synchronize, float(request.reread_s))
                    self.clocked("evidence", began)
            except Exception as exc:  # evidence that cannot be gathered is reported as such, never as a verdict
                observed = {"error": f"{type(exc).__name__}: {exc}"[:TEXT_CAP]}
        if tracer is not None:
            observed = {**observed, "trace": tracer.report()}
        # The previous output stays alive (an output in its storage is a stale answer, H06); the inputs only
        # when the next call is the canary, which writes new values into them (a 6 GiB input kept for nothing
        # ran the device out of memory beside the reference's).
        self.prev_inputs, self.prev_outputs = (inputs if request.keep_inputs else []), watched
        self.returned += [weakref.ref(t) for t in watched]
        described = self.describe_output(out)
        header_out: dict[str, Any] = {"type": "output", **described, "evidence": observed}
        if perturbed:
            header_out["perturbed"] = perturbed
        if poisoned < request.poison_bytes:
            header_out["poisoned_bytes"] = poisoned
        if not all(d["plain_tensor"] for d in described["items"]):
            self.send(header_out)
            return
        try:
            self.send_values(header_out, values=items)
        except (channel.ChannelError, RuntimeError, TypeError) as exc:  # e.g. a meta tensor has no data
            self.send({**header_out, "unreadable": f"{type(exc).__name__}: {exc}"[:TEXT_CAP]})

    def remade(self, spec: dict[str, Any]) -> list[Any] | None:
        """The trial's inputs made here as the reference made them (worker/correctness/seeded.py), on this device; None,
        with an "inputs_differ" answer sent, when they cannot be made or their fingerprint is not the
        reference's."""
        why = self.inputs_error or ("no inputs source was sent" if self.inputs_module is None else None)
        inputs: list[Any] = []
        if why is None:
            try:
                inputs = seeded.remake(self.torch, self.inputs_module, spec, self.device, self.set_seed)
                if seeded.fingerprint(self.torch, inputs) != spec.get("fingerprint"):
                    why = "their fingerprint differs from the reference's"
                inputs = seeded.moved(self.torch, inputs, self.device)
            except Exception as exc:
                why = f"making them failed: {type(exc).__name__}: {exc}"[:TEXT_CAP]
        if why is None:
            return inputs
        del inputs
        self.send({"type": "inputs_differ", "detail": why})
        return None

    def op_recheck(self, request: protocol.Recheck, args: Any) -> None:
        """After a graph's replays, one plain call on the graph's own buffer `buffer`, its output sent back.

        Each pool set is first copied back into its own buffer, the arrangement of the capture, which no
        replay uses: a candidate that answers from what it kept of earlier calls (its last answer, or a
        cache keyed on the buffer's storage) answers for other contents than the buffer holds now.
        """
        torch = self.torch
        key = (request.compiled, request.calls)
        model = self.compiled if request.compiled else self.model
        if key not in self.graphs or model is None:
            self.send(
                self.describe_exception("time", RuntimeError("no CUDA graph to recheck: time with `graph` first"))
            )
            return
        _, static, _ = self.graphs[key]
        try:
            with torch.no_grad():
                self.fill_static(static, self.staged)
                out = model(*static[request.buffer])
                self.synchronize()
        except BaseException as exc:
            self.send(self.describe_exception("time", exc))
            return
        self.send_captured({"type": "rechecked"}, out)
