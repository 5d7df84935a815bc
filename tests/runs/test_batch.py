"""Batch judging: manifests, the store it fills, resume after a SIGKILL, and the batch/export commands."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import CANDIDATES, TASKS, make_record
from kerneljudge.cli.batch import BATCH_COMMANDS, add_batch_commands
from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.judgment.env import fingerprint
from kerneljudge.results.store import Store, config_digest, environment_digest, key_of
from kerneljudge.runs.backends.machine import machine_environment, probe_hello
from kerneljudge.runs.batch import BatchCounts, BatchItem, ManifestError, read_manifest, run_batch
from kerneljudge.runs.kernelbench_runs import kernelbench_results, problems_from_parquet, read_kernelbench_run

CONFIG = JudgeConfig(device="cpu", policy="practical", timeout_s=60.0, timing=False)
FLAGS = ["--device", "cpu", "--policy", "practical", "--timeout", "60", "--no-timing"]  # the same configuration


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kerneljudge")
    add_batch_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def run_command(argv: list[str]) -> int:
    args = parse(argv)
    return BATCH_COMMANDS[args.command](args)


def write_manifest(folder, tiny_task, candidates: list[str]):
    """A manifest in `folder` whose paths are relative to it, as a KernelBench-style layout would have them."""
    (folder / "tasks").mkdir()
    (folder / "candidates").mkdir(exist_ok=True)
    shutil.copy(tiny_task, folder / "tasks" / "bias_relu.py")
    for name in candidates:
        shutil.copy(CANDIDATES / name, folder / "candidates" / name)
    lines = [json.dumps({"task": "tasks/bias_relu.py", "candidate": f"candidates/{name}"}) for name in candidates]
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


BATCH_PROCESS = textwrap.dedent(
    """
    import sys
    sys.path[:0] = {tests!r}
    from test_batch import run_command
    sys.exit(run_command(sys.argv[1:]))
    """
)
# The honest candidate comes again last: a repeated line is judged once.
NAMES = ["honest_torch.py", "wrong_values.py", "raise_in_forward.py", "honest_torch.py"]


def stored_rows(path) -> int:
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


@dataclass
class Resumed:
    manifest: Path
    store: Path
    rows_at_kill: int
    counts: BatchCounts


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> Resumed:
    """`kerneljudge batch` in a process SIGKILLed once the store has a row, then the same batch again.

    One fixture for the tests below: each judgment takes seconds on the CPU and CI has a time limit.
    """
    folder = tmp_path_factory.mktemp("batch")
    manifest = write_manifest(folder, TASKS / "tiny_bias_relu.py", NAMES)
    store = folder / "results.db"
    script = BATCH_PROCESS.format(tests=[os.path.dirname(__file__), os.path.dirname(os.path.dirname(__file__))])
    argv = [sys.executable, "-c", script, "batch", str(manifest), "--store", str(store), *FLAGS]
    batch = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while stored_rows(store) < 1 and batch.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert batch.poll() is None, f"the batch ended before it was killed: {batch.stderr.read().decode()[-2000:]}"
    finally:
        batch.send_signal(signal.SIGKILL)
        batch.wait()
    rows_at_kill = stored_rows(store)
    counts = run_batch(read_manifest(manifest), CONFIG, store, progress=True)
    return Resumed(manifest, store, rows_at_kill, counts)


def test_a_killed_batch_resumes_where_it_stopped(resumed):
    assert resumed.rows_at_kill == 1  # killed while judging the second item
    # The stored item and the repeated line are skipped; the one in flight at the kill is judged again.
    assert resumed.counts.to_dict() == {
        "judged": 2,
        "skipped": 2,
        "passed": 0,
        "failed": 2,
        "suspicious": 0,
        "unsupported": 0,
        "errors": 0,
        "interrupted": 0,
        "not_started": 0,
    }


def test_the_store_holds_one_record_per_item_under_its_precomputed_key(resumed):
    with Store(resumed.store) as s:
        records = {r.candidate.name: r for r in s}
        per_pair = s.conn.execute("SELECT COUNT(*) FROM judgments GROUP BY task_sha256, candidate_sha256").fetchall()
        assert per_pair == [(1,), (1,), (1,)]
        assert {name: r.failure_kind for name, r in records.items()} == {
            "honest_torch": None,
            "wrong_values": "tolerance",
            "raise_in_forward": "runtime_error",
        }
        machine = environment_digest(machine_environment(CONFIG))
        for record in records.values():
            assert s.has(key_of(record))
            assert key_of(record).config_digest == config_digest(CONFIG.to_dict())
            assert key_of(record).environment_digest == machine


def test_a_finished_batch_is_all_skipped(resumed, capsys):
    assert run_command(["batch", str(resumed.manifest), "--store", str(resumed.store), *FLAGS]) == 0
    assert "judged 0, skipped 4" in capsys.readouterr().out
    assert stored_rows(resumed.store) == 3


def test_a_stage_log_where_no_folder_is_refused_in_one_line_before_any_judgment(resumed, tmp_path):
    log = tmp_path / "missing" / "stages.log"
    with pytest.raises(UsageError, match="cannot write .*stages.log: directory .* does not exist"):
        run_command(["batch", str(resumed.manifest), "--store", str(resumed.store), "--log", str(log), *FLAGS])
    assert stored_rows(resumed.store) == 3


def test_export_writes_every_record(resumed, tmp_path):
    jsonl, table = tmp_path / "out.jsonl", tmp_path / "out.csv"
    assert run_command(["export", "--store", str(resumed.store), "--jsonl", str(jsonl), "--csv", str(table)]) == 0
    assert len(jsonl.read_text().splitlines()) == 3
    with open(table, newline="") as f:
        rows = {row["candidate"]: row for row in csv.DictReader(f)}
    assert rows["honest_torch"]["status"] == "PASS" and rows["honest_torch"]["verified"] == "True"
    assert rows["raise_in_forward"]["failure_kind"] == "runtime_error"
    assert rows["wrong_values"]["reward:kerneljudge.reward.binary.v1"] == "0.0"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "line 2: not JSON"),
        ('["tasks/t.py", "c.py"]', "line 2: expected an object"),
        ('{"task": "tasks/t.py"}', "line 2: 'candidate' must be a path"),
        ('{"task": "tasks/t.py", "candidate": "c.py", "sample": 3}', "line 2: unknown key(s) 'sample'"),
    ],
)
def test_a_bad_manifest_line_is_named(tmp_path, line, message):
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"task": "tasks/t.py", "candidate": "c.py"}) + "\n" + line + "\n\n")
    with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        read_manifest(manifest)
    assert "\n" not in str(caught.value)


def test_a_missing_file_stops_the_batch_before_anything_is_lost(tmp_path, tiny_task):
    store = tmp_path / "results.db"
    with Store(store) as s:
        s.put(make_record("earlier"))
    manifest = write_manifest(tmp_path, tiny_task, ["honest_torch.py"])
    manifest.write_text(manifest.read_text() + json.dumps({"task": "tasks/bias_relu.py", "candidate": "gone.py"}))
    with pytest.raises(ManifestError, match=r"manifest.jsonl line 2: cannot read candidate .*gone.py"):
        run_batch(read_manifest(manifest), CONFIG, store, progress=False)
    with Store(store) as s:
        assert [r.candidate.name for r in s] == ["earlier"]
    items = [BatchItem(tiny_task, tmp_path / "missing.py")]
    with pytest.raises(ManifestError, match="item 1: cannot read candidate"):
        run_batch(items, CONFIG, store, progress=False)


def test_export_needs_a_store_and_a_target(tmp_path):
    with pytest.raises(UsageError, match="--jsonl PATH, --csv PATH"):
        run_command(["export", "--store", str(tmp_path / "s.db")])
    with pytest.raises(UsageError, match="no store at"):
        run_command(["export", "--store", str(tmp_path / "s.db"), "--csv", str(tmp_path / "o.csv")])


def test_the_probe_worker_agrees_with_the_cpu_shortcut():
    """Off the CPU the environment comes from a probe worker; on a machine without CUDA it must match."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible: the auto device's workers see its name")
    hello = probe_hello(JudgeConfig(device="auto"))
    assert environment_digest(fingerprint(hello)) == environment_digest(machine_environment(CONFIG))


@pytest.mark.gpu
def test_a_cuda_batch_stores_under_the_probed_key(tmp_path, tiny_task):
    manifest = write_manifest(tmp_path, tiny_task, ["honest_torch.py"])
    config = CONFIG.with_(device="cuda")
    counts = run_batch(read_manifest(manifest), config, tmp_path / "results.db", progress=False)
    assert counts.judged == 1
    with Store(tmp_path / "results.db") as s:
        (record,) = list(s)
    assert record.environment["gpu_name"]
    assert key_of(record).environment_digest == environment_digest(machine_environment(config))
    assert run_batch(read_manifest(manifest), config, tmp_path / "results.db", progress=False).skipped == 1


def kernelbench_layout(root: Path, tiny_task: Path) -> tuple[Path, Path]:
    """A KernelBench checkout's problems folder and a run folder of generated samples."""
    problems, run = root / "KernelBench", root / "runs" / "my_run"
    for relative in ("level1/19_ReLU.py", "level1/1_Square_matmul.py", "level2/1_Conv_ReLU.py"):
        (problems / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tiny_task, problems / relative)
    run.mkdir(parents=True)
    for name in ("level_2_problem_1_sample_0", "level_1_problem_19_sample_1", "level_1_problem_19_sample_0"):
        shutil.copy(CANDIDATES / "honest_torch.py", run / f"{name}_kernel.py")
    (run / "level_1_problem_19_sample_0_prompt.txt").write_text("not a kernel")
    (run / "eval_results.json").write_text("{}")
    return problems, run


def test_a_kernelbench_run_folder_is_read_as_items_in_problem_order(tmp_path, tiny_task):
    problems, run = kernelbench_layout(tmp_path, tiny_task)
    items = read_kernelbench_run(run, problems)
    assert [(i.task.relative_to(problems).as_posix(), i.candidate.name) for i in items] == [
        ("level1/19_ReLU.py", "level_1_problem_19_sample_0_kernel.py"),
        ("level1/19_ReLU.py", "level_1_problem_19_sample_1_kernel.py"),
        ("level2/1_Conv_ReLU.py", "level_2_problem_1_sample_0_kernel.py"),
    ]
    shutil.copy(CANDIDATES / "honest_torch.py", run / "level_3_problem_7_sample_0_kernel.py")
    with pytest.raises(ManifestError, match=r"level_3_problem_7_sample_0_kernel.py: expected one problem file .*none"):
        read_kernelbench_run(run, problems)
    with pytest.raises(ManifestError, match="no run folder"):
        read_kernelbench_run(tmp_path / "nowhere", problems)


def test_batch_judges_a_kernelbench_run_into_the_store(tmp_path, tiny_task):
    problems, run = kernelbench_layout(tmp_path, tiny_task)
    for extra in ("level_1_problem_19_sample_1_kernel.py", "level_2_problem_1_sample_0_kernel.py"):
        (run / extra).unlink()  # one judgment keeps the test short
    store = tmp_path / "results.db"
    argv = ["batch", "--kernelbench-run", str(run), "--kernelbench-problems", str(problems), "--store", str(store)]
    assert run_command([*argv, *FLAGS]) == 0
    with Store(store) as s:
        [record] = list(s)
    assert record.status == "PASS" and record.task.name == "19_ReLU"
    with pytest.raises(UsageError, match="either a MANIFEST or --kernelbench-run"):
        run_command(["batch", "--store", str(store), *FLAGS])
    with pytest.raises(UsageError, match="needs its problems: --kernelbench-problems DIR"):
        run_command(["batch", "--kernelbench-run", str(run), "--store", str(store), *FLAGS])


def test_kernelbench_samples_export_as_eval_results_with_correctness_meaning_verified(tmp_path):
    def sample(level, problem, index, **changes):
        name = f"level_{level}_problem_{problem}_sample_{index}_kernel"
        record = make_record(name, **changes)
        record.candidate.path = f"runs/r/{name}.py"
        return record

    records = [
        sample(1, 19, 1, speedup=1.5),
        sample(1, 19, 0, status="SUSPICIOUS", speedup=3.0, verified=False),
        sample(1, 3, 0, status="FAIL"),
        make_record("not_a_kernelbench_sample", speedup=2.0),
    ]
    records[1].correctness.passed = True
    results = kernelbench_results(records)
    assert list(results) == ["3", "19"] and [s["sample_id"] for s in results["19"]] == [0, 1]
    flagged, honest = results["19"]
    assert flagged["correctness"] is False and flagged["metadata"]["correct"] is True
    assert honest["correctness"] is True and honest["runtime"] == 1.0 and honest["runtime_stats"]["num_trials"] == 3
    assert results["3"][0]["correctness"] is False and results["3"][0]["runtime"] == -1.0
    store = tmp_path / "results.db"
    with Store(store) as s:
        for record in [*records, sample(2, 1, 0, speedup=1.1)]:
            s.put(record)
    target = tmp_path / "verified_eval_results.json"
    with pytest.raises(UsageError, match=r"levels \[1, 2\]: pick one with --level"):
        run_command(["export", "--store", str(store), "--kernelbench-json", str(target)])
    assert run_command(["export", "--store", str(store), "--kernelbench-json", str(target), "--level", "2"]) == 0
    assert json.loads(target.read_text()) == kernelbench_results([sample(2, 1, 0, speedup=1.1)])


def test_problems_come_from_the_datasets_parquet_files_as_a_checkout_lays_them_out(tmp_path, tiny_task):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    code = tiny_task.read_text()
    rows = {"code": [code, code], "level": [1, 2], "name": ["19_ReLU.py", "Conv ReLU"], "problem_id": [19, 1]}
    parquet = tmp_path / "level_1.parquet"
    pq.write_table(pa.table(rows), parquet)
    problems = problems_from_parquet([parquet], tmp_path / "problems")
    assert sorted(p.relative_to(problems).as_posix() for p in problems.rglob("*.py")) == [
        "level1/19_ReLU.py",
        "level2/1_Conv_ReLU.py",
    ]
    assert problems_from_parquet([parquet], problems) == problems  # the same rows again: nothing changes
    (problems / "level1" / "19_ReLU.py").write_text("# edited")
    with pytest.raises(ManifestError, match="row 1: .*19_ReLU.py exists with other contents"):
        problems_from_parquet([parquet], problems)
    pq.write_table(pa.table({"code": [code]}), tmp_path / "bad.parquet")
    with pytest.raises(ManifestError, match="cannot read .*bad.parquet as KernelBench parquet"):
        problems_from_parquet([tmp_path / "bad.parquet"], problems)
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(CANDIDATES / "honest_torch.py", run / "level_2_problem_1_sample_0_kernel.py")
    store = tmp_path / "results.db"
    argv = ["batch", "--kernelbench-run", str(run), "--kernelbench-parquet", str(parquet), "--store", str(store)]
    assert run_command([*argv, *FLAGS]) == 0
    with Store(store) as s:
        assert [r.task.name for r in s] == ["1_Conv_ReLU"]
