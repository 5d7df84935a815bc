"""The reference worker: the trusted task, its inputs, its outputs, the float64 oracle, and the comparisons.

It never sees candidate code, so what it computes can be trusted: it makes each trial's inputs from a
seed the parent sends (on the device where the task allows: a 4 GiB input is made in milliseconds there,
in seconds on the host), writes them into the candidate's inbox, runs the reference and the oracle, and
keeps their outputs on the device in a named slot. When the candidate has answered, the parent sends the
candidate's outputs here (they lie in the candidate's outbox) and this worker compares them with the slot,
on the device, by the parent's tolerances (checks/correctness.py); the parent decides from the figures.

This module builds the task (`load`, `derive`) and runs the reference again on a trial's inputs from another
random state (`rerun`: task screening, checks/reference_replay.py); the worker's other requests live by
mechanism: a trial's inputs and outputs in worker/correctness/trials.py, the reference and oracle runs in
worker/correctness/oracle.py, the comparisons in worker/correctness/compare.py, the timing pool in
worker/timing/pool.py.
"""

from __future__ import annotations

import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.checks import correctness, reference_replay
from kerneljudge.protocol import wire
from kerneljudge.worker import evidence, footprint
from kerneljudge.worker.base import Worker, describe_exception, items_of
from kerneljudge.worker.correctness import contracts, derived, family, seeded
from kerneljudge.worker.correctness.compare import Comparisons
from kerneljudge.worker.correctness.memo import OutputMemo
from kerneljudge.worker.correctness.oracle import ReferenceRuns
from kerneljudge.worker.correctness.outputs import json_safe
from kerneljudge.worker.correctness.trials import Trials
from kerneljudge.worker.timing.pool import TimingPool


class ReferenceWorker(Trials, ReferenceRuns, Comparisons, TimingPool, Worker):
    role = "reference"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.memo = OutputMemo()  # a group's trials' outputs, kept across its judgments (worker/correctness/memo.py)
        self.start_task()

    def start_task(self) -> None:
        """What the worker knows of its task, as before its first load: everything of it is set again at the next
        load, the module imported anew. A `fresh` load (a judgment's first) of a worker that has served another
        judgment comes here first (a group's reference: judgment/stages/shared_reference.py)."""
        self.module = None
        self.model = None
        self.oracle: Any = None
        self.oracle_dtype: str | None = None
        self.family: dict[str, Any] = {}  # the task's shape family as described to the parent
        self.family_error: str | None = None
        self.contract: dict[str, Any] = {}  # the task's declared input contract (worker/correctness/contracts.py)
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
        self.take_seal()  # as the candidate's worker does (worker/timing/timer.py)
        if request.fresh and self.module is not None:
            self.start_task()
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
            self.memo.loaded(request.seed, request.shape, request.keep)
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
            "integers": derived.integers(self.module) if not self.shaped else {},  # to draw values for (Derive)
            "contract_error": self.contract_error,
            "inputs_writable": getattr(self.module, "INPUTS_WRITABLE", False) is True,
            "footprint": footprint.describe(self.torch, self.module, init_inputs) if request.footprint else None,
        }
        self.send_values(loaded, init_inputs=init_inputs)

    def op_derive(self, request: protocol.Derive, args: Any) -> None:
        """A family derived from the task's size globals (worker/correctness/derived.py), asked after the public trials
        of a task that declares none; `declared`: it declares that it has none (`SHAPE_FAMILY = []`)."""
        parameters = list(self.model.parameters()) if hasattr(self.model, "parameters") else []
        known = self.public_input_bytes is not None and not self.shaped
        public_bytes = self.public_input_bytes + footprint.tensor_bytes(self.torch, parameters) if known else None
        found = derived.Derivation()
        if not self.family:
            found = derived.family_for(self.torch, self.module, public_bytes, request.proposals)
        self.family = found.family or self.family  # the shapes a later `load` names are set against its public values
        answer = {"type": "derived", "family": found.family, "fixed": found.fixed}
        self.send({**answer, "declared": derived.declares(self.module)})

    # ------------------------------------------------------------ screening

    def op_rerun(self, request: protocol.Rerun, args: Any) -> None:
        """The reference again on the inputs of `seed` (under `variant`), made anew since its first run may have
        written into them, from the random state `call_seed`; each output set against slot `slot`'s first run
        and oracle by `tolerances` (checks/reference_replay.py). Inputs whose fingerprint is not the trial's (a
        task whose inputs do not follow from the seed alone) are answered `inputs_differ`, and nothing runs.
        The slot keeps its first run, unless the reference returns storage it writes again at every call (the
        figures say so: `shared_storage`)."""
        torch = self.torch
        slot = self.slots.get(request.slot)
        self.release_cached()
        try:
            if slot is None:
                raise LookupError(f"no slot {request.slot!r}")
            began = time.perf_counter()
            inputs = self.make_inputs(request.seed, request.on_device)
            inputs, _ = self.reshaped(inputs, request.variant or {"kind": "standard"}, request.seed)
            if seeded.fingerprint(torch, inputs) != request.fingerprint:
                self.send({"type": "reran", "inputs_differ": True, "outputs": []})
                return
            inputs = [  # as run_reference places them: one made on the host goes to the device, strides kept
                wire.placed(x, self.device) if isinstance(x, torch.Tensor) and x.device != self.device else x
                for x in inputs
            ]
            self.clocked("inputs", began)
            began = time.perf_counter()
            self.set_seed(request.call_seed)
            self.memo.forwards += 1
            with torch.no_grad():  # as run_reference calls it, without the call's evidence: nothing here is judged
                again = self.model(*inputs)
            self.synchronize()
            del inputs
            self.clocked("reference", began)
            began = time.perf_counter()
            figures = self.rerun_figures(slot, items_of(again), request.tolerances)
            self.synchronize()
            self.clocked("compare", began)
        except BaseException as exc:
            self.send(describe_exception("rerun", exc))
            return
        self.send({"type": "reran", "outputs": json_safe(figures)})

    def rerun_figures(self, slot: dict[str, Any], agains: list[Any], tolerances: list[dict[str, Any]]) -> list[Any]:
        """Per output of the slot's first run, checks/reference_replay.py's figures for the rerun's `agains`."""
        firsts = items_of(slot["out"])
        oracles = items_of(slot["oracle"]) if slot["oracle"] is not None else [None] * len(firsts)
        if not len(firsts) == len(oracles) == len(tolerances):
            raise ValueError("the tolerances do not match the reference's outputs")
        agains = agains[: len(firsts)] + [None] * (len(firsts) - len(agains))  # an output it did not give again
        return [
            reference_replay.replay_figures(
                f, a, o if isinstance(o, self.torch.Tensor) else None, correctness.Tolerance(**t)
            )
            for f, a, o, t in zip(firsts, agains, oracles, tolerances, strict=True)
        ]
