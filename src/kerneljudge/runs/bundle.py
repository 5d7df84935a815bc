"""Evidence bundles: a store's records with the exact sources they judged, checkable by anyone.

`kerneljudge export --bundle DIR` writes, from a results store:

    records.jsonl        every record, as the store holds it
    sources/SHA256.py    each judged text (task or candidate), named by its sha256: the text the record's hash is of
    originals/SHA256.py  a file as it was given, where the judged text was made from it (a model's response whose
                         fenced block was judged, a GPU MODE submission wrapped as ModelNew, a problem folder's files
                         composed into a task)
    logs/N-ROLE.stdout   the worker logs' tails each record holds (N: the record's line in records.jsonl)
    index.json           per record: task, candidate, status, their hashes and files
    SHA256SUMS           every other file's sha256, as `sha256sum -c SHA256SUMS` reads it

`kerneljudge verify DIR` checks every hash in SHA256SUMS, that no file is unlisted, that each record parses as a
record of this schema, and that each record's task and candidate hashes name a source whose text has that hash.
A reviewer needs no store, no GPU and no trust in the machine that judged: only the bundle.

The sources are read again at export time from the paths the records name, judged text rebuilt the way the
judge builds it (tasks/load.py, candidate.py, tasks/gpumode.py); a source changed or gone since its judgment is
an error that names the record, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kerneljudge import __version__
from kerneljudge.errors import KernelJudgeError
from kerneljudge.results.verdict import Record
from kerneljudge.sandbox.tree import Bounds, Tally, shown, walk
from kerneljudge.sources.task import MAX_SOURCE_BYTES, read_bounded

# A bundle handed to `verify` is another's folder, read as hostile data: walked without recursion or links,
# within bounds far above what `write_bundle` makes, and every file read with a cap.
VERIFY_BOUNDS = Bounds(depth=8, entries=200_000, name_bytes=64 * 2**20)
MAX_LISTING_BYTES = 1 << 30  # records.jsonl and SHA256SUMS

SUMS = "SHA256SUMS"


class BundleError(KernelJudgeError):
    """A bundle cannot be written: a record's source is gone or changed since it was judged."""


@dataclass
class Sources:
    """Judged texts and original files by sha256, gathered before anything is written."""

    judged: dict[str, str] = field(default_factory=dict)
    originals: dict[str, bytes] = field(default_factory=dict)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _judged_texts(record: Record) -> tuple[str, str, list[bytes]]:
    """The task's and the candidate's judged text, rebuilt from the record's paths, and the original files."""
    from kerneljudge.sources.candidate import load_candidate, reference_as_candidate
    from kerneljudge.tasks import gpumode
    from kerneljudge.tasks.load import load_task

    if record.task.path is None:
        raise BundleError(f"record {record.task.name}/{record.candidate.name}: its task names no path")
    task = load_task(record.task.path)
    originals = []
    if gpumode.is_problem(record.task.path):
        folder = Path(record.task.path)
        originals += [p.read_bytes() for p in sorted(folder.glob("*.py")) + sorted(folder.glob("*.yml"))]
    # The candidate as given (a file, its judged text rebuilt), else the task's own reference as a candidate (the
    # conformance sweep's); the one whose hash is the record's, or the first, for gather() to report.
    made: list[tuple[str, bytes | None]] = []
    path = record.candidate.path
    if path is not None and Path(path).is_file():
        made.append((gpumode.adapt_candidate(task, load_candidate(path)).text, Path(path).read_bytes()))
    made.append((reference_as_candidate(task).text, None))
    candidate_text, given = next(((t, g) for t, g in made if _sha256(t.encode()) == record.candidate.sha256), made[0])
    if given is not None and given != candidate_text.encode():
        originals.append(given)
    return task.text, candidate_text, originals


def gather(records: Iterable[Record]) -> Sources:
    """Every record's sources, each checked against the hashes the record holds."""
    sources = Sources()
    for record in records:
        where = f"record {record.task.name}/{record.candidate.name}"
        try:
            task_text, candidate_text, originals = _judged_texts(record)
        except (KernelJudgeError, OSError) as exc:
            raise BundleError(f"{where}: its sources cannot be read again ({exc})") from None
        for role, text, expected in (
            ("task", task_text, record.task.sha256),
            ("candidate", candidate_text, record.candidate.sha256),
        ):
            if _sha256(text.encode()) != expected:
                path = getattr(record, role).path
                what = "changed since it was judged (sha256 differs)" if path and Path(path).exists() else "is gone"
                raise BundleError(f"{where}: the {role} at {path} {what}")
            sources.judged[expected] = text
        for data in originals:
            sources.originals[_sha256(data)] = data
    return sources


def _write(root: Path, relative: str, data: bytes, sums: dict[str, str]) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    sums[relative] = _sha256(data)


def write_bundle(records: list[Record], out: Path) -> int:
    """Write the bundle of `records` into the new or empty folder `out`; returns how many files it holds."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out} is not an empty folder: a bundle is written into a new one")
    if not out.parent.is_dir():
        raise BundleError(f"cannot write {out}: directory {out.parent} does not exist")
    sources = gather(records)  # every check before the first byte is written
    out.mkdir(exist_ok=True)
    sums: dict[str, str] = {}
    _write(out, "records.jsonl", "".join(r.model_dump_json() + "\n" for r in records).encode(), sums)
    for sha, text in sorted(sources.judged.items()):
        _write(out, f"sources/{sha}.py", text.encode(), sums)
    for sha, data in sorted(sources.originals.items()):
        _write(out, f"originals/{sha}.py", data, sums)
    index = []
    for n, record in enumerate(records, 1):
        logs = []
        for role, log in sorted(record.logs.items()):
            for stream, tail in (("stdout", log.stdout_tail), ("stderr", log.stderr_tail)):
                if tail:
                    _write(out, f"logs/{n}-{role}.{stream}", tail.encode(), sums)
                    logs.append(f"logs/{n}-{role}.{stream}")
        index.append(
            {
                "line": n,
                "task": record.task.name,
                "candidate": record.candidate.name,
                "status": record.status,
                "verified": record.verified,
                "task_source": f"sources/{record.task.sha256}.py",
                "candidate_source": f"sources/{record.candidate.sha256}.py",
                "logs": logs,
            }
        )
    manifest = {"kerneljudge_version": __version__, "records": index}
    _write(out, "index.json", (json.dumps(manifest, indent=2) + "\n").encode(), sums)
    (out / SUMS).write_text("".join(f"{sha}  {name}\n" for name, sha in sorted(sums.items())))
    return len(sums) + 1


def verify_bundle(root: Path) -> tuple[int, list[str]]:
    """Check a bundle: (how many records it holds, every problem found); no problems means it verifies."""
    root = Path(root).resolve()  # the walk below follows no link, the folder named by one included
    sums_path = root / SUMS
    if not sums_path.is_file():
        return 0, [f"{root} holds no {SUMS}: not a kerneljudge bundle"]
    problems: list[str] = []
    listed: dict[str, str] = {}
    try:
        sums_text = _read(sums_path, MAX_LISTING_BYTES).decode("utf-8", "replace")
    except BundleError as exc:
        return 0, [str(exc)]
    for number, line in enumerate(sums_text.splitlines(), 1):
        sha, sep, name = line.partition("  ")
        if not sep or len(sha) != 64 or not name or name.startswith("/") or ".." in Path(name).parts:
            problems.append(f"{SUMS} line {number} is malformed")
            continue
        listed[name] = sha
    for name, sha in listed.items():
        path = root / name
        if not path.is_symlink() and not path.exists():
            problems.append(f"{name}: listed but missing")
            continue
        try:
            if _sha256(_read(path, MAX_LISTING_BYTES)) != sha:
                problems.append(f"{name}: its sha256 differs from {SUMS}")
        except BundleError as exc:
            problems.append(str(exc))
    tally = Tally()
    for entry in walk(root, VERIFY_BOUNDS, tally):
        relative = shown(entry.rel)
        if not stat.S_ISDIR(entry.info.st_mode) and relative != SUMS and relative not in listed:
            problems.append(f"{relative}: not listed in {SUMS}")
    if tally.bound is not None:
        problems.append(f"{root}: more than a bundle holds ({tally.describe()}); not read further")
    records_path = root / "records.jsonl"
    if "records.jsonl" not in listed or not records_path.is_file():
        return 0, [*problems, "records.jsonl: missing"]
    try:
        records_text = _read(records_path, MAX_LISTING_BYTES).decode("utf-8", "replace")
    except BundleError as exc:
        return 0, [*problems, str(exc)]
    count = 0
    for number, line in enumerate(records_text.splitlines(), 1):
        try:
            record = Record.model_validate_json(line)
        except ValueError as exc:
            problems.append(f"records.jsonl line {number}: not a record ({str(exc).splitlines()[0]})")
            continue
        count += 1
        for role in ("task", "candidate"):
            sha = getattr(record, role).sha256
            source = root / "sources" / f"{sha}.py"
            if not source.is_file():
                problems.append(f"records.jsonl line {number}: no source for its {role} ({sha[:12]})")
                continue
            try:
                if _sha256(_read(source, MAX_SOURCE_BYTES)) != sha:
                    problems.append(f"records.jsonl line {number}: its {role} source does not hash to the record's")
            except BundleError as exc:
                problems.append(f"records.jsonl line {number}: {exc}")
    return count, problems


def _read(path: Path, max_bytes: int) -> bytes:
    """A bundle's file: a regular file within `max_bytes`, or BundleError with a one-line reason."""
    return read_bounded(path, "the bundle's file", BundleError, max_bytes)
