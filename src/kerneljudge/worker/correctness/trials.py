"""The reference worker's trials: each trial's inputs made from a seed (reshaped to a hidden distribution
where the task's input contract allows, worker/correctness/contracts.py), placed for the candidate, the reference and
its oracle run on them (worker/correctness/oracle.py), and their outputs kept in a named slot and described.

Trusted code: it runs in the reference worker (worker/reference.py), which never sees the candidate's code.
"""

from __future__ import annotations

import time
from typing import Any

from kerneljudge import protocol
from kerneljudge.worker import evidence, footprint
from kerneljudge.worker.base import describe_exception
from kerneljudge.worker.correctness import contracts, seeded
from kerneljudge.worker.correctness.memo import Kept, OutputMemo
from kerneljudge.worker.correctness.outputs import all_finite, differences, json_safe, screen, signature


class Trials:
    """The reference worker's `trial` request and the inputs it makes (worker/reference.py)."""

    torch: Any
    device: Any
    model: Any
    module: Any
    channels: Any
    contract: dict[str, Any]
    shaped: bool
    public_input_bytes: int | None
    inputs_on_device: bool | None
    slots: dict[str, dict[str, Any]]
    oracle_dtype: str | None
    draws_random: bool
    no_oracle: str | None
    memo: OutputMemo

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
            key = self.memo.key(request)
            kept = self.memo.find(key)
            if kept is not None:  # the group's earlier judgment ran this very trial (worker/correctness/memo.py)
                out, observed, oracle_out = kept.out, kept.observed, kept.oracle_out
                self.oracle_dtype, self.draws_random = kept.oracle_dtype, kept.draws_random
                self.no_oracle = kept.no_oracle
                if "rejected" in kept.variant:  # the inputs the candidate gets are the standard ones, as in the run
                    inputs = self.make_inputs(seed, request.on_device)
                    placed = self.place_inputs(inputs, request.inputs_to, seed, {"kind": "standard"})
                    pristine = self.kept_for_check(inputs)
                variant = kept.variant
                self.clocked("kept", began)
            else:
                out, observed, oracle_out = self.run_reference(inputs, oracle, call_seed)
                self.clocked("reference", began)
            if (
                kept is None
                and variant.get("kind") != "standard"
                and not (all_finite(torch, out) and all_finite(torch, oracle_out))
            ):
                # The task does not allow this distribution after all: its own output is not finite on it.
                inputs = self.make_inputs(seed, request.on_device)
                variant = {**variant, "rejected": "the reference's output is not finite on these inputs"}
                placed = self.place_inputs(inputs, request.inputs_to, seed, {"kind": "standard"})
                pristine = self.kept_for_check(inputs)
                out, observed, oracle_out = self.run_reference(inputs, oracle, call_seed)
            if kept is None:
                facts = (self.oracle_dtype, self.draws_random, self.no_oracle, self.memo.forwards)
                self.memo.keep(key, Kept(out, observed, oracle_out, variant, *facts), torch)
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
        """The inputs under a hidden distribution, on the inputs its contract allows it on
        (worker/correctness/contracts.py)."""
        if variant.get("kind", "standard") == "standard" or "rejected" in variant:
            return inputs, {"kind": "standard"} if "rejected" not in variant else variant
        return contracts.reshape(self.torch, inputs, variant, seed, declared=self.contract)

    def place_inputs(self, inputs: list[Any], where: Any, seed: int, asked: dict[str, Any]) -> dict[str, Any]:
        """Inputs bound for the candidate: written to its inbox ("candidate": their tree and descriptions, for
        the response), or made again in its worker ("made": what it needs to, and their fingerprint, taken
        before the reference runs, which may write into them; worker/correctness/seeded.py)."""
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
