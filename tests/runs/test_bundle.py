"""Evidence bundles: `kerneljudge export --bundle DIR` and `kerneljudge verify DIR` (src/kerneljudge/runs/bundle.py)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from helpers import EXAMPLES, make_record
from kerneljudge.cli import main
from kerneljudge.results.store import Store
from kerneljudge.results.verdict import Identity, WorkerLog
from kerneljudge.sandbox.tree import remove_tree
from kerneljudge.sources.candidate import load_candidate

SOFTMAX = EXAMPLES / "softmax"
RESPONSE = """Here is my kernel.

```python
{code}
```

It fuses the whole row.
"""


def _identity(path: Path, text: str | None = None) -> Identity:
    text = path.read_text() if text is None else text
    return Identity(sha256=hashlib.sha256(text.encode()).hexdigest(), name=path.stem, path=str(path))


def _store(tmp_path: Path) -> Path:
    """A store of two records judged from real files: a plain candidate and a model's response with a fenced block."""
    reference = SOFTMAX / "reference.py"
    candidate = SOFTMAX / "candidate_triton.py"
    response = tmp_path / "response.md"
    code = candidate.read_text() + "# as the model wrote it\n"  # another judged text: another store key
    response.write_text(RESPONSE.format(code=code))
    log = WorkerLog(stdout_tail="PROBE hello\n", stdout_bytes=12, stderr_tail="", stderr_bytes=0, truncated=False)
    records = [make_record(task=_identity(reference), logs={"candidate": log}), make_record(status="FAIL")]
    records[1].task = _identity(reference)
    records[0].candidate = _identity(candidate)
    records[1].candidate = _identity(response, load_candidate(response).text)  # as the judge hashes it
    db = tmp_path / "results.db"
    with Store(db) as store:
        for record in records:
            store.put(record)
    return db


def test_an_exported_bundle_verifies_and_holds_the_judged_text_and_the_response_it_came_from(tmp_path, capsys):
    db = _store(tmp_path)
    bundle = tmp_path / "bundle"
    assert main(["export", "--store", str(db), "--bundle", str(bundle)]) == 0
    candidate_text = (SOFTMAX / "candidate_triton.py").read_text()
    sha = hashlib.sha256(candidate_text.encode()).hexdigest()
    assert (bundle / "sources" / f"{sha}.py").read_text() == candidate_text
    response_sha = hashlib.sha256((tmp_path / "response.md").read_bytes()).hexdigest()
    assert (bundle / "originals" / f"{response_sha}.py").is_file()  # the response as it was given
    assert (bundle / "logs" / "1-candidate.stdout").read_text() == "PROBE hello\n"
    capsys.readouterr()
    assert main(["verify", str(bundle)]) == 0
    assert "verified, 2 records" in capsys.readouterr().out
    # coreutils reads the same file: a reviewer needs nothing of ours to check the hashes
    checked = subprocess.run(["sha256sum", "--quiet", "-c", "SHA256SUMS"], cwd=bundle, capture_output=True)
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize(
    "tamper",
    ["source byte", "record byte", "extra file", "deleted source"],
)
def test_a_bundle_with_one_changed_byte_or_file_does_not_verify(tmp_path, capsys, tamper):
    bundle = tmp_path / "bundle"
    assert main(["export", "--store", str(_store(tmp_path)), "--bundle", str(bundle)]) == 0
    source = next((bundle / "sources").iterdir())
    if tamper == "source byte":
        data = bytearray(source.read_bytes())
        data[len(data) // 2] ^= 1
        source.write_bytes(bytes(data))
    elif tamper == "record byte":
        records = bundle / "records.jsonl"
        records.write_text(records.read_text().replace('"status":"FAIL"', '"status":"PASS"', 1))
    elif tamper == "extra file":
        (bundle / "logs" / "9-candidate.stdout").write_text("planted\n")
    else:
        source.unlink()
    capsys.readouterr()
    assert main(["verify", str(bundle)]) == 2
    out = capsys.readouterr().out
    assert "NOT verified" in out


def test_a_bundle_whose_sums_and_sources_were_both_rewritten_still_fails_on_the_records_hash(tmp_path, capsys):
    """Rewriting a source and its line in SHA256SUMS is caught: the record's own hash names the judged text."""
    bundle = tmp_path / "bundle"
    assert main(["export", "--store", str(_store(tmp_path)), "--bundle", str(bundle)]) == 0
    source = next((bundle / "sources").iterdir())
    source.write_text(source.read_text() + "\n# changed after judging\n")
    sums = bundle / "SHA256SUMS"
    new = hashlib.sha256(source.read_bytes()).hexdigest()
    sums.write_text(
        "".join(
            f"{new}  {line.split('  ', 1)[1]}\n" if line.endswith(source.name) else line + "\n"
            for line in sums.read_text().splitlines()
        )
    )
    capsys.readouterr()
    assert main(["verify", str(bundle)]) == 2
    assert "does not hash to the record's" in capsys.readouterr().out


def test_a_source_changed_since_its_judgment_is_a_one_line_error_and_nothing_is_written(tmp_path, capsys):
    db = _store(tmp_path)
    (tmp_path / "response.md").write_text(RESPONSE.format(code="class ModelNew: pass"))
    bundle = tmp_path / "bundle"
    assert main(["export", "--store", str(db), "--bundle", str(bundle)]) == 1
    err = capsys.readouterr().err
    assert "changed since it was judged" in err and "Traceback" not in err
    assert not bundle.exists()


def test_verify_of_a_folder_that_is_not_a_bundle_says_so(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 2
    assert "not a kerneljudge bundle" in capsys.readouterr().out


def test_a_hostile_bundle_is_refused_line_by_line_without_a_crash_or_a_hang(tmp_path, capsys):
    """A bundle is another's folder: a FIFO or a device in place of a listed file, a folder chain deeper than
    any recursion limit and a name of non-UTF-8 bytes are each a problem line, never a traceback or a wait."""
    import os

    db = _store(tmp_path)
    bundle = tmp_path / "bundle"
    assert main(["export", "--store", str(db), "--bundle", str(bundle)]) == 0
    sums = (bundle / "SHA256SUMS").read_text().splitlines()
    fifo_name = next(line.split("  ", 1)[1] for line in sums if line.endswith("1-candidate.stdout"))
    (bundle / fifo_name).unlink()
    os.mkfifo(bundle / fifo_name)
    zero_name = next(line.split("  ", 1)[1] for line in sums if line.endswith("index.json"))
    (bundle / zero_name).unlink()
    os.symlink("/dev/zero", bundle / zero_name)
    try:
        fd = os.open(bundle, os.O_RDONLY)
        for _ in range(1200):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(fd)
        (bundle / os.fsdecode(b"\xff\n")).write_bytes(b"x")
        capsys.readouterr()
        assert main(["verify", str(bundle)]) == 2
        out = capsys.readouterr().out
        assert "it is a FIFO" in out and "it is a character device" in out
        assert "\\xff\\x0a: not listed" in out and "depth past 8" in out
    finally:  # pytest's own clean-up of old temporary folders recurses, and a chain 1,200 deep would break it
        assert remove_tree(bundle) == []
