"""The workers' answers, decoded strictly as the parent reads them (protocol/responses.py): one typed answer per
kind; an answer of a kind its request cannot have, a field no answer of its kind has, one missing or of the wrong
type is a protocol error with a one-line message, never half-read with a default. A real pair of workers' answers
decode, and round-trip through their headers."""

import dataclasses
import random

import pytest

from helpers import CANDIDATES, TASKS
from kerneljudge import protocol
from kerneljudge.judgment.stages.kept_call import KeptCall
from kerneljudge.protocol import ProtocolError, decode_answer

ERROR = {"phase": "call", "exc_type": "ValueError", "exc_module": "builtins", "message": "x", "traceback": "t"}
TIME = protocol.Time(calls=2, samples=2, warmup=0, ask_keep=True)


def every_answer():
    """(request, header, the answer's type): one of each kind, its fields set where it has them."""
    output = {"container": "Tensor", "items": [{"type": "torch.Tensor", "plain_tensor": True}]}
    result = {"passed": True, "failure_kind": None, "summary": "passed", "metrics": {"numel": 4}}
    trial = {
        "oracle_dtype": "float64",
        "evidence": {"inputs_mutated": []},
        "variant": {"kind": "standard"},
        "signature": {"container": "Tensor", "items": []},
        "screen": [None],
        "input_kinds": [],
        "swapped": None,
        "differences": None,
        "inputs_on_device": False,
        "task_check": False,
        "draws_random": False,
    }
    return [
        (protocol.Load(seed=1), {"type": "loaded", "evidence": {}, "footprint": {"input_bytes": 4}}, protocol.Loaded),
        (
            protocol.Derive(),
            {"type": "derived", "family": {}, "fixed": {"N": "why"}, "declared": False},
            protocol.Derived,
        ),
        (protocol.Trial(seed=1), {"type": "trial", **trial, "made": {"seed": 1}}, protocol.TrialRun),
        (
            protocol.Rerun(seed=1, call_seed=2, tolerances=[], fingerprint=[]),
            {"type": "reran", "outputs": []},
            protocol.Reran,
        ),
        (
            protocol.Compare(slot="trial", tolerances=[], method="timed"),
            {"type": "compared", "results": [result], "task_check": {"passed": True, "message": ""}, "digests": []},
            protocol.Compared,
        ),
        (protocol.Stage(), {"type": "staged", "sets": 3, "made": [{"seed": 1}]}, protocol.Staged),
        (protocol.Stage(), {"type": "inputs_differ", "detail": "their fingerprint differs"}, protocol.InputsDiffer),
        (protocol.Compile(), {"type": "compiled", "clock_s": {"call": 0.5}}, protocol.Compiled),
        (
            protocol.Time(calls=1, samples=1, warmup=0),
            {"type": "timed", "times_ms": [0.1], "l2_reset": True},
            protocol.Timed,
        ),
        (
            protocol.Time(calls=1, samples=1, warmup=0),
            {"type": "graph_unsupported", **ERROR},
            protocol.GraphUnsupported,
        ),
        (protocol.Captured(), {"type": "captured", **output, "captured": [], "tensors": {}}, protocol.CapturedOutput),
        (protocol.Recheck(calls=1, buffer=0), {"type": "rechecked", **output}, protocol.Rechecked),
        (protocol.Call(), {"type": "output", **output, "evidence": {}, "poisoned_bytes": 8}, protocol.Output),
        (protocol.Call(), {"type": "inputs_differ", "detail": "no inputs source was sent"}, protocol.InputsDiffer),
        (protocol.Call(), {"type": "error", **ERROR}, protocol.Error),
    ]


@pytest.mark.parametrize("request_, header, kind", every_answer(), ids=lambda v: getattr(v, "__name__", None))
def test_each_answer_decodes_to_its_type_and_back_to_its_header(request_, header, kind):
    answer = decode_answer(request_, header)
    assert type(answer) is kind and answer.kind == header["type"]
    assert header.items() <= answer.header().items() and decode_answer(request_, answer.header()) == answer
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.tensors = {}


def test_the_frames_within_a_time_request_decode_only_where_the_parent_answers_them():
    sampled, committed = {"type": "sampled", "sample": 0}, {"type": "committed", "sample": 0, "digests": []}
    assert decode_answer(TIME, sampled, interim=True) == protocol.Sampled(sample=0)
    assert decode_answer(TIME, committed, interim=True) == protocol.Committed(sample=0, digests=[])
    for header in (sampled, committed):
        with pytest.raises(ProtocolError, match=f"'{header['type']}' is no answer to 'time'"):
            decode_answer(TIME, header)
    with pytest.raises(ProtocolError, match="'sampled' is no answer to 'call'"):
        decode_answer(protocol.Call(), sampled, interim=True)


@pytest.mark.parametrize(
    "request_, header, says",
    [
        (protocol.Call(), {"type": "output", "items": [], "evidence": {}}, "output: missing field 'container'"),
        (protocol.Load(seed=1), {"type": "loaded"}, "loaded: missing field 'evidence'"),
        (protocol.Derive(), {"type": "derived", "family": {}, "fixed": {}}, "derived: missing field 'declared'"),
        (protocol.Call(), {"type": "inputs_differ", "detail": 3}, "inputs_differ: field 'detail' is int, not str"),
        (protocol.Load(seed=1), {"type": "loaded", "evidence": []}, "loaded: field 'evidence' is list, not dict"),
        (
            protocol.Load(seed=1),
            {"type": "loaded", "evidence": {}, "inputs_writable": 1},
            "loaded: field 'inputs_writable' is int, not bool | None",
        ),
        (protocol.Stage(), {"type": "staged", "sets": True}, "staged: field 'sets' is bool, not int"),
        (
            protocol.Time(calls=1, samples=1, warmup=0),
            {"type": "timed", "times_ms": [1.0], "kept": "1"},
            "timed: field 'kept' is str, not int | None",
        ),
        (protocol.Compile(), {"type": "compiled", "verdict": "PASS"}, "compiled: unknown field(s) 'verdict'"),
        (protocol.Compile(), {"type": "compiled", "tensors": []}, "compiled: field 'tensors' is list, not dict | None"),
        (
            protocol.Compare(slot="trial", tolerances=[], method="oracle"),
            {"type": "compared", "results": [{"passed": "yes"}]},
            "compared: a result is not {passed, failure_kind, summary, metrics}",
        ),
        (
            protocol.Compare(slot="trial", tolerances=[], method="oracle"),
            {"type": "compared", "results": [], "task_check": {"passed": 1}},
            "compared: the task's check is not {passed, message}",
        ),
        (protocol.Call(), {"type": "error", "message": "x"}, "an error without phase, exc_type"),
        (protocol.Call(), {"type": "error", **ERROR, "phase": None}, "an error without phase"),
        (
            protocol.Call(),
            {"type": "error", **ERROR, "exc_module": 3},
            "error: field 'exc_module' is int, not str | None",
        ),
        (protocol.Call(), {"type": "compared", "results": []}, "'compared' is no answer to 'call'"),
        (protocol.Load(seed=1), {"type": "graph_unsupported", **ERROR}, "'graph_unsupported' is no answer to 'load'"),
        (protocol.Call(), {"type": "verdict"}, "'verdict' is no answer to 'call'"),
        (protocol.Call(), {"type": ["output"]}, "['output'] is no answer to 'call'"),
        (protocol.Call(), {"items": []}, "None is no answer to 'call'"),
        (protocol.Keep(call=0), {"type": "output"}, "'output' is no answer to 'keep'"),  # an op answered by none
        (protocol.Call(), ["output"], "an answer is an object, not list"),
    ],
)
def test_a_malformed_answer_is_a_protocol_error_with_a_one_line_message(request_, header, says):
    with pytest.raises(ProtocolError) as raised:
        decode_answer(request_, header)
    assert str(raised.value) == says and "\n" not in says


def test_an_answer_is_read_by_its_fields_only():
    """No dict access: a reader outside protocol/ reads an answer's typed fields, a field the frame left out at
    its default of None."""
    output = decode_answer(protocol.Call(), {"type": "output", "container": "tuple", "items": [], "evidence": {}})
    assert output.kind == "output" and output.container == "tuple" and output.values is None
    assert output.perturbed is None and output.evidence == {}
    for read in (lambda: output["container"], lambda: output.get("container"), lambda: "container" in output):
        with pytest.raises((TypeError, AttributeError)):
            read()


def test_a_real_pair_of_workers_answers_decode_and_round_trip():
    from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
    from kerneljudge.sandbox.talk import WorkerChannels

    limits = WorkerLimits(step_timeout_s=60)
    channels = WorkerChannels("candidate", 2**24)
    task, candidate = (TASKS / "tiny_bias_relu.py").read_text(), (CANDIDATES / "honest_torch.py").read_text()
    reference = WorkerProcess("reference", "cpu", task, limits, peer=channels)
    worker = WorkerProcess("candidate", "cpu", candidate, limits, channels=channels)
    answers = []

    def ask(side, request, **kw):
        kw.setdefault("fetch", ("init_inputs", "captured"))  # as the judge asks (judgment/stages/workers.ask)
        answer, values = side.request(request, **kw)
        assert decode_answer(request, answer.header()) == answer  # every field of it in its header
        answers.append(answer)
        return answer, values

    try:
        assert reference.receive(timeout_s=120)["type"] == worker.receive(timeout_s=120)["type"] == "hello"
        loaded, values = ask(reference, protocol.Load(seed=42, footprint=True))
        assert isinstance(loaded, protocol.Loaded) and loaded.footprint and loaded.family_error is None
        built, _ = ask(worker, protocol.Load(seed=42), values=values["init_inputs"])
        assert isinstance(built, protocol.Loaded) and isinstance(built.evidence, dict)
        derived, _ = ask(reference, protocol.Derive())
        assert isinstance(derived, protocol.Derived) and isinstance(derived.declared, bool)
        trial, _ = ask(reference, protocol.Trial(seed=1, call_seed=5, inputs_to="candidate"))
        assert isinstance(trial, protocol.TrialRun) and trial.made is None and trial.inputs is not None
        output, _ = ask(worker, protocol.Call(call_seed=5), placed=(trial.inputs, trial.input_tensors), fetch=())
        assert isinstance(output, protocol.Output) and output.tree and output.items[0]["plain_tensor"]
        tolerances = [{"atol": 1e-4, "rtol": 1e-4, "ref_error_factor": 10.0, "name": "fp32"}]
        placed = (output.values, output.tensors)
        compared, _ = ask(
            reference, protocol.Compare(slot="trial", tolerances=tolerances, method="oracle"), placed=placed
        )
        assert isinstance(compared, protocol.Compared) and compared.results[0]["passed"] is True
        sets = [{"seed": 1}, {"seed": 2}]
        staged, _ = ask(reference, protocol.Stage(sets=sets, inputs_to="candidate", tolerances=tolerances))
        assert isinstance(staged, protocol.Staged) and staged.sets == 2
        pool, _ = ask(worker, protocol.Stage(), placed=(staged.inputs, staged.input_tensors))
        assert isinstance(pool, protocol.Staged) and pool.sets == 2
        keeper = KeptCall(random.Random(0), samples=2, calls=2, sets=2, keeps=True)
        timing = protocol.Time(calls=2, samples=2, warmup=1, staged=True, ask_keep=True)
        timed, _ = ask(worker, timing, fetch=(), interim=keeper.answer)
        assert isinstance(timed, protocol.Timed) and timed.kept == 1 and timed.sealed_open == []
        assert keeper.missing() is None and keeper.checked_digests() is not None
        captured, values = ask(worker, protocol.Captured())
        assert isinstance(captured, protocol.CapturedOutput) and list(values["captured"][0].shape) == [16, 33]
        failed, _ = ask(worker, protocol.Captured())  # fetched once, then dropped
        assert isinstance(failed, protocol.Error) and "no kept output" in failed.message
    finally:
        worker.close()
        reference.close()
        channels.close()
    assert {type(a) for a in answers} >= {protocol.Loaded, protocol.TrialRun, protocol.Output, protocol.Timed}


# A worker's first frame: its hello, or the error that kept it from starting


def hello_header(**changes):
    header = {"type": "hello", "role": "reference", "pid": 7, "python": "3.12.3", "torch": "2.11.0"}
    return {**header, "torch_cuda": None, "cuda_available": False, "device": "cpu", "flags": {}, **changes}


def test_a_hello_decodes_into_its_typed_fields():
    hello = protocol.decode_greeting(hello_header(triton="3.6.0", gpu_memory_bytes=80 * 2**30))
    assert isinstance(hello, protocol.Hello) and hello.device == "cpu" and hello.triton == "3.6.0"
    assert hello.gpu_memory_bytes == 80 * 2**30 and hello.gpu_uuid is None and hello.triton_prepared_s is None


def test_an_error_greeting_decodes_as_the_error_that_kept_the_worker_from_starting():
    error = protocol.decode_greeting({"type": "error", "phase": "start", "exc_type": "RuntimeError", "message": "no"})
    assert isinstance(error, protocol.Error) and error.exc_type == "RuntimeError"


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ([], "an object"),
        ({"type": "loaded"}, "no greeting"),
        (hello_header(cuda_available="yes"), "cuda_available"),
        (hello_header(gpu_memory_bytes=True), "gpu_memory_bytes"),
        (hello_header(sandbox="off"), "unknown field"),
        ({k: v for k, v in hello_header().items() if k != "device"}, "missing field 'device'"),
        ({"type": "error", "phase": "start", "exc_type": "E"}, "without message"),
    ],
)
def test_a_greeting_that_breaks_the_protocol_is_refused(header, says):
    with pytest.raises(protocol.ProtocolError, match=says):
        protocol.decode_greeting(header)
