"""The results store: keying, no duplicates under concurrent writers, exports, whole rows after a kill."""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import make_record
from kerneljudge.config import JudgeConfig
from kerneljudge.results.reward import REWARD_BINARY_V1, REWARD_V1
from kerneljudge.results.store import Store, StoreError, config_digest, environment_digest, key_of
from kerneljudge.results.verdict import Record


def test_key_survives_the_round_trip_and_names_config_and_machine(tmp_path):
    record = make_record(speedup=2.0)
    with Store(tmp_path / "s.db") as store:
        assert store.put(record)
        assert store.has(key_of(record))
        stored = store.get(key_of(record))
    assert stored == record and key_of(stored) == key_of(record)
    key = key_of(record)
    assert key.config_digest == config_digest(JudgeConfig(device="cpu", timing=False).to_dict())
    assert key.environment_digest == environment_digest(record.environment)
    other_config = make_record(config=JudgeConfig(device="cpu", timing=True).to_dict())
    other_gpu = make_record(environment={**record.environment, "gpu_name": "NVIDIA H200"})
    assert key_of(other_config).config_digest != key.config_digest
    assert key_of(other_gpu).environment_digest != key.environment_digest


def test_a_record_of_another_judge_version_does_not_answer_for_this_one(tmp_path):
    from kerneljudge import __version__

    old = make_record(environment={**make_record().environment, "kerneljudge": "0.1.0"})
    now = make_record(environment={**make_record().environment, "kerneljudge": __version__})
    assert __version__ != "0.1.0"
    with Store(tmp_path / "s.db") as store:
        store.put(old)
        assert not store.has(key_of(now))  # the batch judges it again
        assert store.put(now) and store.has(key_of(old))  # and keeps both records


def test_a_second_put_of_the_same_key_is_ignored(tmp_path):
    first = make_record()
    # Same task, candidate, configuration and machine; only the time, the flags and the verdict differ.
    again = make_record(
        status="FAIL",
        created_at="2025-02-02T00:00:00+00:00",
        environment={**first.environment, "flags": {"cudnn_benchmark": True}, "platform": "elsewhere"},
    )
    assert key_of(again) == key_of(first)
    with Store(tmp_path / "s.db") as store:
        assert store.put(first) is True
        assert store.put(again) is False
        assert len(store) == 1
        assert [r.status for r in store] == ["PASS"]
        assert store.put(make_record(candidate="c1")) is True
        assert len(store) == 2


def test_a_removed_record_is_judged_again_and_only_it_is_removed(tmp_path):
    """After a fix of the judge a rerun must judge again what it got wrong (the conformance benchmark's
    `--again`): the record goes, the key is free for the new one, and nothing else moves."""
    wrong, kept = make_record(status="FAIL"), make_record(candidate="c1")
    with Store(tmp_path / "s.db") as store:
        store.put(wrong), store.put(kept)
        assert store.remove(key_of(wrong)) is True and store.remove(key_of(wrong)) is False
        assert not store.has(key_of(wrong)) and store.has(key_of(kept)) and len(store) == 1
        assert store.put(make_record()) is True and [r.status for r in store].count("PASS") == 2


def test_the_store_refuses_another_schema_version_and_non_stores(tmp_path):
    path = tmp_path / "s.db"
    Store(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE store_schema SET version = 99")
    with pytest.raises(StoreError, match="schema version 99"):
        Store(path)
    junk = tmp_path / "junk.db"
    junk.write_text("not a database, just text " * 100)
    with pytest.raises(StoreError, match="cannot open the store"):
        Store(junk)
    with pytest.raises(StoreError, match="does not exist"):
        Store(tmp_path / "missing" / "s.db")


def test_the_store_is_wal_with_its_columns(tmp_path):
    with Store(tmp_path / "s.db") as store:
        store.put(make_record(status="FAIL"))
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        row = store.conn.execute(
            "SELECT task_name, candidate_name, status, verified, failure_kind, speedup, created_at FROM judgments"
        ).fetchone()
    assert row == ("task", "c0", "FAIL", 0, "tolerance", None, "2025-01-01T00:00:00+00:00")


def test_exports(tmp_path):
    records = [make_record("fast", speedup=2.0), make_record("wrong", status="FAIL"), make_record("bad", "ERROR")]
    with Store(tmp_path / "s.db") as store:
        for record in records:
            store.put(record)
        assert store.export_jsonl(tmp_path / "out.jsonl") == 3
        assert store.export_csv(tmp_path / "out.csv") == 3
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [Record.model_validate_json(line) for line in lines] == records
    with open(tmp_path / "out.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["candidate"] for r in rows] == ["fast", "wrong", "bad"]
    fast, wrong, bad = rows
    assert (fast["status"], fast["verified"], fast["speedup"]) == ("PASS", "True", "2.0")
    assert (fast["speedup_low"], fast["speedup_high"]) == ("1.5", "2.5")
    assert fast[f"reward:{REWARD_V1}"] == "1.0" and fast[f"reward:{REWARD_BINARY_V1}"] == "1.0"
    assert (wrong["failure_kind"], wrong["speedup"], wrong[f"reward:{REWARD_V1}"]) == ("tolerance", "", "-1.0")
    assert bad["valid"] == "False" and bad[f"reward:{REWARD_V1}"] == ""  # no reward: empty, never -1
    assert fast["task_sha256"] == records[0].task.sha256 and fast["task_path"] == "tasks/task.py"


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    sys.path[:0] = {tests!r}
    from test_store import make_record
    from kerneljudge.results.store import Store
    go = Path({go!r})
    records = [make_record(f"c{{i}}") for i in range({count})]
    while not go.exists():
        time.sleep(0.005)
    with Store({store!r}) as store:
        print(sum(store.put(r) for r in records))
    """
)


def test_two_concurrent_writers_never_duplicate(tmp_path):
    store, go, count = str(tmp_path / "s.db"), tmp_path / "go", 40
    script = WRITER.format(
        tests=[os.path.dirname(__file__), os.path.dirname(os.path.dirname(__file__))],
        go=str(go),
        count=count,
        store=store,
    )
    writers = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(1.0)  # both import, then both create the store and write the same keys at once
    go.touch()
    inserted = [int(w.communicate(timeout=60)[0]) for w in writers]
    assert all(w.returncode == 0 for w in writers)
    assert sum(inserted) == count  # every key was written by exactly one of them
    with Store(store) as s:
        assert len(s) == count
        assert sorted(r.candidate.name for r in s) == sorted(f"c{i}" for i in range(count))


KILLED_WRITER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = {tests!r}
    from test_store import make_record
    from kerneljudge.results.store import Store
    from kerneljudge.results.verdict import WorkerLog
    big = WorkerLog(stdout_tail="x" * 2_000_000, stdout_bytes=2_000_000, stderr_tail="", stderr_bytes=0,
                    truncated=True)
    with Store({store!r}) as store:
        i = 0
        while True:
            store.put(make_record(f"c{{i}}", logs={{"candidate": big}}))
            i += 1
    """
)


def test_a_killed_writer_leaves_whole_rows_only(tmp_path):
    store = str(tmp_path / "s.db")
    script = KILLED_WRITER.format(
        tests=[os.path.dirname(__file__), os.path.dirname(os.path.dirname(__file__))], store=store
    )
    writer = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        rows = 0
        while rows < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
            if os.path.exists(store):
                try:
                    with sqlite3.connect(store, timeout=5) as conn:
                        rows = conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
                except sqlite3.OperationalError:  # the table is not created yet
                    rows = 0
        time.sleep(0.013)  # land the kill at an arbitrary point of a write
        assert writer.poll() is None, "the writer stopped by itself"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    with Store(store) as s:
        assert s.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = s.conn.execute(
            "SELECT task_sha256, candidate_sha256, config_digest, environment_digest, record_json FROM judgments"
        ).fetchall()
        assert len(stored) >= 3
        for *key, text in stored:
            record = Record.model_validate_json(text)
            assert tuple(key) == tuple(key_of(record))
            assert len(record.logs["candidate"].stdout_tail) == 2_000_000
