"""The prompts a generation sends: the KernelBench-style template by default, or one from a file, and the
feedback message of a repair round (docs/generate.md lists the placeholders).

The default follows the structure of KernelBench's own prompt (ScalingIntelligence/KernelBench,
src/prompt_constructor.py: what the model is to do, one example architecture and its version with a custom
kernel, the architecture to optimize, the instruction to output `ModelNew` in a code block), in our own words
and with our own example pair, for Triton, which the judge also runs on the CPU through Triton's interpreter.

Placeholders are `{{name}}`: Python code is full of single braces (dicts, f-strings), which a template must be
able to quote as they are. An unknown placeholder is an error, never left in the text a model reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.errors import UsageError
from kerneljudge.sources.task import read_source, sha256_text

PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")

EXAMPLE_REFERENCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds two tensors of the same shape."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(4096, 1024), torch.randn(4096, 1024)]


def get_init_inputs():
    return []
'''

EXAMPLE_NEW = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # the last block may run past the end
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = out.numel()
        add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
"""

DEFAULT_TEMPLATE = """You write custom Triton kernels that replace the PyTorch operators of an architecture to make it \
faster.

You may replace any of its operators, some of them or all: fuse several into one kernel (a matmul and its \
activation, a reduction and the normalization that follows it), or compute them by another algorithm (an online \
softmax, for instance). The outputs must stay those of the architecture, on every input it accepts.

Here is an example. The given architecture:

```python
{{example_reference}}
```

The same architecture with a custom Triton kernel:

```python
{{example_new}}
```

You are given the following architecture:

```python
{{reference}}
```

Optimize the architecture named Model with custom Triton kernels. Name the optimized architecture ModelNew, keep \
the arguments of its constructor and of forward, and output the whole new code in one ```python code block. \
Write real code that runs as it is, not pseudocode, and no testing code.
"""

DEFAULT_FEEDBACK = """Your kernel (attempt {{round}} of {{rounds}}) was judged. The judge's verdict:

{{explanation}}

Fix the problem and output the whole corrected ModelNew in one ```python code block."""

PROMPT_FIELDS = ("reference", "task_name", "example_reference", "example_new")
FEEDBACK_FIELDS = ("explanation", "status", "round", "rounds", "task_name")


@dataclass(frozen=True)
class Template:
    """A prompt template: its text, where it came from, and the placeholders it may use."""

    text: str
    origin: str  # "default" or the file's path
    fields: tuple[str, ...]
    required: tuple[str, ...]

    @property
    def sha256(self) -> str:
        return sha256_text(self.text)

    def __post_init__(self) -> None:
        used = set(PLACEHOLDER.findall(self.text))
        unknown = sorted(used - set(self.fields))
        if unknown:
            known = ", ".join("{{" + f + "}}" for f in self.fields)
            raise UsageError(f"template {self.origin}: unknown placeholder {{{{{unknown[0]}}}}} (known: {known})")
        missing = [f for f in self.required if f not in used]
        if missing:
            raise UsageError(f"template {self.origin}: it must use {{{{{missing[0]}}}}}")

    def render(self, **values: object) -> str:
        """The text with each placeholder replaced; the values are inserted as they are, never re-read."""
        return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), self.text)


def prompt_template(path: Path | None = None) -> Template:
    """The generation template: the default, or the file at `path` (which must use {{reference}})."""
    text, origin = (DEFAULT_TEMPLATE, "default") if path is None else (read_template(path), str(path))
    return Template(text, origin, PROMPT_FIELDS, ("reference",))


def feedback_template(path: Path | None = None) -> Template:
    """The repair round's message: the default, or the file at `path` (which must use {{explanation}})."""
    text, origin = (DEFAULT_FEEDBACK, "default") if path is None else (read_template(path), str(path))
    return Template(text, origin, FEEDBACK_FIELDS, ("explanation",))


def read_template(path: Path) -> str:
    return read_source(path, "template", UsageError)


def generation_prompt(template: Template, reference: str, task_name: str) -> str:
    return template.render(
        reference=reference.strip("\n"),
        task_name=task_name,
        example_reference=EXAMPLE_REFERENCE.strip("\n"),
        example_new=EXAMPLE_NEW.strip("\n"),
    )


def feedback_prompt(template: Template, explanation: str, status: str, round_: int, rounds: int, task_name: str) -> str:
    return template.render(explanation=explanation, status=status, round=round_, rounds=rounds, task_name=task_name)
