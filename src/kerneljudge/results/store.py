"""The results store: one SQLite file of verdict records, one row per judgment key (docs/batch.md).

The key is what makes two judgments the same judgment: the task's and the
candidate's content hashes, the digest of the judge's configuration and the
digest of the machine that judged. Rows are written whole in one transaction
and never replaced, so several writer processes can share a store and a process
killed at any moment leaves either the whole record or nothing.
"""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from kerneljudge.errors import KernelJudgeError
from kerneljudge.results.verdict import Record

STORE_SCHEMA_VERSION = 1
# The fingerprint fields that define the machine a figure came from; timestamps and flags are left out.
ENVIRONMENT_KEY_FIELDS = ("gpu_name", "driver", "torch", "triton", "python", "kerneljudge")
BUSY_TIMEOUT_S = 60.0  # a writer waits this long for another's transaction (each lasts milliseconds)

SCHEMA = """
CREATE TABLE IF NOT EXISTS store_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS judgments (
    task_sha256 TEXT NOT NULL,
    candidate_sha256 TEXT NOT NULL,
    config_digest TEXT NOT NULL,
    environment_digest TEXT NOT NULL,
    task_name TEXT NOT NULL,
    candidate_name TEXT NOT NULL,
    status TEXT NOT NULL,
    verified INTEGER NOT NULL,
    failure_kind TEXT,
    speedup REAL,
    created_at TEXT NOT NULL,
    record_json TEXT NOT NULL,
    PRIMARY KEY (task_sha256, candidate_sha256, config_digest, environment_digest)
);
"""


class StoreError(KernelJudgeError):
    """The store file cannot be used: not a kerneljudge store, another schema version, unreadable."""


class StoreKey(NamedTuple):
    task_sha256: str
    candidate_sha256: str
    config_digest: str
    environment_digest: str


def canonical_digest(value: Any) -> str:
    """sha256 of canonical JSON (sorted keys, no whitespace)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def config_digest(config: dict[str, Any]) -> str:
    """Digest of `JudgeConfig.to_dict()` (a record's `config`)."""
    return canonical_digest(config)


def environment_digest(environment: dict[str, Any]) -> str:
    """Digest of the machine-defining fields of an environment fingerprint (a record's `environment`)."""
    return canonical_digest({name: environment.get(name) for name in ENVIRONMENT_KEY_FIELDS})


def key_of(record: Record) -> StoreKey:
    """The key a record is stored under, derived from the record alone."""
    return StoreKey(
        record.task.sha256,
        record.candidate.sha256,
        config_digest(record.config),
        environment_digest(record.environment),
    )


class Store:
    """A results store at `path`, created on first use; use as a context manager or call `close()`."""

    def __init__(self, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise StoreError(f"cannot open the store {self.path}: directory {self.path.parent} does not exist")
        try:
            self.conn = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store {self.path}: {exc}") from None
        try:
            # WAL: readers never block the writer and a commit is one append to the log.
            self.conn.execute("PRAGMA journal_mode=WAL")
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StoreError(f"cannot open the store {self.path}: {exc}") from None
        except BaseException:
            self.conn.close()
            raise

    def _init_schema(self) -> None:
        with self._transaction():
            for statement in filter(str.strip, SCHEMA.split(";")):
                self.conn.execute(statement)
            versions = [row[0] for row in self.conn.execute("SELECT version FROM store_schema")]
            if not versions:
                self.conn.execute("INSERT INTO store_schema (version) VALUES (?)", (STORE_SCHEMA_VERSION,))
            elif versions != [STORE_SCHEMA_VERSION]:
                raise StoreError(
                    f"the store {self.path} has schema version {versions[0]}; this kerneljudge reads version "
                    f"{STORE_SCHEMA_VERSION}: export it with the kerneljudge that wrote it, or use a new store"
                )

    def _transaction(self) -> _Transaction:
        return _Transaction(self.conn)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ reading

    def has(self, key: StoreKey) -> bool:
        row = self.conn.execute(
            "SELECT 1 FROM judgments WHERE task_sha256=? AND candidate_sha256=? AND config_digest=? "
            "AND environment_digest=?",
            tuple(key),
        ).fetchone()
        return row is not None

    def get(self, key: StoreKey) -> Record | None:
        row = self.conn.execute(
            "SELECT record_json FROM judgments WHERE task_sha256=? AND candidate_sha256=? AND config_digest=? "
            "AND environment_digest=?",
            tuple(key),
        ).fetchone()
        return None if row is None else Record.model_validate_json(row[0])

    def __len__(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])

    def __iter__(self) -> Iterator[Record]:
        """Every record, in the order they were written."""
        for (text,) in self.conn.execute("SELECT record_json FROM judgments ORDER BY rowid"):
            yield Record.model_validate_json(text)

    def reward_specs(self) -> list[str]:
        """Every reward spec id that some stored record carries."""
        rows = self.conn.execute(
            "SELECT DISTINCT json_extract(reward.value, '$.spec') FROM judgments, json_each(record_json, '$.rewards') "
            "AS reward"
        )
        return sorted(spec for (spec,) in rows if spec is not None)

    # ------------------------------------------------------------ writing

    def put(self, record: Record) -> bool:
        """Store a complete record under `key_of(record)`; False (and nothing written) when the key is present."""
        key = key_of(record)
        with self._transaction():
            cursor = self.conn.execute(
                "INSERT OR IGNORE INTO judgments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *key,
                    record.task.name,
                    record.candidate.name,
                    record.status,
                    int(record.verified),
                    record.failure_kind,
                    record.timing.speedup,
                    record.created_at,
                    record.model_dump_json(),
                ),
            )
        return cursor.rowcount == 1

    def remove(self, key: StoreKey) -> bool:
        """Remove the record stored under `key`, so that a rerun judges it again (after a fix of the judge); False
        when none is stored there."""
        with self._transaction():
            cursor = self.conn.execute(
                "DELETE FROM judgments WHERE task_sha256 = ? AND candidate_sha256 = ? AND config_digest = ? "
                "AND environment_digest = ?",
                tuple(key),
            )
        return cursor.rowcount == 1

    # ------------------------------------------------------------ exports

    def export_jsonl(self, path: str | Path) -> int:
        """Write every record as one JSON line; returns how many."""
        count = 0
        with open(path, "w") as out:
            for record in self:
                out.write(record.model_dump_json() + "\n")
                count += 1
        return count

    def export_csv(self, path: str | Path) -> int:
        """Write a flat table, one row per record, one `reward:SPEC` column per reward spec; returns how many."""
        specs = self.reward_specs()
        header = [
            "task",
            "task_path",
            "task_sha256",
            "candidate",
            "candidate_path",
            "candidate_sha256",
            "config_digest",
            "environment_digest",
            "device",
            "status",
            "verified",
            "valid",
            "failure_kind",
            "speedup",
            "speedup_low",
            "speedup_high",
            "interval_level",
            "duration_s",
            "created_at",
            *(f"reward:{spec}" for spec in specs),
        ]
        count = 0
        with open(path, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            for record in self:
                key = key_of(record)
                interval = record.timing.speedup_interval or [None, None]
                rewards = {r.spec: r.value for r in record.rewards}
                row = [
                    record.task.name,
                    record.task.path,
                    key.task_sha256,
                    record.candidate.name,
                    record.candidate.path,
                    key.candidate_sha256,
                    key.config_digest,
                    key.environment_digest,
                    record.device,
                    record.status,
                    record.verified,
                    record.valid,
                    record.failure_kind,
                    record.timing.speedup,
                    interval[0],
                    interval[1],
                    record.timing.interval_level,
                    record.duration_s,
                    record.created_at,
                    *(rewards.get(spec) for spec in specs),
                ]
                writer.writerow(["" if value is None else value for value in row])
                count += 1
        return count


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT: the write lock is taken up front, so a busy store waits instead of failing."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")
