"""KernelBench's own files, read and written as KernelBench lays them out: a run folder of generated samples as
batch items, a store's records as `eval_results.json` (hardened: correctness means verified), and the problems
of its Hugging Face parquet files as a checkout's folders (docs/batch.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kerneljudge.errors import UsageError
from kerneljudge.results.verdict import Record
from kerneljudge.runs.batch import BatchItem, ManifestError

NOT_LOADED_PHASES = ("preflight", "start", "build", "import", "init")  # failed before the model existed
KERNELBENCH_SAMPLE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


def read_kernelbench_run(run_dir: str | Path, problems_dir: str | Path) -> list[BatchItem]:
    """The items of a KernelBench run folder: every `level_L_problem_P_sample_S_kernel.py` in it, judged
    against `problems_dir/levelL/P_<Name>.py` (the `KernelBench/` folder of a KernelBench checkout).

    Sorted by level, problem and sample. A sample whose problem file is missing, or matches twice, raises
    ManifestError naming the sample; files of other names in the run folder are ignored.
    """
    run_dir, problems_dir = Path(run_dir), Path(problems_dir)
    for folder, what in ((run_dir, "run folder"), (problems_dir, "KernelBench problems folder")):
        if not folder.is_dir():
            raise ManifestError(f"no {what} at {folder}")
    samples = []
    for path in run_dir.iterdir():
        found = KERNELBENCH_SAMPLE.match(path.name)
        if found and path.is_file():
            samples.append((tuple(int(g) for g in found.groups()), path))
    if not samples:
        raise ManifestError(f"{run_dir} holds no level_L_problem_P_sample_S_kernel.py files")
    items = []
    for (level, problem, _), path in sorted(samples):
        matches = sorted((problems_dir / f"level{level}").glob(f"{problem}_*.py"))
        if len(matches) != 1:
            found_text = "none" if not matches else ", ".join(m.name for m in matches)
            raise ManifestError(
                f"{path.name}: expected one problem file {problems_dir}/level{level}/{problem}_*.py, found {found_text}"
            )
        items.append(BatchItem(matches[0], path, path.name))
    return items


def kernelbench_results(records: Sequence[Record], level: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """The records of KernelBench samples in the shape of KernelBench's `eval_results.json`, hardened.

    Keyed by problem id, a list of samples each: `sample_id`, `compiled` (the candidate loaded and ran),
    `correctness` (the record is *verified*: correct and honest, not merely correct), `runtime` (the
    candidate's mean ms, -1.0 when not timed, as KernelBench writes it), `runtime_stats` and `metadata`
    (kerneljudge's status, failure kind, finding codes, speedup and hardware). Only records whose candidate
    is named `level_L_problem_P_sample_S_kernel` count; records of several levels need `level`.
    """
    from kerneljudge.results.metrics import is_correct, speedup_of

    by_level: dict[int, list[tuple[int, int, Record]]] = {}
    for record in records:
        path = record.candidate.path
        found = KERNELBENCH_SAMPLE.match(Path(path).name if path else f"{record.candidate.name}.py")
        if found:
            lvl, problem, sample = (int(g) for g in found.groups())
            by_level.setdefault(lvl, []).append((problem, sample, record))
    if level is None and len(by_level) > 1:
        raise UsageError(f"the store holds KernelBench levels {sorted(by_level)}: pick one with --level")
    chosen = by_level.get(level if level is not None else next(iter(by_level), -1), [])
    results: dict[str, list[dict[str, Any]]] = {}
    for problem, sample, record in sorted(chosen, key=lambda entry: entry[:2]):
        t = record.timing
        stats = t.candidate if t is not None and t.measured else None
        loaded = record.failure is None or record.failure.phase not in NOT_LOADED_PHASES
        results.setdefault(str(problem), []).append(
            {
                "sample_id": sample,
                "compiled": bool(record.valid and loaded),
                "correctness": bool(record.verified),
                "runtime": round(stats.mean_ms, 6) if stats else -1.0,
                "runtime_stats": (
                    {
                        "mean": stats.mean_ms,
                        "median": stats.median_ms,
                        "min": stats.min_ms,
                        "max": stats.max_ms,
                        "num_trials": stats.count,
                    }
                    if stats
                    else {}
                ),
                "metadata": {
                    "kerneljudge_status": record.status,
                    "correct": is_correct(record),
                    "failure_kind": record.failure_kind,
                    "findings": sorted({f.code for f in record.findings if f.severity != "info"}),
                    "speedup": speedup_of(record),
                    "hardware": record.environment.get("gpu_name") or record.device,
                },
            }
        )
    return results


PARQUET_COLUMNS = ("code", "level", "name", "problem_id")


def problems_from_parquet(paths: Sequence[str | Path], folder: str | Path) -> Path:
    """Write the problems of KernelBench's Hugging Face parquet files as a checkout lays them out.

    Each row (columns code, level, name, problem_id) becomes `folder/levelL/P_<name>.py` (the name's
    ".py" kept once), so `read_kernelbench_run` reads a run against them as against a checkout. A file
    that exists with other contents is an error, never overwritten. Returns `folder`.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UsageError("reading parquet files needs pyarrow: pip install pyarrow") from None
    folder = Path(folder)
    for path in map(Path, paths):
        try:
            rows = pq.read_table(path, columns=list(PARQUET_COLUMNS)).to_pylist()
        except (OSError, ValueError, KeyError) as exc:  # pyarrow's errors derive from these
            why = (str(exc).splitlines() or [type(exc).__name__])[0]
            columns = ", ".join(PARQUET_COLUMNS)
            raise ManifestError(f"cannot read {path} as KernelBench parquet ({columns}): {why}") from None
        for number, row in enumerate(rows, start=1):
            if not isinstance(row["code"], str) or row["level"] is None or row["problem_id"] is None:
                raise ManifestError(f"{path} row {number}: code, level and problem_id are required")
            stem = re.sub(r"[^\w.-]", "_", str(row["name"] or "problem")).removesuffix(".py")
            name = stem if stem.startswith(f"{row['problem_id']}_") else f"{row['problem_id']}_{stem}"
            target = folder / f"level{int(row['level'])}" / f"{name}.py"
            if target.exists():
                if target.read_text() != row["code"]:
                    raise ManifestError(f"{path} row {number}: {target} exists with other contents")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(row["code"])
    return folder
