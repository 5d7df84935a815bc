"""The judge's configuration: one frozen object, validated once, unknown keys rejected.

Precedence: defaults, then a mapping (for instance a parsed config file), then
explicit keyword overrides (the CLI's flags).
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from kerneljudge.errors import ConfigError

MODES = ("off", "audit", "enforce")
POLICIES = ("strict", "practical")
DEVICES = ("auto", "cuda", "cpu")
# "auto": the interleaved paired timer in hardened modes, KernelBench's in `off` (kerneljudge.timing.basic)
TIMING_METHODS = ("auto", "interleaved", "kernelbench", "do_bench")
TIMING_REGIMES = ("cuda_graph", "busy_precursor", "back_to_back")
# paired: the reference is timed in every judgment, block by block with the candidate (the default);
# cached: a batch times each task's reference once per device, in an A/A judgment, and shares it.
TIMING_BASELINES = ("paired", "cached")
# The OS sandbox of every worker (docs/security.md): "auto" applies every layer the machine allows and
# records the rest as missing, "require" makes a missing layer a judge error, "off" applies none.
SANDBOX_MODES = ("auto", "require", "off")
# compute-sanitizer on one call of the candidate (docs/sanitizer.md): "auto" in the hardened modes for a
# candidate with custom CUDA (and for Triton kernels under strict, or as sanitizer_triton says), "always" for
# every candidate judged on CUDA in a hardened mode, "off" never. Never in `--mode off`.
SANITIZER_MODES = ("auto", "always", "off")


def native_mode(mode: str) -> bool:
    """Whether `mode` names KernelBench's own evaluation (`off`): `JudgeConfig.native` for code that holds only the
    mode's name (a stored record's config, a check that the judge hands its settings)."""
    return mode == "off"


def enforcing_mode(mode: str) -> bool:
    """Whether `mode` names the mode in which an error finding fails the candidate (`enforce`):
    `JudgeConfig.enforcing` for code that holds only the mode's name."""
    return mode == "enforce"


@dataclass(frozen=True)
class JudgeConfig:
    device: str = "auto"
    mode: str = "audit"
    policy: str = "strict"
    timeout_s: float = 180.0
    public_seed: int = 42
    public_trials: int = 5
    hidden_trials: int = 5
    shape_trials: int = 3  # hardened modes: trials at hidden shapes drawn from the task's shape family, if any
    timing: bool = True
    timing_blocks: int = 5
    timing_samples: int = 10
    timing_target_ms: float = 1.0
    timing_max_blocks: int = 40  # on CUDA the stopping rule may add blocks up to this many
    timing_target_rse: float = 0.005  # stop once the speedup's relative standard error is this small
    timing_budget_s: float = 60.0  # ... or once timing has taken this long (after timing_blocks)
    timing_l2_flush: bool = True  # overwrite a buffer of twice the L2 before every sample; False: warm cache
    timing_method: str = "auto"
    # On CUDA: how launch latency is kept out (or not) of the samples. A CUDA graph of each sample's calls
    # replayed behind a precursor reproduced best across fresh processes on an H200 (docs/timing.md); a side
    # that cannot be captured is timed again behind the busy precursor alone.
    timing_regime: str = "cuda_graph"
    timing_compile: bool = False  # also time the reference under torch.compile (a third side of every block)
    # One untimed call of each side before the gate is held to measure, so that the first call's compiles
    # (Triton's JIT in the fresh timing worker) run beside the other lanes, not while they are paused. Off by
    # default: the candidate then sees one more call before its calibration (docs/batch.md, the busy share).
    timing_warm: bool = False
    # Carry the candidate's compiler caches (Triton's, Inductor's, the driver's) from its checked worker to its
    # fresh timing worker, which then loads its kernels instead of compiling them again; safe because the timing
    # pool is made of fresh hidden draws (`HiddenPlan.timing_seeds`), never of inputs a checked worker saw
    # (sandbox/cache_carry.py, docs/batch.md). Off by default: the timing worker then finds what its checked
    # worker wrote in those folders, which was not measured on by default on the H200.
    timing_carry: bool = False
    # Make the fresh timing pair ready while correctness still runs: once the trials have passed, a thread greets
    # and loads it, stages its pool (fresh hidden draws, as always) and makes each side's first call, beside the
    # hidden shapes and the sanitizer, so that the timing stage is the samples and their checks
    # (judgment/stages/timing_ahead.py, docs/batch.md). Off by default: it adds each side's untimed first call, as
    # `timing_warm` does, and has two pairs on the device at once; not yet measured on the H200.
    timing_ahead: bool = False
    timing_baseline: str = "paired"  # or "cached" (a batch's option; docs/batch.md)
    sandbox: str = "auto"
    reread_delay_s: float = 0.02
    log_cap_bytes: int = 64 * 1024
    max_message_bytes: int = 64 * 1024**3  # each shared-memory channel's capacity (sparse: docs/process-model.md)
    sanitizer: str = "auto"
    # Under "auto", also a candidate whose only kernels are Triton's (memcheck and synccheck: sanitize.TRITON_TOOLS);
    # None: under strict, not under practical.
    sanitizer_triton: bool | None = None
    sanitizer_timeout_s: float = 600.0  # each sanitized worker's start, build and call (the tools run 10-100x slower)

    def __post_init__(self) -> None:
        for name, allowed in (
            ("device", DEVICES),
            ("mode", MODES),
            ("policy", POLICIES),
            ("timing_method", TIMING_METHODS),
            ("timing_regime", TIMING_REGIMES),
            ("timing_baseline", TIMING_BASELINES),
            ("sandbox", SANDBOX_MODES),
            ("sanitizer", SANITIZER_MODES),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
        if not self.native and (self.public_trials < 5 or self.hidden_trials < 5):
            raise ConfigError("hardened modes need at least 5 public and 5 hidden trials")
        if self.public_trials < 1:
            raise ConfigError("public_trials must be at least 1")
        if self.shape_trials < 0:
            raise ConfigError("shape_trials must be 0 or more")
        for name in ("timeout_s", "timing_target_ms", "timing_target_rse", "timing_budget_s", "sanitizer_timeout_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive")
        for name in ("timing_blocks", "timing_samples", "log_cap_bytes", "max_message_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.timing_max_blocks < self.timing_blocks:
            raise ConfigError("timing_max_blocks must be at least timing_blocks")
        if self.timing_ahead and self.timing_carry:
            raise ConfigError(
                "timing_ahead and timing_carry do not go together: the carry copies the checked worker's caches "
                "once it is gone, and ahead the timing worker loads while it still runs"
            )
        if self.timing_baseline == "cached" and self.resolved_timing_method() != "interleaved":
            raise ConfigError(
                f"cached baselines need the interleaved timer; this configuration times with "
                f"{self.resolved_timing_method()} (mode {self.mode})"
            )

    @classmethod
    def from_mapping(cls, values: dict[str, Any], **overrides: Any) -> JudgeConfig:
        known = {f.name for f in fields(cls)}
        for key in [*values, *overrides]:
            if key not in known:
                hint = difflib.get_close_matches(key, known, n=1)
                raise ConfigError(f"unknown setting {key!r}" + (f"; did you mean {hint[0]!r}?" if hint else ""))
        return cls(**{**values, **{k: v for k, v in overrides.items() if v is not None}})

    @property
    def native(self) -> bool:
        """KernelBench's own evaluation (`mode="off"`): none of the hardened path's checks, its own timer. The mode is
        decided here once; code below the judge asks this, never the mode's name."""
        return native_mode(self.mode)

    @property
    def enforcing(self) -> bool:
        """`mode="enforce"`: an error finding fails the candidate (in `audit` it is reported, the verdict kept)."""
        return enforcing_mode(self.mode)

    @property
    def strict(self) -> bool:
        """`policy="strict"`: what `practical` reports as info is a warning or an error (checks/catalog.py)."""
        return self.policy == "strict"

    def resolved_timing_method(self) -> str:
        if self.timing_method != "auto":
            return self.timing_method
        return "kernelbench" if self.native else "interleaved"

    def with_(self, **changes: Any) -> JudgeConfig:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
