"""From model to verdict: ask a model for candidates and judge them (docs/generate.md).

- `datasets.py`: which tasks (the built-in suite, a KernelBench checkout, its parquet files, GPU MODE folders),
  each at a KernelBench address;
- `prompts.py`: the prompt templates, KernelBench-style by default, and the repair round's feedback;
- `client.py`: the request, the answer, and the OpenAI-compatible client with its retries;
- `offline.py`: canned responses replayed without a network; `loopback.py`: the same served over HTTP;
- `records.py`: the JSONL records; `run.py`: the run folder and `generate`; `improve.py`: the repair loop.
"""

from kerneljudge.generate.client import ChatClient, ChatRequest, Completion, Sampling
from kerneljudge.generate.datasets import SelectedTask, select_tasks, write_problems
from kerneljudge.generate.improve import ImproveSpec, improve
from kerneljudge.generate.offline import OfflineBackend, ResponseBook
from kerneljudge.generate.prompts import feedback_template, prompt_template
from kerneljudge.generate.records import RoundRecord, SampleRecord
from kerneljudge.generate.run import GenerateSpec, generate

__all__ = [
    "ChatClient",
    "ChatRequest",
    "Completion",
    "GenerateSpec",
    "ImproveSpec",
    "OfflineBackend",
    "ResponseBook",
    "RoundRecord",
    "SampleRecord",
    "Sampling",
    "SelectedTask",
    "feedback_template",
    "generate",
    "improve",
    "prompt_template",
    "select_tasks",
    "write_problems",
]
