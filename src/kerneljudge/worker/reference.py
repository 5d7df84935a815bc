"""The reference worker: the trusted task, its inputs, its outputs, the float64 oracle, and the comparisons.

It never sees candidate code, so what it computes can be trusted: it makes each trial's inputs from a
seed the parent sends (on the device where the task allows: a 4 GiB input is made in milliseconds there,
in seconds on the host), writes them into the candidate's inbox, runs the reference and the oracle, and
keeps their outputs on the device in a named slot. When the candidate has answered, the parent sends the
candidate's outputs here (they lie in the candidate's outbox) and this worker compares them with the slot,
on the device, by the parent's tolerances (checks/correctness.py); the parent decides from the figures.
"""

from __future__ import annotations

import copy
import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks import correctness, replay, support
from kerneljudge.worker import contracts, derived, evidence, family, footprint, seeded, wire
from kerneljudge.worker.base import Worker, describe_exception, items_of
from kerneljudge.worker.outputs import all_finite, differences, json_safe, rounded_like, screen, signature


class NoOracle(RuntimeError):
    """The reference has no float64 or float32 form (checks/support.py makes the task UNSUPPORTED, unless the
    task checks outputs itself: then its own check decides alone)."""


class ReferenceWorker(Worker):
    role = "reference"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.oracle: Any = None
        self.oracle_dtype: str | None = None
        self.family: dict[str, Any] = {}  # the task's shape family as described to the parent
        self.family_error: str | None = None
        self.contract: dict[str, Any] = {}  # the task's declared input contract (worker/contracts.py)
        self.contract_error: str | None = None
        self.shaped = False  # the task's globals are set to a hidden shape of its family
        self.public_input_bytes: int | None = None  # the last trial's inputs at the public shape
        self.inputs_on_device: bool | None = None  # None: not tried yet
        self.slots: dict[str, dict[str, Any]] = {}  # per name: the reference's and the oracle's outputs
        self.draws_random = False  # the last forward drew random numbers (torch.randn in forward, dropout)
        self.no_oracle: str | None = None  # why the reference has no oracle, where its task's own check decides

    # ------------------------------------------------------------ building

    def op_load(self, request: protocol.Load, args: Any) -> None:
        """Import the task (once), set its globals to the hidden shape `shape` names (or back to the public
        one), and build the model after the seed; the first answer describes the shape family."""
        if self.module is None:
            if not self.import_source("kj_reference"):
                return
            try:
                self.family = family.describe(self.module)
            except family.FamilyError as exc:  # the parent decides what a malformed family costs
                self.family, self.family_error = {}, str(exc)[:4096]
            try:
                self.contract = contracts.read_declared(getattr(self.module, "INPUT_CONTRACT", None))
            except ValueError as exc:
                self.contract, self.contract_error = {}, str(exc)[:4096]
        self.oracle, self.oracle_dtype, self.slots = None, None, {}
        try:
            if request.shape is not None or self.shaped:
                family.apply(self.module, request.shape or {}, self.family.get("public", {}))
                self.shaped = request.shape is not None
            self.set_seed(request.seed)
            init_inputs = list(self.module.get_init_inputs())
            self.build(self.module.Model, init_inputs, request.seed)
        except BaseException as exc:
            self.send(describe_exception("init", exc))
            return
        parameters = list(self.model.parameters()) if hasattr(self.model, "parameters") else []
        loaded = {
            "type": "loaded",
            "evidence": evidence.import_evidence(self.pinned_flags, self.threads_baseline),
            "parameter_count": sum(p.numel() for p in parameters),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in parameters),
            "family": self.family,
            "family_error": self.family_error,
            "contract_error": self.contract_error,
            "inputs_writable": getattr(self.module, "INPUTS_WRITABLE", False) is True,
            "footprint": footprint.describe(self.torch, self.module, init_inputs) if request.footprint else None,
        }
        self.send_values(loaded, init_inputs=init_inputs)

    def op_derive(self, request: protocol.Derive, args: Any) -> None:
        """A family derived from the task's size globals (worker/derived.py), asked after the public trials
        of a task that declares none; `declared`: it declares that it has none (`SHAPE_FAMILY = []`)."""
        parameters = list(self.model.parameters()) if hasattr(self.model, "parameters") else []
        known = self.public_input_bytes is not None and not self.shaped
        public_bytes = self.public_input_bytes + footprint.tensor_bytes(self.torch, parameters) if known else None
        found = derived.family_for(self.torch, self.module, public_bytes) if not self.family else {}
        self.family = found or self.family  # the shapes a later `load` names are set against its public values
        self.send({"type": "derived", "family": found, "declared": derived.declares(self.module)})

    # ------------------------------------------------------------ inputs and outputs

    def make_inputs(self, seed: int, on_device: bool) -> list[Any]:
        """The task's inputs for `seed`: made on the device when asked and the task allows (its get_inputs
        runs under the device as default; one that fails there is made on the host from then on)."""
        if on_device and self.device.type == "cuda" and self.inputs_on_device is not False:
            try:
                inputs = seeded.make(self.torch, self.module, seed, self.device, True, self.set_seed)
                self.inputs_on_device = True
                return inputs
            except Exception:
                self.inputs_on_device = False
        return seeded.make(self.torch, self.module, seed, self.device, False, self.set_seed)

    def rng_state(self) -> Any:
        torch = self.torch
        return (torch.get_rng_state(), torch.cuda.get_rng_state() if self.device.type == "cuda" else None)

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
        for dtype in (torch.float64, torch.float32):
            if self.oracle is not None and self.oracle_dtype != str(dtype).removeprefix("torch."):
                continue
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

    def op_trial(self, request: protocol.Trial, args: Any) -> None:
        """One trial: inputs from `seed` (reshaped by `variant` where the task's input contract allows),
        written to the candidate's inbox (`inputs_to` "candidate") or sent back ("parent"); the reference's
        and the oracle's outputs kept in slot `slot`, and described.

        `train`: run the model in training mode, nn.Module's default, which KernelBench's harness keeps
        (task screening asks whether a reference is stochastic there). `rng_seed`: reseed after making the
        inputs, so that the model's own random ops (dropout) draw from another state than the inputs left.
        `send_outputs`: the reference's and the oracle's outputs go back too (task screening). `diff_slot`:
        how far the outputs are from that slot's (`differences`; task screening's second run of one input).
        """
        torch = self.torch
        seed = request.seed
        variant = request.variant or {"kind": "standard"}
        oracle = request.oracle
        train = request.train and hasattr(self.model, "train")
        if train:
            self.model.train()
        self.slots.pop(request.slot, None)  # the slot's last outputs go before new ones come
        self.release_cached()
        try:
            began = time.perf_counter()
            inputs = self.make_inputs(seed, request.on_device)
            if not self.shaped:  # what a derived family's real runs would cost (op_derive)
                self.public_input_bytes = footprint.tensor_bytes(torch, inputs)
            swapped = self.swap(inputs, request.swap, request.on_device)
            if request.rng_seed is not None:
                self.set_seed(request.rng_seed)
            asked = variant
            inputs, variant = self.reshaped(inputs, variant, seed)
            self.clocked("inputs", began)
            began = time.perf_counter()
            placed = self.place_inputs(inputs, request.inputs_to, seed, asked)
            pristine = self.kept_for_check(inputs)
            self.clocked("place", began)
            call_seed = request.call_seed
            began = time.perf_counter()
            out, observed, oracle_out = self.run_reference(inputs, oracle, call_seed)
            self.clocked("reference", began)
            if variant.get("kind") != "standard" and not (all_finite(torch, out) and all_finite(torch, oracle_out)):
                # The task does not allow this distribution after all: its own output is not finite on it.
                inputs = self.make_inputs(seed, request.on_device)
                variant = {**variant, "rejected": "the reference's output is not finite on these inputs"}
                placed = self.place_inputs(inputs, request.inputs_to, seed, {"kind": "standard"})
                pristine = self.kept_for_check(inputs)
                out, observed, oracle_out = self.run_reference(inputs, oracle, call_seed)
        except BaseException as exc:
            self.send(describe_exception("reference", exc))
            return
        finally:
            if train:
                self.model.eval()
        self.slots[request.slot] = {
            "out": out,
            "oracle": oracle_out,
            "kept": None,
            "checks": None,
            "inputs": pristine,
        }
        response = {
            "type": "trial",
            "oracle_dtype": self.oracle_dtype if oracle else None,
            "evidence": {k: observed[k] for k in ("inputs_mutated", "aliases_input")},
            "variant": variant,
            "signature": signature(torch, out),
            "screen": json_safe(screen(torch, oracle_out if oracle else out, stats=request.stats)),
            "input_kinds": [
                {"dtype": str(x.dtype).removeprefix("torch."), "shape": list(x.shape)}
                if isinstance(x, torch.Tensor)
                else {"type": type(x).__name__}
                for x in inputs
            ],
            "swapped": swapped,
            "differences": self.differences_from(request.diff_slot, out),
            "inputs_on_device": bool(self.inputs_on_device),
            "task_check": self.task_check is not None,
            "draws_random": self.draws_random,
            **placed,
        }
        extra: dict[str, Any] = {"inputs": inputs} if request.inputs_to == "parent" else {}
        if request.send_outputs:
            extra["values"] = [out, oracle_out]
        self.send_values(response, **extra)

    def differences_from(self, slot: str | None, out: Any) -> list[dict[str, float] | None] | None:
        kept = self.slots.get(str(slot)) if slot is not None else None
        return None if kept is None else json_safe(differences(self.torch, out, kept["out"]))

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

    def swap(self, inputs: list[Any], swap: Any, on_device: bool) -> bool | None:
        """Task screening: input `swap["position"]` replaced by the one seed `swap["seed"]` makes (does the
        output depend on it?). Whether the replacement differs at all (a constant input does not)."""
        if not swap:
            return None
        position = int(swap["position"])
        other = self.make_inputs(int(swap["seed"]), on_device)[position]
        mine = inputs[position]
        inputs[position] = other
        if isinstance(mine, self.torch.Tensor) and isinstance(other, self.torch.Tensor):
            return evidence.digest(mine) != evidence.digest(other)
        return mine != other

    def reshaped(self, inputs: list[Any], variant: dict[str, Any], seed: int) -> tuple[list[Any], dict[str, Any]]:
        """The inputs under a hidden distribution, on the inputs its contract allows it on (worker/contracts.py)."""
        if variant.get("kind", "standard") == "standard" or "rejected" in variant:
            return inputs, {"kind": "standard"} if "rejected" not in variant else variant
        return contracts.reshape(self.torch, inputs, variant, seed, declared=self.contract)

    def place_inputs(self, inputs: list[Any], where: Any, seed: int, asked: dict[str, Any]) -> dict[str, Any]:
        """Inputs bound for the candidate: written to its inbox ("candidate": their tree and descriptions, for
        the response), or made again in its worker ("made": what it needs to, and their fingerprint, taken
        before the reference runs, which may write into them; worker/seeded.py)."""
        if where == "made":
            made = {
                "seed": seed,
                "on_device": bool(self.inputs_on_device),
                "variant": asked,
                "fingerprint": seeded.fingerprint(self.torch, inputs),
            }
            return {"made": made}
        if where != "candidate":
            return {}
        tree, described = self.channels.put("candidate_in", inputs)
        return {"inputs": tree, "input_tensors": described}

    # ------------------------------------------------------------ comparisons

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
                    if slot["checks"] is None:
                        slot["checks"] = [
                            correctness.OracleCheck(r2, o2, t2)
                            for r2, o2, t2 in zip(refs, oracles, tolerances, strict=True)
                        ]
                    cmp = slot["checks"][i].compare(c)
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
        self.send({"type": "compared", "results": json_safe(results), "task_check": checked})

    # ------------------------------------------------------------ timing

    def op_stage(self, request: protocol.Stage, args: Any) -> None:
        """The timing pool: the input sets of `sets` (each a trial's seed and variant) made again, kept here
        for timing the reference, their outputs and the oracle's in slots pool0, pool1, ..., and written to
        the candidate's inbox one after another (or, `inputs_to` "made", described for the candidate's worker
        to make again, worker/seeded.py; "here": kept here only, where no candidate is judged, as in `tasks
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
            for k, spec in enumerate(request.sets):
                seed = int(spec["seed"])
                inputs = self.make_inputs(seed, request.on_device)
                variant = spec.get("variant") or {"kind": "standard"}
                inputs, _ = self.reshaped(inputs, variant, seed)
                if request.inputs_to == "made":
                    made.append(self.place_inputs(inputs, "made", seed, variant)["made"])
                inputs = self.to_device(inputs)
                out, _, oracle_out = self.run_reference(wire.cloned(inputs), True)
                self.slots[f"pool{k}"] = {
                    "out": out,
                    "oracle": oracle_out,
                    "kept": None,
                    "checks": None,
                    "inputs": self.kept_for_check(inputs),
                }
                pool.append(inputs)
                if made or request.inputs_to == "here":
                    continue
                tree, tensors = wire.pack_values(inputs)
                renamed = {f"s{k}.{name}": t for name, t in tensors.items()}
                written = self.channels.write("candidate_in", renamed, start)
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
