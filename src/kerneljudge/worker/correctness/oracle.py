"""The reference worker's runs of the trusted task on a trial's inputs: the reference itself, on the inputs
as they went to the candidate, and the float64 oracle (float32, TF32 off, where an op lacks float64) on
copies of them, rounded like the reference's outputs (worker/correctness/outputs.py).

Trusted code: it runs in the reference worker (worker/reference.py), which never sees the candidate's code.
"""

from __future__ import annotations

import copy
from typing import Any

from kerneljudge.checks import support
from kerneljudge.protocol import wire
from kerneljudge.worker import evidence
from kerneljudge.worker.base import items_of
from kerneljudge.worker.correctness.memo import OutputMemo
from kerneljudge.worker.correctness.outputs import rounded_like


class NoOracle(RuntimeError):
    """The reference has no float64 or float32 form (checks/support.py makes the task UNSUPPORTED, unless the
    task checks outputs itself: then its own check decides alone)."""


class ReferenceRuns:
    """The reference and its oracle run (worker/reference.py), and the state they keep between trials."""

    torch: Any
    device: Any
    model: Any
    pinned_flags: Any
    oracle: Any
    oracle_dtype: str | None
    draws_random: bool
    no_oracle: str | None
    memo: OutputMemo

    def rng_state(self) -> Any:
        torch = self.torch
        return (torch.get_rng_state(), torch.cuda.get_rng_state() if self.device.type == "cuda" else None)

    def set_rng_state(self, state: Any) -> None:
        cpu, cuda = state
        self.torch.set_rng_state(cpu)
        if cuda is not None:
            self.torch.cuda.set_rng_state(cuda)

    def run_reference(
        self, inputs: list[Any], oracle: bool, call_seed: int | None = None
    ) -> tuple[Any, dict[str, Any], Any]:
        """The oracle's output (on copies) and then the reference's on the inputs themselves (an in-place
        reference may change them: they have already gone to the candidate), and what it did to them.

        `call_seed`: the random state each forward starts from, the one the candidate's call starts from too,
        so that a reference that draws random numbers in its forward (KernelBench's LSTM draws its initial
        states) draws the same ones as a candidate that draws them the same way. Whether it drew any is
        observed (`draws_random`).
        """
        torch = self.torch
        if call_seed is not None:
            self.set_seed(call_seed)
        oracle_out = None
        if oracle:
            try:
                oracle_out = self.run_oracle(inputs)
            except NoOracle as exc:
                if self.task_check is None:
                    raise
                self.no_oracle = str(exc)[:500]  # GPU MODE's amd/moe mixes float and half inside: its check decides
        device_inputs = [
            wire.placed(x, self.device) if isinstance(x, torch.Tensor) and x.device != self.device else x
            for x in inputs
        ]
        watch = evidence.CallWatch(device_inputs, self.pinned_flags)
        if call_seed is not None:
            self.set_seed(call_seed)
        before = self.rng_state()
        with torch.no_grad():
            self.memo.forwards += 1
            out = self.model(*device_inputs)
            self.synchronize()
            after = self.rng_state()
            self.draws_random = any(a is not None and not torch.equal(a, b) for a, b in zip(before, after, strict=True))
            observed = watch.after([x for x in items_of(out) if isinstance(x, torch.Tensor)], [], self.synchronize, 0.0)
        return out, observed, rounded_like(torch, oracle_out, out) if oracle_out is not None else None

    def run_oracle(self, inputs: list[Any]) -> Any:
        """The reference in float64 on float64 copies of the inputs (float32, TF32 off, where an op lacks
        float64). Integer, boolean and quantised inputs (float8, float4: data an op decodes with its scales)
        are copied as they are."""
        torch = self.torch
        wide = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
        last_error: BaseException | None = None
        # Each attempt starts from the random state the reference's run starts from: a float64 attempt that drew
        # before it failed (an LSTM's initial states, then a float32 one against float64 weights) would otherwise
        # leave the float32 oracle other draws than the reference's, and their difference as its slack.
        start = self.rng_state()
        for dtype in (torch.float64, torch.float32):
            if self.oracle is not None and self.oracle_dtype != str(dtype).removeprefix("torch."):
                continue
            self.set_rng_state(start)
            try:
                if self.oracle is None:
                    model = copy.deepcopy(self.model)
                    self.oracle = model.to(dtype) if hasattr(model, "to") else model
                    self.oracle_dtype = str(dtype).removeprefix("torch.")
                cast = [
                    x.to(self.device, dtype, copy=True)
                    if isinstance(x, torch.Tensor) and x.dtype in wide
                    else (x.to(self.device, copy=True) if isinstance(x, torch.Tensor) else x)
                    for x in inputs
                ]
                with torch.no_grad():
                    out = self.oracle(*cast)
                self.synchronize()
                return out
            except Exception as exc:  # an op without float64 support: fall back to float32, TF32 off
                self.oracle = None
                self.oracle_dtype = None
                if isinstance(exc, MemoryError) or support.out_of_memory(f"{type(exc).__name__}: {exc}"):
                    raise  # short of memory says nothing of float64: the device's load must not pick the oracle
                last_error = exc
        # Neither ran: the reference itself may not run here (its own error says why), or it has no oracle.
        device_inputs = [x.to(self.device, copy=True) if isinstance(x, torch.Tensor) else x for x in inputs]
        with torch.no_grad():
            self.model(*device_inputs)
        raise NoOracle(f"the reference runs, but neither in float64 nor in float32: {last_error}")
