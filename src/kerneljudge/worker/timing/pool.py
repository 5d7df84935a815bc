"""The reference worker's timing pool: the input sets timed made again and kept on the device, the
reference's and the oracle's outputs on them kept in slots for the timed calls' checks, and the reference
compiled with torch.compile before it is timed (the timing itself: worker/timing/timer.py).

Trusted code: it runs in the reference worker (worker/reference.py), which never sees the candidate's code.
"""

from __future__ import annotations

import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.protocol import wire
from kerneljudge.worker.base import describe_exception
from kerneljudge.worker.correctness.outputs import signature


class TimingPool:
    """The reference worker's `stage` and `compile` requests (worker/reference.py)."""

    torch: Any
    model: Any
    channels: Any
    slots: dict[str, dict[str, Any]]
    timed_checks: Any  # worker/correctness/compare.py

    def op_stage(self, request: protocol.Stage, args: Any) -> None:
        """The timing pool: the input sets of `sets` (each a trial's seed and variant) made again, kept here
        for timing the reference, their outputs and the oracle's in slots pool0, pool1, ..., and written to
        the candidate's inbox one after another (or, `inputs_to` "made", described for the candidate's worker
        to make again, worker/correctness/seeded.py; "here": kept here only, where no candidate is judged, as in `tasks
        lint`); or, without `sets`, the pool `args` sent by the parent."""
        torch = self.torch
        try:
            if request.sets is None:
                self.staged = [self.to_device(list(inputs)) for inputs in args]
                self.graphs = {}
                self.synchronize()
                self.send({"type": "staged", "sets": len(self.staged)})
                return
            self.slots = {name: slot for name, slot in self.slots.items() if not name.startswith("pool")}
            self.staged, self.graphs = [], {}
            self.release_cached()
            pool, trees, described, start, made = [], [], {}, 0, []
            for k, spec in enumerate(request.sets):  # clocked by parts: `stage:inputs`, `:reference`, ...
                began = time.perf_counter()
                seed = int(spec["seed"])
                inputs = self.make_inputs(seed, request.on_device)
                variant = spec.get("variant") or {"kind": "standard"}
                inputs, _ = self.reshaped(inputs, variant, seed)
                if request.inputs_to == "made":
                    made.append(self.place_inputs(inputs, "made", seed, variant)["made"])
                inputs = self.to_device(inputs)
                self.clocked("inputs", began)
                began = time.perf_counter()
                out, _, oracle_out = self.run_reference(wire.cloned(inputs), True)
                self.clocked("reference", began)
                began = time.perf_counter()
                self.slots[f"pool{k}"] = {
                    "out": out,
                    "oracle": oracle_out,
                    "kept": None,
                    "checks": None,
                    "inputs": self.kept_for_check(inputs),
                }
                if request.tolerances and oracle_out is not None:  # made now, outside the measuring hold
                    try:
                        self.timed_checks(self.slots[f"pool{k}"], request.tolerances)
                    except Exception:  # none made: left to the first check, which reports what is wrong
                        pass
                self.clocked("checks", began)
                pool.append(inputs)
                if made or request.inputs_to == "here":
                    continue
                began = time.perf_counter()
                tree, tensors = wire.pack_values(inputs)
                renamed = {f"s{k}.{name}": t for name, t in tensors.items()}
                written = self.channels.write("candidate_in", renamed, start)
                self.clocked("write", began)
                start = max((d["offset"] + d["nbytes"] for d in written.values()), default=start)
                described |= written
                trees.append(wire.prefixed(tree, f"s{k}."))
            self.staged, self.graphs = pool, {}
            self.synchronize()
        except BaseException as exc:
            self.send(describe_exception("time", exc))
            return
        staged = {"type": "staged", "sets": len(pool), "inputs": trees, "input_tensors": described}
        if made:
            staged = {"type": "staged", "sets": len(pool), "made": made}
        self.send({**staged, "signature": signature(torch, self.slots["pool0"]["out"]) if pool else None})

    def op_compile(self, request: protocol.Compile, args: Any) -> None:
        """Build the torch.compile'd model and run it once on the first staged set, so compilation is
        never timed."""
        torch = self.torch
        try:
            inputs = self.staged[0] if self.staged else self.to_device(list(args))
            with torch.no_grad():
                self.compiled = torch.compile(self.model)
                self.compiled(*inputs)
            self.synchronize()
        except BaseException as exc:
            self.compiled = None
            self.send(describe_exception("compile", exc))
            return
        self.send({"type": "compiled"})
