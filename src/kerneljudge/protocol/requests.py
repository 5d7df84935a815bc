"""The requests the parent sends a worker, one frozen dataclass per operation, checked field by field as the
worker decodes them (`decode`): an unknown operation, an unknown field, a missing one or one of the wrong
type is a `ProtocolError`, answered as such, never half-read with a default. The parent builds them and
sends `header()`; the transport's own keys (`args`, `tensors`: where the request's values lie in the
worker's inbox) are the process's (sandbox/talk.py), not a request's.

Which worker serves which: the reference worker `load`, `derive`, `trial`, `rerun`, `compare`, `stage`,
`compile` and `time`; the candidate's worker `load`, `stage`, `call`, `recheck`, `time` and `captured`; both
`exit`, and `keep` and `commit` within a `time` request that asks for them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

TRANSPORT = frozenset({"op", "args", "tensors"})
# The types a field's annotation may name, and what a decoded value of each must be.
_KINDS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "dict": (dict,),
    "list": (list,),
    "None": (type(None),),
}


class ProtocolError(Exception):
    """A request header that is not one of the protocol's requests."""


@dataclass(frozen=True)
class Request:
    op: ClassVar[str]

    def header(self) -> dict[str, Any]:
        """The request as a frame's header."""
        return {"op": self.op, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}


@dataclass(frozen=True)
class Load(Request):
    """Import the source and build its model after `seed` (KernelBench's convention); the reference at
    `shape`, a hidden shape of its family, and with `footprint` what one call holds (worker/footprint.py);
    the candidate's worker first loads `task`, the task's inputs-only source (tasks/inputs_source.py, never the
    task's own text), where it makes the trials' inputs itself. `fresh`: a judgment's first load of the reference,
    which forgets the shape family an earlier judgment derived (a group's reference serves one judgment after
    another: judgment/stages/shared_reference.py). `keep`: the device bytes of trial outputs a group's reference may
    keep for the group's next judgments (worker/correctness/trials.py, `OutputMemo`); 0 for a single judgment's."""

    op: ClassVar[str] = "load"
    seed: int
    shape: dict | None = None
    footprint: bool = False
    task: str | None = None
    fresh: bool = False
    keep: int = 0


MAX_PROPOSED = 64  # a Derive request's values per integer, integers, and joint shapes, each at most
MAX_PROPOSED_VALUE = 2**31 - 1


@dataclass(frozen=True)
class Derive(Request):
    """The shape family derived from the task's size globals (worker/correctness/derived.py), from the values the parent
    drew for them (tasks/size_classes.py): `proposals` is {"values": {name: [int, ...]}, "joint": [{name:
    int}, ...]}, each value from 2 to 2**31 - 1; None: the worker's own fixed proposals."""

    op: ClassVar[str] = "derive"
    proposals: dict | None = None

    def __post_init__(self) -> None:
        if self.proposals is None:
            return
        if set(self.proposals) - {"values", "joint"}:
            raise ProtocolError("derive: proposals hold only 'values' and 'joint'")
        values, joint = self.proposals.get("values", {}), self.proposals.get("joint", [])
        if not isinstance(values, dict) or not isinstance(joint, list) or len(joint) > MAX_PROPOSED:
            raise ProtocolError(f"derive: 'values' is a mapping and 'joint' a list of at most {MAX_PROPOSED}")
        for where, mapping in [("values", values), *(("joint", shape) for shape in joint)]:
            if not isinstance(mapping, dict) or len(mapping) > MAX_PROPOSED or not (mapping or where == "values"):
                raise ProtocolError(f"derive: each of {where} is a mapping of at most {MAX_PROPOSED} integers")
            for name, given in mapping.items():
                listed = given if where == "values" else [given]
                named = isinstance(name, str) and name.isidentifier()
                if not named or not isinstance(listed, list) or not 0 < len(listed) <= MAX_PROPOSED:
                    raise ProtocolError(f"derive: {where} names {name!r} with no value or too many")
                if not all(type(v) is int and 2 <= v <= MAX_PROPOSED_VALUE for v in listed):
                    raise ProtocolError(f"derive: {where} proposes {name!r} a value not from 2 to {MAX_PROPOSED_VALUE}")


@dataclass(frozen=True)
class Trial(Request):
    """One run of the reference on the inputs of `seed` (transformed by `variant`, a hidden distribution),
    its outputs kept in `slot`; `inputs_to` says where the inputs go ("candidate": its inbox, "made": only
    the seeds, the candidate's worker makes them again, "parent", or None), `on_device` whether they are made
    on the device; with `oracle` the float64 oracle too. `tasks lint` asks for `stats`, a `swap` of one
    input's seed, `train` mode, an `rng_seed` and the `differences` from `diff_slot`'s outputs."""

    op: ClassVar[str] = "trial"
    seed: int
    call_seed: int | None = None
    oracle: bool = True
    variant: dict | None = None
    slot: str = "trial"
    inputs_to: str | None = None
    on_device: bool = False
    train: bool = False
    rng_seed: int | None = None
    swap: dict | None = None
    stats: bool = False
    diff_slot: str | None = None
    send_outputs: bool = False


@dataclass(frozen=True)
class Rerun(Request):
    """The reference again on the inputs of `seed` (under `variant`), made anew and checked against the trial's
    `fingerprint` (worker/correctness/seeded.py), from the random state `call_seed` (another than the trial's), its
    outputs set against slot `slot`'s first run and oracle by `tolerances` (as `compare` takes them): task screening's
    replay of the reference (checks/reference_replay.py, KJ-T003)."""

    op: ClassVar[str] = "rerun"
    seed: int
    call_seed: int
    tolerances: list
    fingerprint: list
    variant: dict | None = None
    slot: str = "trial"
    on_device: bool = False


@dataclass(frozen=True)
class Call(Request):
    """One candidate call: on the inputs in its inbox, on those it makes again from `made`, or with
    `reuse_inputs` on the previous call's storage (the canary); after `poison_bytes` of poisoned memory,
    from the random state `call_seed`, maybe traced, maybe perturbed (worker/correctness/perturb.py); its outputs
    re-read `reread_s` after it returned; `keep_inputs` for the next call's reuse."""

    op: ClassVar[str] = "call"
    made: dict | None = None
    reuse_inputs: bool = False
    poison_bytes: int = 0
    reread_s: float = 0.0
    trace: bool = False
    call_seed: int | None = None
    keep_inputs: bool = False
    perturb: dict | None = None


@dataclass(frozen=True)
class Compare(Request):
    """The candidate's outputs (the request's values) against slot `slot`'s, by `method` ("oracle",
    "native", "replay" or "timed"), each within its tolerance; the task's own check too where
    `task_check`; with `keep` the outputs stay in the slot."""

    op: ClassVar[str] = "compare"
    slot: str
    tolerances: list
    method: str
    keep: bool = False
    task_check: bool = False
    container: str = "Tensor"


@dataclass(frozen=True)
class Stage(Request):
    """The timing pool: the reference makes `sets` (their seeds and variants) and sends them where
    `inputs_to` says; the candidate's worker stages what its inbox holds, or makes `made` again. With
    `tolerances` (as `compare` takes them), the reference makes its checks of timed outputs ready too."""

    op: ClassVar[str] = "stage"
    sets: list | None = None
    made: list | None = None
    on_device: bool = False
    inputs_to: str | None = None
    tolerances: list | None = None


@dataclass(frozen=True)
class Compile(Request):
    """The reference under torch.compile, for the compile baseline (never timed here)."""

    op: ClassVar[str] = "compile"


@dataclass(frozen=True)
class Time(Request):
    """`samples` samples of `calls` calls each on the staged pool (or the request's values), after `warmup`
    calls, behind `precursor_ms` of GPU work, `flush_bytes` overwritten before each; as a CUDA `graph`. With
    `ask_keep`, after each sample the worker answers `sampled` and waits for a `keep` naming the call of that
    sample whose output it keeps for `captured` (or none), so the kept call is drawn after the calls it is
    drawn from (H03); with `keep_earlier` the outputs earlier requests kept stay kept."""

    op: ClassVar[str] = "time"
    calls: int
    samples: int
    warmup: int
    flush_bytes: int = 0
    precursor_ms: float = 0.0
    method: str = "events"
    compiled: bool = False
    profile_range: bool = False
    staged: bool = False
    graph: bool = False
    ask_keep: bool = False
    keep_earlier: bool = False


@dataclass(frozen=True)
class Keep(Request):
    """Within a `time` request with `ask_keep`, the answer to its `sampled`: keep the output of `call` of the
    sample just timed (-1: none)."""

    op: ClassVar[str] = "keep"
    call: int


@dataclass(frozen=True)
class Commit(Request):
    """Within a `time` request with `ask_keep`, the answer to the `sampled` of the sample whose call the parent
    checks: first the digests of `calls` outputs of that sample (`committed`), then a `keep` is read. The candidate's
    worker is asked for its own calls a sample, every one; the reference's for as many as the candidate's sample
    holds, its own calls' outputs taken in turn, so that its commit is timed doing the candidate's digesting
    (judgment/stages/untimed_work.py)."""

    op: ClassVar[str] = "commit"
    calls: int


@dataclass(frozen=True)
class Captured(Request):
    """The oldest output a `time` request kept that the worker still keeps."""

    op: ClassVar[str] = "captured"


@dataclass(frozen=True)
class Recheck(Request):
    """A plain call on graph buffer `buffer` of the graph of `calls` calls, after its replays."""

    op: ClassVar[str] = "recheck"
    calls: int
    buffer: int
    compiled: bool = False


@dataclass(frozen=True)
class Exit(Request):
    """End the worker."""

    op: ClassVar[str] = "exit"


OPS: dict[str, type[Request]] = {
    cls.op: cls
    for cls in (Load, Derive, Trial, Rerun, Call, Compare, Stage, Compile, Time, Keep, Commit, Captured, Recheck, Exit)
}


def _fits(value: Any, annotation: str) -> bool:
    """Whether `value` is of the type a field's annotation names ("int", "dict | None", ...)."""
    for name in (part.strip() for part in annotation.split("|")):
        kinds = _KINDS[name]
        if isinstance(value, kinds) and not (bool not in kinds and isinstance(value, bool)):
            return True
    return False


def decode(header: Any) -> Request:
    """The request a frame's header holds, every field checked; ProtocolError where it holds none."""
    if not isinstance(header, dict):
        raise ProtocolError(f"a request is an object, not {type(header).__name__}")
    cls = OPS.get(header.get("op"))  # type: ignore[arg-type]
    if cls is None:
        raise ProtocolError(f"unknown op {header.get('op')!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(header) - set(fields) - TRANSPORT)
    if unknown:
        raise ProtocolError(f"{cls.op}: unknown field(s) {', '.join(map(repr, unknown))}")
    given = {}
    for name, field in fields.items():
        if name not in header:
            if field.default is dataclasses.MISSING:
                raise ProtocolError(f"{cls.op}: missing field {name!r}")
            continue
        if not _fits(header[name], str(field.type)):
            raise ProtocolError(f"{cls.op}: field {name!r} is {type(header[name]).__name__}, not {field.type}")
        given[name] = header[name]
    return cls(**given)
