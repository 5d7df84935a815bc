"""A judge for the contract tests: any object with `judge(items) -> answers` (kerneljudge/api/outcomes.py).

It answers from a tag in the candidate's text, at once, so a test measures the trainer's call and not a
judgment: PASS (reward 1.0), WRONG: FAIL (0.0), BROKEN: the judge's own fault (`valid: false`, no reward).
Every request is kept, so a test sees how the trainer's calls were grouped.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kerneljudge.api.schema import Answer, AnswerMetrics, Item


class ScriptedJudge:
    def __init__(self) -> None:
        self.requests: list[list[Item]] = []
        self._lock = threading.Lock()  # verl calls from its thread pool

    def judge(self, items: Sequence[Item]) -> list[Answer]:
        with self._lock:
            self.requests.append(list(items))
        return [self.answer(item, number) for number, item in enumerate(items)]

    @staticmethod
    def answer(item: Item, number: int) -> Answer:
        if "BROKEN" in item.candidate:
            status, reward, valid, kind = "ERROR", None, False, "judge_error"
        elif "WRONG" in item.candidate:
            status, reward, valid, kind = "FAIL", 0.0, True, "tolerance"
        else:
            status, reward, valid, kind = "PASS", 1.0, True, None
        return Answer(
            request_id=item.request_id,
            reward=reward,
            reward_spec=item.options.reward_spec,
            valid=valid,
            status=status,
            failure_kind=kind,
            failure_reason=None,
            findings=[],
            metrics=AnswerMetrics(
                correct=status == "PASS", trials=1, trials_passed=int(status == "PASS"), timed=False, duration_s=0.0
            ),
            record_id=f"rec-{item.task or 'source'}-{number}",
            explanation=f"{status}: scripted",
        )

    @property
    def items_judged(self) -> list[str]:
        return [item.candidate for request in self.requests for item in request]


def response(tag: str) -> str:
    """A model's response around a candidate that carries `tag` (WRONG, BROKEN, or any other word: PASS)."""
    model = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    return f"My kernel:\n```python\n{model}# {tag}\n```\nDone."
