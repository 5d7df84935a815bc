"""`compute_score_async`'s request batching (kerneljudge/adapters/verl.py), without verl: the calls verl's
reward loop makes, one coroutine per sample on one event loop, with a scripted judge."""

from __future__ import annotations

import asyncio

import pytest
from scripted_judge import ScriptedJudge, response

from kerneljudge.adapters.verl import compute_score_async
from kerneljudge.api.outcomes import AdapterError

TASK = "builtin:rmsnorm_fp32"


def call(judge, text: str, **kwargs):
    return compute_score_async("kernelbench", text, TASK, {}, judge=judge, **kwargs)


def test_samples_arriving_together_share_a_request_and_options_split_it():
    judge = ScriptedJudge()

    async def worker():
        binary = {"reward_spec": "kerneljudge.reward.binary.v1"}
        together = [call(judge, response(tag), **binary) for tag in ("a", "WRONG b", "BROKEN c")]
        return await asyncio.gather(*together, call(judge, response("d"), options={"timing": False}, **binary))

    results = asyncio.run(worker())
    assert [r["score"] for r in results] == [1.0, 0.0, 0.0, 1.0]
    assert [r["rewarded"] for r in results] == [True, True, False, True]
    assert sorted(len(request) for request in judge.requests) == [1, 3]  # the timing-off one went apart


def test_a_sample_after_the_window_goes_in_its_own_request():
    judge = ScriptedJudge()

    async def worker():
        first = asyncio.ensure_future(call(judge, response("a"), batch_window_s=0.01))
        await asyncio.sleep(0.2)
        return await asyncio.gather(first, call(judge, response("b"), batch_window_s=0.01))

    asyncio.run(worker())
    assert [len(request) for request in judge.requests] == [1, 1]


def test_a_request_that_fails_fails_each_of_its_callers():
    class Down(ScriptedJudge):
        def judge(self, items):
            raise ConnectionError("judge-host:8000 refused the connection")

    async def worker():
        return await asyncio.gather(*(call(Down(), response(tag)) for tag in "ab"), return_exceptions=True)

    assert [type(result) for result in asyncio.run(worker())] == [ConnectionError, ConnectionError]
    with pytest.raises(AdapterError, match="bad judge options"):
        asyncio.run(call(ScriptedJudge(), response("a"), options={"mode": "nonsense"}))
