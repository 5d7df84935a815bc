"""The server's memory: records in a results store (kerneljudge/results/store.py), and two small tables beside them.

Records go into the same SQLite file, under the same key, as `kerneljudge batch` writes them, so `export`,
`report` and `verify` read a server's store as they read a batch's. Two tables of the server's own sit in
that file; the store's tables and its schema version are left as they are:

- `serve_records`: record id -> store key. A record id is the first 32 hex digits of the sha256 of the store
  key's four fields joined by "/" (`record_id`); `content` is the key the server predicted before judging,
  which differs from the record's own only when the judgment saw another environment than this machine's.
- `serve_requests`: request id -> the predicted key's digest it was first sent with, so that a retry finds its
  judgment and a request id reused for another task or candidate is refused.

A SQLite connection belongs to the thread that opened it, and the server reads and writes from its request
threads and from the backend's lanes: each admission, each stored record and each record read is a
`LedgerSession`, one connection opened and closed again (half a millisecond, against judgments of seconds),
so no connection is ever shared.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kerneljudge.results.store import Store, StoreKey, key_of
from kerneljudge.results.verdict import Record

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
    """The store at `path` and the server's tables in it; `session()` for one thread's work on them."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        with self.session() as session:  # here, so that a bad path fails the server's start
            for statement in filter(str.strip, TABLES.split(";")):
                session.store.conn.execute(statement)

    def session(self) -> LedgerSession:
        """A connection of the calling thread's own; use it as a context manager."""
        return LedgerSession(Store(self.path))


class LedgerSession:
    """The store and the server's tables over one connection, in the thread that opened it."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conn = store.conn

    def __enter__(self) -> LedgerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()

    def requested(self, request_id: str) -> str | None:
        """The content `request_id` was first sent with, or None for a new request id."""
        row = self.conn.execute("SELECT content FROM serve_requests WHERE request_id = ?", (request_id,)).fetchone()
        return None if row is None else str(row[0])

    def claim_request(self, request_id: str, content: str) -> None:
        """Remember that `request_id` asks for `content`, unless it was sent before."""
        self.conn.execute("INSERT OR IGNORE INTO serve_requests VALUES (?, ?)", (request_id, content))

    def lookup(self, predicted: StoreKey) -> Record | None:
        """The stored record of a judgment asked for under `predicted`, wherever it was stored."""
        record = self.store.get(predicted)
        if record is not None:
            self._remember(predicted, predicted, replace=False)
            return record
        rows = self.conn.execute(
            "SELECT task_sha256, candidate_sha256, config_digest, environment_digest FROM serve_records "
            "WHERE content = ? ORDER BY rowid DESC",
            (content_digest(predicted),),
        ).fetchall()
        return next((found for row in rows if (found := self.store.get(StoreKey(*row))) is not None), None)

    def keep(self, record: Record, predicted: StoreKey) -> str:
        """Store `record` (replacing an invalid one under its key: the judge's own fault is judged again) and
        return its record id."""
        key = key_of(record)
        if not self.store.put(record):
            stored = self.store.get(key)
            if stored is not None and not stored.valid and record.valid:
                self.store.remove(key)
                self.store.put(record)
        self._remember(key, predicted)
        return record_id(key)

    def record(self, rid: str) -> Record | None:
        """The record of a record id, or None."""
        row = self.conn.execute(
            "SELECT task_sha256, candidate_sha256, config_digest, environment_digest FROM serve_records "
            "WHERE record_id = ?",
            (rid,),
        ).fetchone()
        return None if row is None else self.store.get(StoreKey(*row))

    def _remember(self, key: StoreKey, predicted: StoreKey, replace: bool = True) -> None:
        """Map the record id of `key` to it, and to the key predicted for its judgment."""
        self.conn.execute(
            f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO serve_records VALUES (?, ?, ?, ?, ?, ?)",
            (record_id(key), *key, content_digest(predicted)),
        )
