"""The terminal view of a record: a verdict table rendered with rich."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kerneljudge.config import native_mode
from kerneljudge.results.explain import CPU_CAVEAT
from kerneljudge.results.verdict import Record

STATUS_STYLE = {
    "PASS": "bold green",
    "FAIL": "bold red",
    "SUSPICIOUS": "bold magenta",
    "UNSUPPORTED": "bold yellow",
    "ERROR": "bold red",
}


def _fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1e3:.2f} us" if value < 1 else f"{value:.3f} ms"


def device_line(record: Record) -> str:
    env = record.environment
    if record.device == "cuda":
        return f"CUDA on {env.get('gpu_name')} (torch {env.get('torch')}, Triton {env.get('triton')})"
    asked = (record.config or {}).get("device", "auto")
    if record.device == "cpu":
        why = "CPU requested" if asked == "cpu" else "no CUDA device" if not env.get("cuda_available") else "CPU"
        triton = f"Triton {env.get('triton')} interpreter" if env.get("triton") else "no Triton"
        return f"CPU ({why}; {triton}; timings are CPU timings, not GPU speedups)"
    if asked == "cuda":
        return "no usable device (CUDA was required and none is visible)"
    return f"none: the judgment ended before any worker started (device asked: {asked})"


def family_text(record: Record) -> str:
    """The task's shape family in words, the same whatever the verdict: derived from which integers, declared,
    none (the hidden-shapes stage ran and found none), or not reached (the judgment ended before that stage,
    where a family the task does not declare is derived)."""
    family = record.correctness.shape_family
    if family is not None:
        if family.get("derived"):
            return "shape family derived from " + ", ".join(family.get("names", []))
        return f"shape family declared by the task ({family.get('size', '?')} shape(s))"
    if "hidden_shapes" in record.capabilities:
        if record.config.get("shape_trials") == 0:
            return "shape family not sought (shape_trials = 0)"
        return "no shape family: none declared and none derived from the task's integers"
    return "shape family not reached (the judgment ended before the hidden shapes)"


def verdict_table(record: Record) -> Table:
    table = Table(
        title=f"kerneljudge {record.kerneljudge_version}: {record.task.name} / {record.candidate.name}",
        show_header=False,
        title_justify="left",
    )
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    add = table.add_row

    def row(what: str, value: str) -> None:
        add(escape(what), escape(value))

    add("status", f"[{STATUS_STYLE[record.status]}]{record.status}[/]" + ("  (verified)" if record.verified else ""))
    row("device", device_line(record))
    row("mode / policy", f"{record.config['mode']} / {record.config['policy']}")
    if record.failure:
        row("failure", f"{record.failure.kind} in {record.failure.phase}: {record.failure.summary}")
    c = record.correctness
    if c.checked:
        passed = sum(t.passed for t in c.trials)
        words = {"public": "public", "hidden": "hidden", "shape": "at hidden shapes"}
        kinds = ", ".join(
            f"{sum(t.kind == k for t in c.trials)} {word}"
            for k, word in words.items()
            if any(t.kind == k for t in c.trials)
        )
        if not native_mode(record.config.get("mode")):
            kinds += "; " + family_text(record)
        row(
            "correctness",
            f"{passed}/{len(c.trials)} trials passed ({kinds}); "
            + (f"oracle {c.oracle_dtype}" if c.oracle_dtype else "KernelBench allclose"),
        )
        if c.worst:
            ratio = c.worst.get("error_ratio")
            row(
                "largest error",
                f"max abs {c.worst.get('max_abs_error', 0):.3g}"
                + (
                    f", reference's own {c.worst['reference_max_abs_error']:.3g}"
                    if "reference_max_abs_error" in c.worst
                    else ""
                )
                + (f", RMSE ratio to reference {ratio:.3g}" if isinstance(ratio, float) else ""),
            )
        if c.replay:
            row(
                "replay",
                "bitwise identical"
                if c.replay["bitwise_identical"]
                else "; ".join(t["summary"] for t in c.replay["trials"]),
            )
    t = record.timing
    if t.measured and t.candidate and t.reference:
        row(
            "candidate time",
            f"{_fmt_ms(t.candidate.median_ms)} median (cv {t.candidate.cv:.1%}, n={t.candidate.count})",
        )
        row(
            "reference time",
            f"{_fmt_ms(t.reference.median_ms)} median (cv {t.reference.cv:.1%}, n={t.reference.count})",
        )
        interval = f" [{t.speedup_interval[0]:.3g}, {t.speedup_interval[1]:.3g}]" if t.speedup_interval else ""
        cpu = f"; {CPU_CAVEAT}" if record.device == "cpu" else ""
        row(
            "speedup",
            (f"{t.speedup:.3g}x{interval}" if t.speedup else "-") + f"  ({t.method}; {t.stop_reason}{cpu})",
        )
        if t.compiled is not None and t.speedup_vs_compile:
            row("vs torch.compile", f"{t.speedup_vs_compile:.3g}x (compiled reference {_fmt_ms(t.compiled.median_ms)})")
        elif t.compile_error:
            row("vs torch.compile", f"not measured: {t.compile_error}")
        row("regime", t.regime or "-")
        if t.clocks and t.clocks.get("throttled_blocks"):
            row("clocks", f"throttled in blocks {t.clocks['throttled_blocks']} ({', '.join(t.clocks['reasons'])})")
    else:
        row("timing", t.reason or "not measured")
    for reward in record.rewards:
        value = "none" if reward.value is None else f"{reward.value:+.3f}"
        row(f"reward {reward.spec}", f"{value} ({reward.reason})")
    for finding in record.findings:
        row(f"finding {finding.code}", f"[{finding.severity}] {finding.summary}")
    missing = [
        f"{name} ({cap.detail})"
        for name, cap in record.capabilities.items()
        if cap.required and cap.status != "available"
    ]
    if missing:
        row("missing", "; ".join(missing))
    return table


def print_verdict(record: Record, console: Console | None = None) -> None:
    (console or Console()).print(verdict_table(record))
