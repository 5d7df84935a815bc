"""The reference worker's comparisons: the candidate's outputs, read from its outbox, against a slot's
reference and oracle outputs, on the device, by the parent's tolerances (checks/correctness.py); and the
task's own check of an output, where the task has one (a GPU MODE problem's, tasks/gpumode.py).

Trusted code: it runs in the reference worker (worker/reference.py), which never sees the candidate's code.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks import correctness, replay, support
from kerneljudge.worker.base import describe_exception, items_of
from kerneljudge.worker.correctness.outputs import json_safe
from kerneljudge.worker.seal import digest as commit_digest


class Comparisons:
    """The reference worker's `compare` request and the task's own check (worker/reference.py)."""

    torch: Any
    module: Any
    slots: dict[str, dict[str, Any]]
    no_oracle: str | None

    @property
    def task_check(self) -> Any:
        """The task's own check of an output, `kerneljudge_check(inputs, output) -> (passed, message)` (a GPU
        MODE problem's check_implementation, tasks/gpumode.py), or None."""
        check = getattr(self.module, "kerneljudge_check", None)
        return check if callable(check) else None

    def kept_for_check(self, inputs: list[Any]) -> Any:
        """A copy of the trial's inputs as made, for the task's own check (the reference may write into them):
        deep, for state held in objects too (GPU MODE's amd/mla-decode hands over a dataclass of weights and
        a KV cache module that the reference appends to). The task's objects are trusted here."""
        return copy.deepcopy(inputs) if self.task_check is not None else None

    def run_task_check(self, slot: dict[str, Any], outputs: list[Any], container: str) -> dict[str, Any]:
        """The task's own check on the slot's inputs and the candidate's output, returned as it was."""
        output = outputs[0] if container == "Tensor" else (tuple(outputs) if container == "tuple" else outputs)
        try:
            with self.torch.no_grad():
                passed, message = self.task_check(copy.deepcopy(slot["inputs"]), output)
        except Exception as exc:  # a check that cannot even run on this output rejects it
            if isinstance(exc, MemoryError) or support.out_of_memory(f"{type(exc).__name__}: {exc}"):
                # The trusted side short of memory (other lanes' work fills the device: GPU MODE's qr_v2 and
                # mla-decode on an H200) says nothing of the output: the compare fails, the batch judges it
                # again alone (backends.lane.short_of_memory).
                raise
            passed, message = False, f"the check raised {type(exc).__name__}: {exc}"
        return {"passed": bool(passed), "message": str(message)[:2000]}

    def timed_checks(self, slot: dict[str, Any], tolerances: list[dict[str, Any]]) -> list[Any]:
        """The slot's checks of timed outputs by these tolerances (correctness.OracleCheck, one per output),
        made once: at staging, where the parent sends the tolerances with the pool, else at the first check."""
        if slot.get("checks") is None or slot.get("checks_for") != tolerances:
            refs, oracles = items_of(slot["out"]), items_of(slot["oracle"])
            tols = [correctness.Tolerance(**t) for t in tolerances]
            slot["checks"] = [correctness.OracleCheck(r, o, t) for r, o, t in zip(refs, oracles, tols, strict=True)]
            slot["checks_for"] = tolerances
        return slot["checks"]

    def op_compare(self, request: protocol.Compare, args: Any) -> None:
        """Compare the candidate's outputs (`args`, read from its outbox) with slot `slot`.

        `method`: "oracle" (the hardened rule), "native" (KernelBench's allclose with the reference),
        "replay" (with the candidate's own outputs kept from the slot's first call: races), "timed" (a
        timed call's output, by the per-slot precomputed check). `keep` keeps these outputs for a replay.
        `tolerances`: per output, atol, rtol and ref_error_factor, as the parent chose them.
        """
        torch = self.torch
        slot = self.slots.get(request.slot)
        outputs = list(args) if isinstance(args, (list, tuple)) else [args]
        try:
            if slot is None:
                raise LookupError(f"no slot {request.slot!r}")
            refs, oracles = items_of(slot["out"]), items_of(slot["oracle"]) if slot["oracle"] is not None else None
            tolerances = [correctness.Tolerance(**t) for t in request.tolerances]
            if not (len(outputs) == len(refs) == len(tolerances)):
                raise ValueError("the outputs do not match the reference's")
            own_check = request.task_check and slot.get("inputs") is not None
            for c, r in zip(outputs, refs, strict=True):
                if not isinstance(c, torch.Tensor) or (not own_check and (c.dtype != r.dtype or c.shape != r.shape)):
                    raise ValueError("an output does not match the reference's dtype and shape")
            method = request.method
            results = []
            began = time.perf_counter()
            for i, (c, r, tol) in enumerate(zip(outputs, refs, tolerances, strict=True)):
                o = oracles[i] if oracles is not None else None
                if method == "replay" and (c.dtype != r.dtype or c.shape != r.shape or o is None):  # its own two runs
                    first = slot["kept"][i]
                    cmp = replay.compare_replay(first, c, first, first.double(), tol)
                    results.append(
                        {
                            "passed": cmp.passed,
                            "failure_kind": cmp.failure_kind,
                            "summary": cmp.summary,
                            "metrics": cmp.metrics,
                        }
                    )
                    continue
                mismatch = c.dtype != r.dtype or c.shape != r.shape
                if mismatch or (o is None and own_check and method != "native"):  # the task's own check decides
                    why = (
                        f"{str(c.dtype).removeprefix('torch.')} {list(c.shape)} where the reference gives "
                        f"{str(r.dtype).removeprefix('torch.')} {list(r.shape)}"
                        if mismatch
                        else f"the reference has none ({self.no_oracle})"
                    )
                    results.append(
                        {
                            "passed": None,
                            "failure_kind": None,
                            "summary": f"not compared with the oracle: {why}",
                            "metrics": {"numel": int(c.numel())},
                        }
                    )
                    continue
                if method == "native":
                    cmp = correctness.compare_native(c, r, tol)
                elif method == "replay":
                    cmp = replay.compare_replay(slot["kept"][i], c, r, o, tol)
                elif method == "timed":
                    cmp = self.timed_checks(slot, request.tolerances)[i].compare(c)
                else:
                    cmp = correctness.compare_to_oracle(c, r, o, tol)
                results.append(
                    {
                        "passed": cmp.passed,
                        "failure_kind": cmp.failure_kind,
                        "summary": cmp.summary,
                        "metrics": cmp.metrics,
                    }
                )
            self.synchronize()
            self.clocked("compare", began)
            checked = None
            if own_check and method != "replay":
                began = time.perf_counter()
                checked = self.run_task_check(slot, outputs, request.container)
                self.clocked("task_check", began)
        except Exception as exc:
            self.send(describe_exception("compare", exc))
            return
        if request.keep:
            slot["kept"] = outputs
        reply = {"type": "compared", "results": json_safe(results), "task_check": checked}
        if method == "timed":  # set against the digests the candidate's worker committed (worker/seal/commit.py)
            reply["digests"] = [list(d) for d in commit_digest.settled([commit_digest.pending(c) for c in outputs])]
        self.send(reply)
