"""The worker protocol: one typed request per operation, checked field by field as the worker decodes it.

A request the parent builds must reach the worker as it was built; anything else in a frame's header (an
operation no worker serves, a field no request has, one missing or of the wrong type) must be refused as a
protocol error, never half-read with a default, and the worker must go on serving."""

import dataclasses

import pytest

from helpers import TASKS
from kerneljudge import protocol
from kerneljudge.protocol import ProtocolError, decode


def every_request():
    """One instance of each request, every field set away from its default where it has one."""
    return [
        protocol.Load(seed=3, shape={"N": 8}, footprint=True, task="text"),
        protocol.Derive(),
        protocol.Trial(
            seed=1,
            call_seed=2,
            oracle=False,
            variant={"kind": "scaled"},
            slot="lint",
            inputs_to="made",
            on_device=True,
            train=True,
            rng_seed=5,
            swap={"0": 9},
            stats=True,
            diff_slot="a",
            send_outputs=True,
        ),  # fmt: skip
        protocol.Rerun(
            seed=1,
            call_seed=3,
            tolerances=[{"atol": 1e-4}],
            fingerprint=["f"],
            variant={"kind": "scaled"},
            slot="a",
            on_device=True,
        ),
        protocol.Call(
            made={"seed": 1, "fingerprint": "f"},
            reuse_inputs=True,
            poison_bytes=64,
            reread_s=0.5,
            trace=True,
            call_seed=4,
            keep_inputs=True,
            perturb={"kind": "delay"},
        ),  # fmt: skip
        protocol.Compare(slot="trial", tolerances=[{"atol": 1e-4}], method="native", keep=True, task_check=True),
        protocol.Stage(sets=[{"seed": 1}], made=[{"seed": 1}], on_device=True, inputs_to="here"),
        protocol.Compile(),
        protocol.Time(calls=2, samples=3, warmup=1, precursor_ms=0.5, graph=True, ask_keep=True, keep_earlier=True),
        protocol.Keep(call=-1),
        protocol.Commit(calls=3),
        protocol.Captured(),
        protocol.Recheck(calls=4, buffer=1, compiled=True),
        protocol.Exit(),
    ]


def test_every_request_reaches_the_worker_as_it_was_built():
    requests = every_request()
    assert {type(r) for r in requests} == set(protocol.OPS.values())
    for request in requests:
        framed = {**request.header(), "args": [], "tensors": {}}  # the transport's keys beside the request's
        assert decode(framed) == request


@pytest.mark.parametrize(
    "header, says",
    [
        ({"op": "fetch_oracle"}, "unknown op 'fetch_oracle'"),
        ({"seed": 1}, "unknown op None"),
        ([("op", "load")], "a request is an object"),
        ({"op": "trial"}, "trial: missing field 'seed'"),
        ({"op": "trial", "seed": "1"}, "field 'seed' is str"),
        ({"op": "trial", "seed": True}, "field 'seed' is bool"),  # a bool is no int here
        ({"op": "trial", "seed": 1, "oracle": 1}, "field 'oracle' is int"),
        ({"op": "call", "reuse": True}, "call: unknown field(s) 'reuse'"),
        ({"op": "time", "calls": 1, "samples": 2, "warmup": 0, "ask_keep": 1}, "field 'ask_keep' is int"),
        # The kept call is named after its sample ran, never in the request (H03, judgment/stages/kept_call.py).
        ({"op": "time", "calls": 1, "samples": 2, "warmup": 0, "capture": [0, 1]}, "unknown field(s) 'capture'"),
        ({"op": "keep"}, "keep: missing field 'call'"),
    ],
)
def test_a_header_that_is_no_request_is_a_protocol_error(header, says):
    with pytest.raises(ProtocolError, match=None) as raised:
        decode(header)
    assert says in str(raised.value)


def test_a_float_field_takes_an_int_and_optional_fields_take_none():
    load = decode({"op": "load", "seed": 1, "shape": None})
    timing = decode({"op": "time", "calls": 1, "samples": 2, "warmup": 0, "precursor_ms": 1})
    assert timing.precursor_ms == 1 and load.shape is None


def test_requests_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        protocol.Load(seed=1).seed = 2


def test_a_worker_answers_a_malformed_request_with_a_protocol_error_and_goes_on_serving():
    from kerneljudge.protocol import wire
    from kerneljudge.sandbox.process import WorkerLimits, WorkerProcess
    from kerneljudge.sandbox.talk import WorkerChannels

    class Forged(protocol.Request):
        """A request no worker serves, sent as the parent would send one."""

        op = "fetch_oracle"

    text = (TASKS / "tiny_bias_relu.py").read_text()
    peer = WorkerChannels("candidate", 2**20)
    worker = WorkerProcess("reference", "cpu", text, WorkerLimits(step_timeout_s=60), peer=peer)
    try:
        assert worker.receive(timeout_s=120)["type"] == "hello"
        refused, _ = worker.request(Forged())
        assert isinstance(refused, protocol.Error) and refused.phase == "protocol" and "fetch_oracle" in refused.message
        served, _ = worker.request(protocol.Load(seed=0))
        assert isinstance(served, protocol.Loaded)
        # A field of the wrong type, written straight to the worker's request pipe.
        wire.write_frame(worker._req_w, {"op": "load", "seed": "0", "args": [], "tensors": {}}, None)
        refused = worker.receive(timeout_s=60)
        assert refused["phase"] == "protocol" and "field 'seed' is str" in refused["message"]
    finally:
        worker.close()


def test_an_answer_of_another_operation_is_a_broken_protocol():
    call, compare = protocol.Call(), protocol.Compare(slot="trial", tolerances=[], method="oracle")
    protocol.check_response(call, {"type": "output", "container": "Tensor", "items": [], "evidence": {}})
    protocol.check_response(call, {"type": "error", "phase": "call", "exc_type": "ValueError", "message": "x"})
    protocol.check_response(compare, {"type": "compared", "results": []})
    for request, answer, says in [
        (call, {"type": "compared", "results": []}, "'compared' is no answer to 'call'"),
        (call, {"type": "loaded"}, "'loaded' is no answer to 'call'"),
        (call, {"type": "error", "message": "x"}, "an error without phase, exc_type"),
        (call, ["output"], "an answer is an object"),
        (protocol.Load(seed=0), {"type": "output"}, "'output' is no answer to 'load'"),
    ]:
        with pytest.raises(ProtocolError) as raised:
            protocol.check_response(request, answer)
        assert says in str(raised.value)


def test_a_candidate_that_writes_the_reference_workers_answer_into_its_pipe_fails_as_a_broken_protocol():
    from helpers import CANDIDATES, run_judge

    # In audit mode, past the preflight (which in enforce mode rejects the os.write before import, KJ-S040).
    record = run_judge(TASKS / "tiny_bias_relu.py", CANDIDATES / "forge_answer.py", mode="audit")
    assert record.status == "FAIL" and record.failure_kind == "crash", record.failure
    assert "broke protocol: 'compared' is no answer to 'call'" in record.failure.summary


def test_a_workers_clock_report_keeps_only_plain_seconds_of_known_parts():
    """A candidate's worker can report anything as `clock_s`: the record keeps only what is a figure."""
    from kerneljudge.sandbox.talk import clock_parts

    assert clock_parts({"call": 0.5, "write": 2, "read": 1e-3}) == {"call": 0.5, "write": 2.0, "read": 1e-3}
    assert clock_parts({"call": -1.0, "write": float("inf"), "evidence": True, "inputs": "3"}) == {}
    assert clock_parts({"verdict": 1.0, "call": float("nan")}) == {}
    assert clock_parts({f"p{i}": 0.1 for i in range(9)}) == {}
    assert clock_parts(["call", 1.0]) == {} and clock_parts(None) == {}
