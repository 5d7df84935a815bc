"""What a worker may answer to each request: one frozen dataclass per kind of answer, decoded strictly as the
parent reads the response (sandbox/talk.py, `decode_answer`). A worker runs candidate code, which can write its
own frames into the response pipe; an answer of a kind its request cannot have (a `loaded` for a call, a
`compared` from the candidate's worker), a field no answer of its kind has, one missing or one of the wrong type
is a broken protocol (a `ProtocolError`), and the worker is stopped for it, never half-read with a default.

The fields the parent decides on are typed here; a free-form part the parent reads with care of its own or
passes on into the record (an `evidence` dict, a `screen`, an output's `items`) is a typed dict or list whose
contents the checks read (checks/outputs.py, checks/runtime.py). Value trees (`values`, `inputs`, `init_inputs`,
`captured`) name tensors that `tensors` describes in the worker's outbox (protocol/channel.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from kerneljudge.protocol.requests import _KINDS, ProtocolError, Request

A = TypeVar("A", bound="Answer")

ERROR_FIELDS = ("phase", "exc_type", "message")  # strings in every error (worker/base.describe_exception)


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One frame a worker answers with; `kind` is the frame's `type`. Every answer may carry the descriptions of
    the tensors its value trees name (`tensors`) and the parts of the request as the worker clocked them
    (`clock_s`: any value; the parent keeps only plain seconds of it, sandbox/talk.clock_parts)."""

    kind: ClassVar[str]
    tensors: dict | None = None
    clock_s: Any = None

    def header(self) -> dict[str, Any]:
        """The answer as a frame's header, what it decodes from (`decode_answer`): a field left at its default of
        None is omitted, as a worker leaves it out."""
        left_out = [f.name for f in dataclasses.fields(self) if f.default is None and getattr(self, f.name) is None]
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in left_out}
        return {"type": self.kind, **fields}


@dataclass(frozen=True, kw_only=True)
class Failed(Answer):
    """A request that failed in the worker: where (`phase`), its exception's type, module, message and traceback
    (worker/base.describe_exception)."""

    phase: str
    exc_type: str
    message: str
    exc_module: str | None = None
    traceback: str = ""


@dataclass(frozen=True, kw_only=True)
class Error(Failed):
    """Any request may fail so."""

    kind: ClassVar[str] = "error"


@dataclass(frozen=True, kw_only=True)
class GraphUnsupported(Failed):
    """A `time` request with `graph` whose CUDA graph could not be captured (the side is timed without one)."""

    kind: ClassVar[str] = "graph_unsupported"


@dataclass(frozen=True, kw_only=True)
class Loaded(Answer):
    """The model built (worker/reference.py, worker/candidate.py `op_load`): what its import and build left
    (`evidence`); the reference's also its init inputs, parameters, shape family (or why it is malformed), the
    integers a family may be derived from, its input contract's error, whether its inputs may be written, and with
    `footprint` what one call holds."""

    kind: ClassVar[str] = "loaded"
    evidence: dict
    init_inputs: list | None = None
    parameter_count: int | None = None
    parameter_bytes: int | None = None
    family: dict | None = None
    family_error: str | None = None
    integers: dict | None = None
    contract_error: str | None = None
    inputs_writable: bool | None = None
    footprint: dict | None = None


@dataclass(frozen=True, kw_only=True)
class Derived(Answer):
    """A family derived from the task's size globals ({} where none qualified), why each integer was not varied
    (`fixed`), and whether the task declares it has none (`declared`)."""

    kind: ClassVar[str] = "derived"
    family: dict | None
    fixed: dict
    declared: bool


@dataclass(frozen=True, kw_only=True)
class TrialRun(Answer):
    """One run of the reference (worker/correctness/trials.py): its outputs' structure (`signature`), what it did
    to its inputs (`evidence`), the distribution its inputs took (`variant`), task screening's figures, and where
    its inputs went: their tree in the candidate's inbox (`inputs`, `input_tensors`), what the candidate's worker
    needs to make them again (`made`), or their values (`inputs`, to the parent)."""

    kind: ClassVar[str] = "trial"
    oracle_dtype: str | None
    evidence: dict
    variant: dict
    signature: dict
    screen: list
    input_kinds: list
    swapped: bool | None
    differences: list | None
    inputs_on_device: bool
    task_check: bool
    draws_random: bool
    made: dict | None = None
    inputs: list | None = None
    input_tensors: dict | None = None
    values: list | None = None


@dataclass(frozen=True, kw_only=True)
class Reran(Answer):
    """The reference again on a trial's inputs (`rerun`): per output, checks/reference_replay.py's figures; none,
    with `inputs_differ`, where the inputs made again were not the trial's."""

    kind: ClassVar[str] = "reran"
    outputs: list
    inputs_differ: bool = False


@dataclass(frozen=True, kw_only=True)
class Compared(Answer):
    """Per output, its comparison (`results`: passed, failure_kind, summary, metrics); the task's own check where
    asked; for `timed`, the digests of the outputs compared (worker/seal/commit.py)."""

    kind: ClassVar[str] = "compared"
    results: list
    task_check: dict | None = None
    digests: list | None = None

    def __post_init__(self) -> None:
        for result in self.results:
            if not (
                isinstance(result, dict)
                and set(result) == {"passed", "failure_kind", "summary", "metrics"}
                and (result["passed"] is None or isinstance(result["passed"], bool))
                and (result["failure_kind"] is None or isinstance(result["failure_kind"], str))
                and isinstance(result["summary"], str)
                and isinstance(result["metrics"], dict)
            ):
                raise ProtocolError("compared: a result is not {passed, failure_kind, summary, metrics}")
        check = self.task_check
        if check is not None and not (isinstance(check.get("passed"), bool) and isinstance(check.get("message"), str)):
            raise ProtocolError("compared: the task's check is not {passed, message}")


@dataclass(frozen=True, kw_only=True)
class Staged(Answer):
    """The timing pool staged: its sets, where the reference wrote them for the candidate (`inputs`,
    `input_tensors`) or what the candidate's worker needs to make them again (`made`), and the outputs'
    structure at the pool's shape (`signature`)."""

    kind: ClassVar[str] = "staged"
    sets: int
    inputs: list | None = None
    input_tensors: dict | None = None
    made: list | None = None
    signature: dict | None = None


@dataclass(frozen=True, kw_only=True)
class InputsDiffer(Answer):
    """The candidate's worker could not make a trial's inputs again as the reference made them (`detail`: why)."""

    kind: ClassVar[str] = "inputs_differ"
    detail: str


@dataclass(frozen=True, kw_only=True)
class Compiled(Answer):
    """The reference compiled under torch.compile."""

    kind: ClassVar[str] = "compiled"


@dataclass(frozen=True, kw_only=True)
class Timed(Answer):
    """A `time` request's samples (worker/timing/timer.py): per sample the time of one call, how long its issue
    took (`host_ms`) and its precursor kept the GPU busy, its drain and an idle device's; whether the persisting L2
    was reset; with `ask_keep`, what was kept and found in the named sample before the copy, and what the request
    left (`evidence`). `do_bench` answers `times_ms` only."""

    kind: ClassVar[str] = "timed"
    times_ms: list
    host_ms: list | None = None
    busy_ms: list | None = None
    l2_reset: bool | None = None
    kept: int | None = None
    kept_overwritten: bool | None = None
    not_plain: str | None = None
    outputs_differ: list | None = None
    sealed_open: list | None = None
    evidence: dict | None = None
    drain_ms: list | None = None
    drain_floor_ms: float | None = None


@dataclass(frozen=True, kw_only=True)
class Described(Answer):
    """A call's output described for the parent's structural checks (worker/base.describe_output): its
    container and each item's type, dtype, shape and device."""

    container: str
    items: list

    @property
    def tree(self) -> list | None:
        """The tree of the output's tensors in the worker's outbox, where they were sent."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Output(Described):
    """One candidate call (worker/candidate.py `op_call`): its output described, and its tree (`values`) where it
    is plain tensors and could be written (else why not: `unreadable`); what was observed around it (`evidence`,
    with its kernel trace where traced); a perturbation's report; the memory poisoned where less than asked."""

    kind: ClassVar[str] = "output"
    evidence: dict
    values: list | None = None
    unreadable: str | None = None
    perturbed: dict | None = None
    poisoned_bytes: int | None = None

    @property
    def tree(self) -> list | None:
        return self.values


@dataclass(frozen=True, kw_only=True)
class CapturedOutput(Described):
    """The oldest output a `time` request kept (`captured`), described, its tree where it is plain tensors."""

    kind: ClassVar[str] = "captured"
    captured: list | None = None

    @property
    def tree(self) -> list | None:
        return self.captured


@dataclass(frozen=True, kw_only=True)
class Rechecked(Described):
    """A plain call on a CUDA graph's buffer after its replays (`recheck`), described as `captured` is."""

    kind: ClassVar[str] = "rechecked"
    captured: list | None = None

    @property
    def tree(self) -> list | None:
        return self.captured


@dataclass(frozen=True, kw_only=True)
class Interim(Answer):
    """A frame a worker sends within a request, answered by the parent before the request's answer comes."""


@dataclass(frozen=True, kw_only=True)
class Sampled(Interim):
    """After each sample of a `time` request with `ask_keep`: its number (worker/seal/sample.py); answered by a
    `keep`, or by a `commit` for the sample whose call is checked."""

    kind: ClassVar[str] = "sampled"
    sample: int


@dataclass(frozen=True, kw_only=True)
class Committed(Interim):
    """The answer to a `commit`: the digests of the sample's outputs (worker/seal/commit.py), answered by a
    `keep`. Their form is checked where they are read (judgment/stages/kept_call.py)."""

    kind: ClassVar[str] = "committed"
    sample: int
    digests: list


@dataclass(frozen=True, kw_only=True)
class Hello(Answer):
    """A worker's first frame (worker/base.hello): its role and process, the software it runs (Python, torch and
    its CUDA, Triton's version or None), whether it sees CUDA and the device it settled on, its numerics flags, and
    on a GPU the card's name, compute capability, memory, L2 size, count and UUID (the parent finds the GPU in NVML
    by it); `triton_prepared_s` where it readied Triton before any candidate code ran (worker/prepare.py)."""

    kind: ClassVar[str] = "hello"
    role: str
    pid: int
    python: str
    torch: str
    torch_cuda: str | None = None
    cuda_available: bool
    device: str
    flags: dict
    triton: str | None = None
    gpu_name: str | None = None
    gpu_capability: str | None = None
    gpu_memory_bytes: int | None = None
    gpu_count: int | None = None
    l2_cache_bytes: int | None = None
    gpu_uuid: str | None = None
    triton_prepared_s: float | None = None


KINDS: dict[str, type[Answer]] = {
    cls.kind: cls
    for cls in (
        Error,
        GraphUnsupported,
        Loaded,
        Derived,
        TrialRun,
        Reran,
        Compared,
        Staged,
        InputsDiffer,
        Compiled,
        Timed,
        Output,
        CapturedOutput,
        Rechecked,
        Sampled,
        Committed,
    )
}
# Besides "error" (any request may fail): the answers each operation has.
ANSWERS: dict[str, frozenset[str]] = {
    "load": frozenset({"loaded"}),
    "derive": frozenset({"derived"}),
    "trial": frozenset({"trial"}),
    "rerun": frozenset({"reran"}),
    "compare": frozenset({"compared"}),
    "stage": frozenset({"staged", "inputs_differ"}),  # the candidate's worker could not make a set again
    "compile": frozenset({"compiled"}),
    "time": frozenset({"timed", "graph_unsupported"}),
    "captured": frozenset({"captured"}),
    "recheck": frozenset({"rechecked"}),
    "call": frozenset({"output", "inputs_differ"}),
}
# Frames a worker sends within a request, each answered by the parent before the request's answer comes:
# after each sample of a `time` request with `ask_keep`, `sampled` (its sample's number), answered by `keep`, or by
# `commit` for the sample whose call is checked, whose `committed` (the digests of its outputs) a `keep` answers.
INTERIM: dict[str, frozenset[str]] = {"time": frozenset({"sampled", "committed"})}


def _fits(value: Any, annotation: str) -> bool:
    """Whether `value` is of the type a field's annotation names ("int", "dict | None", "Any", ...)."""
    for name in (part.strip() for part in annotation.split("|")):
        if name == "Any":
            return True
        kinds = _KINDS[name]
        if isinstance(value, kinds) and not (bool not in kinds and isinstance(value, bool)):
            return True
    return False


def clock_report(header: Any) -> Any:
    """What a frame reports as its request's clock (`clock_s`), read before the frame is decoded: the parent keeps
    the parts of a round trip whose answer then breaks the protocol too (sandbox/talk.clock_parts)."""
    return header.get("clock_s") if isinstance(header, dict) else None


def decode_answer(request: Request, header: Any, interim: bool = False) -> Answer:
    """The answer a frame's header holds to `request`, every field checked; ProtocolError where it holds none.
    With `interim`, the frames a worker sends within the request (`INTERIM`) are answers too."""
    if not isinstance(header, dict):
        raise ProtocolError(f"an answer is an object, not {type(header).__name__}")
    kind = header.get("type")
    kind = kind if isinstance(kind, str) else repr(kind)  # (a list or a dict names no answer either)
    allowed = ANSWERS.get(request.op, frozenset()) | (INTERIM.get(request.op, frozenset()) if interim else frozenset())
    if kind != "error" and kind not in allowed:
        raise ProtocolError(f"{header.get('type')!r} is no answer to {request.op!r}")
    if kind in ("error", "graph_unsupported"):
        wrong = [name for name in ERROR_FIELDS if not isinstance(header.get(name), str)]
        if wrong:
            raise ProtocolError(f"an error without {', '.join(wrong)}")
    return _decoded(KINDS[kind], header)  # type: ignore[index]


def _decoded(cls: type[A], header: dict[str, Any]) -> A:
    """`header` as an answer of class `cls`, every field checked against its annotation."""
    kind = cls.kind
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(header) - set(fields) - {"type"})
    if unknown:
        raise ProtocolError(f"{kind}: unknown field(s) {', '.join(map(repr, unknown))}")
    given = {}
    for name, field in fields.items():
        if name not in header:
            if field.default is dataclasses.MISSING:
                raise ProtocolError(f"{kind}: missing field {name!r}")
            continue
        if not _fits(header[name], str(field.type)):
            raise ProtocolError(f"{kind}: field {name!r} is {type(header[name]).__name__}, not {field.type}")
        given[name] = header[name]
    return cls(**given)


def decode_greeting(header: Any) -> Hello | Error:
    """A worker's first frame, which answers no request: its `hello`, or the `error` that kept it from starting
    (worker/base.py); ProtocolError where it is neither, or either with a field missing or of the wrong type."""
    if not isinstance(header, dict):
        raise ProtocolError(f"a greeting is an object, not {type(header).__name__}")
    kind = header.get("type")
    if kind == "error":
        wrong = [name for name in ERROR_FIELDS if not isinstance(header.get(name), str)]
        if wrong:
            raise ProtocolError(f"an error without {', '.join(wrong)}")
        return _decoded(Error, header)
    if kind != "hello":
        raise ProtocolError(f"{kind!r} is no greeting")
    return _decoded(Hello, header)


def check_response(request: Request, response: Any) -> None:
    """ProtocolError where `response` cannot answer `request` (`decode_answer`, its answer left unread)."""
    decode_answer(request, response)
