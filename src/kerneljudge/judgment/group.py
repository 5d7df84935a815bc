"""Judging a group: many candidates of one task, judged together, as a trainer's step sends them.

A GRPO step sends G samples for each of its prompts at once. Judged one by one, each sample starts its own
reference worker and builds the task again; judged as a group (`judge_group`), the group shares:

- **one hidden plan**: the judgments' source of randomness is a keyed stream (`GroupSource`) whose key is drawn
  from the operating system once per group; each candidate's judgment reads it from its start, so every candidate
  meets the same trials, hidden shapes, perturbations and timing pools, as a single judgment would have drawn them.
  A key serves one group and is never kept: the next group, or the same task in the next step, draws another;
- **the reference worker of the checked pairs** (judgment/stages/shared_reference.py): started once, lent to each
  candidate's judgment in turn with a fresh candidate worker, the channels between them wiped before each lend;
- **the reference's trial outputs**: the group's reference keeps each trial's reference and float64 oracle outputs
  (up to shared_reference.KEEP_BYTES on the device) and answers the next judgments' same trials from them, the
  inputs still made and placed anew for each candidate (worker/correctness/memo.py).

Nothing else is shared: each candidate has its own fresh sandboxed worker, its own fresh timing pair (both workers,
so the timing's pairing is a single judgment's: docs/timing.md) and its own record, which says where it stood in
the group (`Record.workers.group`). The candidates are judged in the group's order, one at a time; a batch or a
server judges several groups at once, on its lanes.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.judgment.gate import Gate
from kerneljudge.judgment.pipeline import Judgment
from kerneljudge.judgment.progress import Progress, progress_of
from kerneljudge.judgment.stages.shared_reference import SharedReference
from kerneljudge.judgment.stages.spare_pairs import SparePairs
from kerneljudge.judgment.stages.state import worker_limits
from kerneljudge.results.verdict import GroupPlace, Record
from kerneljudge.sandbox import confine
from kerneljudge.sources.candidate import Candidate, candidate_from_text, load_candidate
from kerneljudge.sources.task import Task
from kerneljudge.tasks import gpumode
from kerneljudge.tasks.load import load_task
from kerneljudge.timing.sides import CachedSide

KEY_BYTES = 32


class GroupSource(random.Random):
    """A keyed stream of random numbers: BLAKE2b, keyed, over a counter. Two sources of one key give the same
    numbers in the same order, and without the key the stream cannot be told from the operating system's
    randomness, nor its next numbers from its last. Like `random.SystemRandom` it has no state to save or seed."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a group's key is at least 16 bytes")
        self._key = bytes(key)
        self._counter = 0
        self._buffer = b""
        super().__init__()

    def seed(self, *args: Any, **kwargs: Any) -> None:  # random.Random.__init__ calls it: nothing to seed
        return None

    def getstate(self) -> Any:
        raise NotImplementedError("a group's source has no state to save")

    def setstate(self, state: Any) -> None:
        raise NotImplementedError("a group's source has no state to set")

    def _bytes(self, count: int) -> bytes:
        while len(self._buffer) < count:
            block = hashlib.blake2b(self._counter.to_bytes(16, "little"), key=self._key, digest_size=64).digest()
            self._buffer += block
            self._counter += 1
        taken, self._buffer = self._buffer[:count], self._buffer[count:]
        return taken

    def getrandbits(self, k: int) -> int:
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        return int.from_bytes(self._bytes((k + 7) // 8), "little") >> (-k % 8)

    def random(self) -> float:
        return self.getrandbits(53) * 2.0**-53

    def randbytes(self, n: int) -> bytes:
        return self._bytes(n)


def new_group_key() -> bytes:
    """A group's key, from the operating system's randomness."""
    return secrets.token_bytes(KEY_BYTES)


def tell(update: Callable[[str], None], which: str, stage: str) -> None:
    update(f"{which}: {stage}")


def judge_group(
    task: Task | str | Path,
    candidates: Sequence[Candidate | str | Path] | None = None,
    config: JudgeConfig | None = None,
    progress: Progress | bool | None = None,
    gpu: str | None = None,
    gate: Gate | None = None,
    baselines: dict[str, CachedSide] | None = None,
    spares: SparePairs | None = None,
    *,
    candidate_texts: Sequence[str] | None = None,
    key: bytes | None = None,
    on_record: Callable[[int, Record], None] | None = None,
    stop: Callable[[], bool] | None = None,
    **overrides: Any,
) -> list[Record]:
    """Judge a group of candidates of one task (module docstring); their records, in the group's order.

    The candidates are `candidates` (each a `Candidate` or a file's path) or `candidate_texts` (each a candidate's
    or a model response's text, as `judge(candidate_text=...)` reads one); exactly one of them. `config`,
    `overrides`, `progress`, `gpu`, `gate`, `baselines` and `spares` are `judge`'s. `key` replaces the key drawn
    from the operating system (`new_group_key`): for tests only, since a candidate that knows it knows the plan.
    `on_record(index, record)` is called as each record is made (a batch stores it at once); where `stop()` says so
    before a candidate's judgment, the group ends there and the records so far come back (a batch asked to stop).
    """
    config = (config or JudgeConfig()).with_(**overrides) if overrides else (config or JudgeConfig())
    task = task if isinstance(task, Task) else load_task(task)
    if (candidates is None) == (candidate_texts is None):
        raise UsageError("judge_group() takes exactly one of candidates (Candidates or paths) and candidate_texts")
    if candidate_texts is not None:
        loaded = [candidate_from_text(text) for text in candidate_texts]
    else:
        assert candidates is not None
        loaded = [c if isinstance(c, Candidate) else load_candidate(c) for c in candidates]
    if not loaded:
        raise UsageError("a group holds at least one candidate")
    loaded = [gpumode.adapt_candidate(task, c) for c in loaded]
    key = key if key is not None else new_group_key()
    place = {"id": secrets.token_hex(8), "size": len(loaded)}
    shared = SharedReference(task.text, config.device, gpu, confine.policy_for(config.sandbox), worker_limits(config))
    records: list[Record] = []
    with shared, progress_of(progress, "judging a group") as update:
        for index, candidate in enumerate(loaded):
            if stop is not None and stop():
                break
            said = None if update is None else partial(tell, update, f"candidate {index + 1}/{len(loaded)}")
            judgment = Judgment(
                task, candidate, config, said, gpu, gate, baselines, GroupSource(key), spares, shared=shared
            )
            record = judgment.run()
            record.workers.group = GroupPlace(index=index, **place)
            records.append(record)
            if on_record is not None:
                on_record(index, record)
    return records
