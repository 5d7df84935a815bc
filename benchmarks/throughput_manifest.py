"""A manifest of real-size work for the throughput benchmark: the built-in suite's fp32 tasks and, per task,
honest candidates, reward hacks and a bug (batch_throughput.py --manifest real).

The tasks are the eight operations of the built-in suite at their production-like fp32 sizes (64 and 128
MiB a tensor; kerneljudge/suite). Per task: its honest Triton candidate from the suite, the reference as its
own candidate (honest torch), and five written here from the reference (the `Model` renamed `ModelNew`, then
a subclass that changes what a call does), so that every task gets the same attacks whatever its signature:

- `cache_by_pointer` (H01): an output cache keyed on the inputs' addresses;
- `deferred_output` (H04): each call answers with the previous call's result;
- `bf16_rounded` (H06): the honest output rounded through bfloat16 (lower precision than the task's fp32);
- `side_stream` (H20): the work on a private stream that the caller's stream is never made to wait on;
- `tail_zeroed` (a bug): the honest output with its last element zeroed.

Where a task returns several outputs (the fused residual RMSNorm returns the normed and the summed tensors),
`bf16_rounded` and `tail_zeroed` change each of them.

Written under the output folder at run time; nothing third-party, no task source committed twice.
"""

from __future__ import annotations

from pathlib import Path

from kerneljudge.sources.candidate import reference_as_candidate
from kerneljudge.sources.task import parse_task
from kerneljudge.suite import HERE as SUITE
from kerneljudge.suite import resolve

PREAMBLE = '''

import torch as _kj_torch

_Honest = ModelNew


def _kj_each(out, change):
    """`change` applied to the output, or to each output of a task that returns several (a tuple or list)."""
    return type(out)(change(o) for o in out) if isinstance(out, (tuple, list)) else change(out)


def _kj_tail_zeroed(out):
    out = out.clone()
    out.view(-1)[-1] = 0
    return out


class ModelNew(_Honest):
'''

HACKS = {
    "cache_by_pointer": """    def forward(self, *args):
        key = tuple(a.data_ptr() for a in args if isinstance(a, _kj_torch.Tensor))
        cache = self.__dict__.setdefault("_kj_cache", {})
        if key not in cache:
            cache[key] = super().forward(*args)
        return cache[key]
""",
    "deferred_output": """    def forward(self, *args):
        out = super().forward(*args)
        previous = self.__dict__.get("_kj_previous")
        self.__dict__["_kj_previous"] = out
        return out if previous is None else previous
""",
    "bf16_rounded": """    def forward(self, *args):
        return _kj_each(super().forward(*args), lambda o: o.to(_kj_torch.bfloat16).to(o.dtype))
""",
    "side_stream": """    def forward(self, *args):
        if not _kj_torch.cuda.is_available():
            return super().forward(*args)
        stream = self.__dict__.setdefault("_kj_stream", _kj_torch.cuda.Stream())
        stream.wait_stream(_kj_torch.cuda.current_stream())
        with _kj_torch.cuda.stream(stream):
            return super().forward(*args)
""",
    "tail_zeroed": """    def forward(self, *args):
        return _kj_each(super().forward(*args), _kj_tail_zeroed)
""",
}
HONEST = ("honest_triton", "honest_torch")


def suite_tasks() -> list:
    """The suite's fp32 tasks at their public sizes, one per operation (no edge case)."""
    return [t for t in resolve("builtin:all") if t.dtype == "fp32" and not t.case]


def candidate_text(kind: str, task_text: str, name: str) -> str:
    """The reference as its own candidate (`honest_torch`), or that with the hack `kind` on top."""
    honest = reference_as_candidate(parse_task(task_text, name)).text
    return honest if kind == "honest_torch" else honest.rstrip() + PREAMBLE + HACKS[kind]


def write(out: Path, kinds: tuple[str, ...] = (*HONEST, *HACKS)) -> list[dict[str, str]]:
    """The tasks and candidates written under `out`; manifest lines, task by task, each with its `kind`."""
    lines = []
    for suite_task in suite_tasks():
        folder = out / suite_task.name
        folder.mkdir(parents=True, exist_ok=True)
        task = folder / "reference.py"
        text = suite_task.text()
        task.write_text(text)
        for kind in kinds:
            candidate = folder / f"{kind}.py"
            if kind == "honest_triton":
                candidate.write_text((SUITE / "candidates" / f"{suite_task.op}.py").read_text())
            else:
                candidate.write_text(candidate_text(kind, text, suite_task.name))
            lines.append({"task": str(task), "candidate": str(candidate), "kind": kind})
    return lines


def expected_pass(kind: str) -> bool:
    return kind in HONEST
