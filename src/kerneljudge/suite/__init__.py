"""The built-in task suite: `kerneljudge tasks list`, tasks addressed as `builtin:NAME`.

Each operation is one KernelBench-format file in `ops/` (a valid task at its default parameters); a task of
the suite is that file with its parameter block (between the `# kerneljudge-suite:` markers) set to the
task's dtype, shape and input magnitude. Every operation computes in fp32 and returns the input's dtype,
as production kernels do; the judge's per-dtype tolerance (docs/tolerances.md) applies, and docs/tasks.md
gives the reason for each number and each edge case. `candidates/` holds one honest Triton candidate per
operation that serves every task of it.

- this module: the suite (`SUITE`, `BY_NAME`), its shape families, and `resolve`, a `builtin:` spec to its tasks;
- `ops/` (the operations) and `candidates/` (their honest candidates): text the judge reads, never imports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kerneljudge.errors import TaskError

HERE = Path(__file__).resolve().parent
PREFIX = "builtin:"
PARAMETERS = re.compile(r"# kerneljudge-suite: parameters\n.*?# kerneljudge-suite: end\n", re.S)
TORCH_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class SuiteTask:
    """One task of the suite: an operation at one dtype, shape and input magnitude."""

    op: str
    dtype: str  # fp32, fp16 or bf16
    shape: tuple[int, ...]
    case: str = ""  # the edge case it checks, if any (a word in the name)
    why: str = "a production-like width"
    scale: float = 1.0  # the inputs' standard deviation
    offset: float = 0.0  # the inputs' mean (LayerNorm only)
    strided: bool = False  # the input is a slice of a wider buffer (RMSNorm, softmax and LayerNorm)

    @property
    def name(self) -> str:
        return "_".join(part for part in (self.op, self.dtype, self.case) if part)

    @property
    def family(self) -> tuple[tuple[int, ...], ...]:
        """The shapes a kernel for this task must handle; the judge checks hidden ones drawn from them."""
        return FAMILIES[self.op]

    def text(self, shape: tuple[int, ...] | None = None, family: tuple[tuple[int, ...], ...] | None = None) -> str:
        """The task's source; `shape` and `family` override the public shape and the shape family (the CPU
        tests judge small ones)."""
        source = (HERE / "ops" / f"{self.op}.py").read_text()
        shapes = "".join(f"        {s!r},\n" for s in family or self.family)
        lines = [
            "# kerneljudge-suite: parameters",
            f"# built-in task {self.name}: {self.why}",
            f"DTYPE = torch.{TORCH_DTYPES[self.dtype]}",
            f"SHAPE = {tuple(shape or self.shape)!r}",
            f"SCALE = {self.scale!r}",
        ]
        if "OFFSET = " in source:
            lines.append(f"OFFSET = {self.offset!r}")
        lines += ["# The shapes a kernel must handle (hidden ones are checked)", "SHAPE_FAMILY = {"]
        lines.append(f'    "SHAPE": [\n{shapes}    ]\n}}')
        if "STRIDED = " in source:
            lines.append(f"STRIDED = {self.strided!r}")
        elif self.strided:
            raise TaskError(f"operation {self.op} has no strided variant")
        block = "\n".join(lines) + "\n# kerneljudge-suite: end\n"
        return PARAMETERS.sub(lambda _: block, source, count=1)

    def small_family(self) -> tuple[tuple[int, ...], ...]:
        """The family at shapes the CPU's Triton interpreter runs in seconds."""
        return SMALL_FAMILIES[self.op]

    def candidate_path(self) -> Path:
        return HERE / "candidates" / f"{self.op}.py"

    def small_shape(self) -> tuple[int, ...]:
        """A shape that keeps this task's edge case but runs in seconds on the CPU's Triton interpreter."""
        return SMALL_CASES.get(self.case, SMALL_SHAPES[self.op])


def _dtypes(op: str, shape: tuple[int, ...], scale: float = 1.0) -> list[SuiteTask]:
    return [SuiteTask(op, dtype, shape, scale=scale) for dtype in TORCH_DTYPES]


STRIDED_WHY = "the input is a slice of a fused projection: rows 3 x width apart, not contiguous"

# 2-D tasks are (rows, width). Edge cases are sized so that the reference still takes more than the ~10 us
# timer floor on an H200 (tasks lint checks it on a GPU): a 127-column tail over many rows, not a few.
SUITE: tuple[SuiteTask, ...] = (
    *_dtypes("rmsnorm", (4096, 4096)),
    SuiteTask("rmsnorm", "bf16", (16384, 2880), "w2880", "gpt-oss's hidden width, not a power of two"),
    SuiteTask("rmsnorm", "fp16", (262144, 127), "tail127", "127 columns: a tail under any power-of-two block"),
    SuiteTask("rmsnorm", "fp32", (1, 1048576), "onerow", "one row a million wide: one program walks it in blocks"),
    SuiteTask("rmsnorm", "bf16", (256, 65536), "long", "long rows, wider than one register block"),
    SuiteTask("rmsnorm", "fp32", (4096, 4096), "tiny", "inputs of 1e-3: the mean square meets eps", scale=1e-3),
    SuiteTask("rmsnorm", "bf16", (4096, 4096), "strided", STRIDED_WHY, strided=True),
    # Logits of std 4, as peaked as attention's: with std 1 every probability of a row 4096 wide is under 1e-2,
    # and zeros would pass KernelBench's atol of 1e-2 (tasks lint's near_zero).
    *_dtypes("softmax", (4096, 4096), scale=4.0),
    SuiteTask("softmax", "fp32", (8192, 1024), "large", "logits of ~1000: exp overflows without the max", scale=1e3),
    SuiteTask("softmax", "fp16", (262144, 127), "tail127", "127 columns, masked lanes must not count", scale=4.0),
    SuiteTask("softmax", "fp32", (256, 65536), "long", "long rows, wider than one register block", scale=4.0),
    SuiteTask("softmax", "fp16", (4096, 4096), "strided", STRIDED_WHY, scale=4.0, strided=True),
    *_dtypes("layernorm", (4096, 4096)),
    SuiteTask(
        "layernorm", "fp32", (4096, 4096), "offset", "mean 1000, std 1: sum-of-squares variance cancels", offset=1e3
    ),
    SuiteTask("layernorm", "fp16", (262144, 127), "tail127", "127 columns: masked lanes must not count"),
    SuiteTask("layernorm", "fp32", (4096, 4096), "strided", STRIDED_WHY, strided=True),
    *_dtypes("residual_rmsnorm", (4096, 4096)),
    SuiteTask("residual_rmsnorm", "bf16", (16384, 2880), "w2880", "gpt-oss's hidden width, two outputs"),
    *_dtypes("swiglu", (4096, 8192)),
    SuiteTask("swiglu", "fp16", (262144, 127), "tail127", "a flat length that no block divides"),
    *_dtypes("rope", (4, 2048, 32, 128)),
    SuiteTask("rope", "bf16", (4, 8192, 5, 96), "h5d96", "5 heads of 96: neither a power of two"),
    *_dtypes("bias_gelu", (4096, 4096)),
    SuiteTask("bias_gelu", "fp16", (262144, 127), "tail127", "the bias index wraps at 127"),
    *_dtypes("bias_relu", (4096, 4096)),
    SuiteTask("bias_relu", "bf16", (262144, 127), "tail127", "the bias index wraps at 127"),
)
BY_NAME = {task.name: task for task in SUITE}
OPS = tuple(dict.fromkeys(task.op for task in SUITE))

# Small shapes of each operation, for judging on the CPU (the Triton interpreter) in the tests.
SMALL_SHAPES = {
    "rmsnorm": (5, 300),
    "softmax": (5, 300),
    "layernorm": (5, 300),
    "residual_rmsnorm": (5, 300),
    "swiglu": (5, 300),
    "rope": (2, 6, 3, 48),
    "bias_gelu": (5, 300),
    "bias_relu": (5, 300),
}
SMALL_CASES = {
    "tail127": (5, 127),
    "w2880": (3, 2880),
    "onerow": (1, 9000),  # wider than one block: the looped path
    "long": (2, 9000),
    "h5d96": (2, 6, 5, 96),
}


# The shape family of each operation (SHAPE_FAMILY in its tasks; a judgment checks three hidden shapes drawn
# from it): one row and one column, tails under and just over the power-of-two blocks, production widths,
# the looped path past 8192; small, so the extra trials cost little. RoPE's are (batch, seq, heads, head_dim).
ROWS_FAMILY = (
    (1, 1),
    (1, 127),
    (3, 4097),
    (8, 128),
    (64, 2880),
    (257, 1000),
    (2, 8193),
    (1, 65536),
    (300, 4096),
    (16, 8192),
)
ROPE_FAMILY = ((1, 1, 1, 2), (1, 7, 3, 64), (2, 33, 5, 96), (1, 128, 8, 128), (3, 17, 2, 256), (1, 300, 1, 80))
FAMILIES = {op: ROPE_FAMILY if op == "rope" else ROWS_FAMILY for op in OPS}
# The same edges at sizes the CPU's Triton interpreter runs in seconds (the CPU tests).
SMALL_ROWS_FAMILY = ((1, 1), (1, 127), (3, 33), (2, 300), (2, 9000))
SMALL_FAMILIES = {op: ((1, 1, 1, 2), (1, 7, 3, 64), (2, 5, 5, 96)) if op == "rope" else SMALL_ROWS_FAMILY for op in OPS}


def resolve(spec: str) -> list[SuiteTask]:
    """`builtin:NAME`, `builtin:OP` (every task of an operation) or `builtin:all`; a TaskError names the choices."""
    key = spec.removeprefix(PREFIX)
    if key == "all":
        return list(SUITE)
    if key in BY_NAME:
        return [BY_NAME[key]]
    chosen = [task for task in SUITE if task.op == key]
    if not chosen:
        raise TaskError(
            f"no built-in task {key!r}: `kerneljudge tasks list` shows them (or give an operation: {', '.join(OPS)})"
        )
    return chosen


def is_builtin(spec: str | Path) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)
