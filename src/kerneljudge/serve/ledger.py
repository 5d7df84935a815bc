"""The server's memory: records in a results store (kerneljudge/store.py), and two small tables beside them.

Records go into the same SQLite file, under the same key, as `kerneljudge batch` writes them, so `export`,
`report` and `verify` read a server's store as they read a batch's. Two tables of the server's own sit in
that file; the store's tables and its schema version are left as they are:

- `serve_records`: record id -> store key. A record id is the first 32 hex digits of the sha256 of the store
  key's four fields joined by "/" (`record_id`); `content` is the key the server predicted before judging,
  which differs from the record's own only when the judgment saw another environment than this machine's.
- `serve_requests`: request id -> the predicted key's digest it was first sent with, so that a retry finds its
  judgment and a request id reused for another task or candidate is refused.

A SQLite connection belongs to the thread that opened it, and the server reads and writes from its request
threads and from the backend's lanes: each operation opens the store and closes it again (half a millisecond,
against judgments of seconds), so no connection is ever shared.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kerneljudge.store import Store, StoreKey, key_of
from kerneljudge.verdict import Record

TABLES = """
CREATE TABLE IF NOT EXISTS serve_records (
    record_id TEXT PRIMARY KEY,
    task_sha256 TEXT NOT NULL,
    candidate_sha256 TEXT NOT NULL,
    config_digest TEXT NOT NULL,
    environment_digest TEXT NOT NULL,
    content TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS serve_records_content ON serve_records (content);
CREATE TABLE IF NOT EXISTS serve_requests (
    request_id TEXT PRIMARY KEY,
    content TEXT NOT NULL
);
"""


def record_id(key: StoreKey) -> str:
    """The record id the server answers with for the record stored under `key`."""
    return hashlib.sha256("/".join(key).encode()).hexdigest()[:32]


def content_digest(key: StoreKey) -> str:
    """The digest a predicted key is remembered by (task, candidate, configuration, environment)."""
    return hashlib.sha256("/".join(key).encode()).hexdigest()


class Ledger:
    """The store at `path` and the server's tables in it, usable from any thread."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with self.open() as store:  # here, so that a bad path fails the server's start
            for statement in filter(str.strip, TABLES.split(";")):
                store.conn.execute(statement)

    def open(self) -> Store:
        """A connection of the calling thread's own; use it as a context manager."""
        return Store(self.path)

    def claim_request(self, request_id: str, content: str) -> str:
        """Remember that `request_id` asks for `content`; returns the content it was first sent with."""
        with self.open() as store:
            store.conn.execute("INSERT OR IGNORE INTO serve_requests VALUES (?, ?)", (request_id, content))
            row = store.conn.execute("SELECT content FROM serve_requests WHERE request_id = ?", (request_id,))
            return str(row.fetchone()[0])

    def requested(self, request_id: str) -> str | None:
        """The content `request_id` was first sent with, or None for a new request id."""
        with self.open() as store:
            row = store.conn.execute("SELECT content FROM serve_requests WHERE request_id = ?", (request_id,))
            found = row.fetchone()
        return None if found is None else str(found[0])

    def lookup(self, predicted: StoreKey) -> Record | None:
        """The stored record of a judgment asked for under `predicted`, wherever it was stored."""
        with self.open() as store:
            record = store.get(predicted)
            if record is not None:
                remember(store, predicted, predicted, replace=False)
                return record
            rows = store.conn.execute(
                "SELECT task_sha256, candidate_sha256, config_digest, environment_digest FROM serve_records "
                "WHERE content = ? ORDER BY rowid DESC",
                (content_digest(predicted),),
            ).fetchall()
            for row in rows:
                record = store.get(StoreKey(*row))
                if record is not None:
                    return record
        return None

    def keep(self, record: Record, predicted: StoreKey) -> str:
        """Store `record` (replacing an invalid one under its key: the judge's own fault is judged again) and
        return its record id."""
        key = key_of(record)
        with self.open() as store:
            if not store.put(record):
                stored = store.get(key)
                if stored is not None and not stored.valid and record.valid:
                    store.remove(key)
                    store.put(record)
            remember(store, key, predicted)
        return record_id(key)

    def record(self, rid: str) -> Record | None:
        """The record of a record id, or None."""
        with self.open() as store:
            row = store.conn.execute(
                "SELECT task_sha256, candidate_sha256, config_digest, environment_digest FROM serve_records "
                "WHERE record_id = ?",
                (rid,),
            ).fetchone()
            return None if row is None else store.get(StoreKey(*row))


def remember(store: Store, key: StoreKey, predicted: StoreKey, replace: bool = True) -> None:
    """Map the record id of `key` to it, and to the key predicted for its judgment."""
    store.conn.execute(
        f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO serve_records VALUES (?, ?, ?, ?, ?, ?)",
        (record_id(key), *key, content_digest(predicted)),
    )
