"""Where a class's state lives: one small interface (`Store`) with an embedded SQLite default and a shared Redis
server for several replicas, chosen by one setting (`ATTENTION_LAB_CLASS_STORE`, README "A class session").

A class is a record (its teacher key's hash, when it ends) plus named tables of text fields: who joined, each
prompt's answers, the teacher's view, the locks, the reveals. Every write that must not race is one atomic operation
here (a transaction in SQLite, a Lua script in Redis): a class count or a student count checked and raised together,
an answer refused once its prompt is revealed. No Streamlit: core/serving/classroom.py builds the class on it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Protocol

STORE_SETTING = "ATTENTION_LAB_CLASS_STORE"  # unset or "sqlite": the embedded file; redis://host:port/db: shared
BUSY_TIMEOUT_MS = 10_000  # how long an SQLite writer waits for another before it gives up


class Store(Protocol):
    """The class store. Tables belong to a class and end with it; `put` is atomic."""

    def create(self, code: str, record: dict, expires_at: float, max_classes: int) -> bool:
        """Add class `code` unless it exists or `max_classes` unexpired classes do; True if added."""

    def record(self, code: str) -> dict | None:
        """Class `code`'s record with its "expires_at", or None if there is none (it may have expired)."""

    def put(self, code: str, table: str, field: str, value: str, *, max_fields: int = 0,
            unless: tuple[str, str] | None = None) -> bool:
        """Set `table`[`field`] = `value` of an unexpired class, atomically refusing (False) when the class is gone,
        when `field` is new and the table already holds `max_fields` (0: no bound), or when the field `unless`
        names (table, field) exists."""

    def table(self, code: str, table: str) -> dict[str, str]:
        """Every field of `table` of class `code` (empty if none)."""

    def end(self, code: str) -> None:
        """Remove class `code` and its tables."""


def user_dir() -> Path:
    """The folder the app keeps a user's files in: $ATTENTION_LAB_USER_DIR, else ~/.attention_lab."""
    return Path(os.environ.get("ATTENTION_LAB_USER_DIR") or Path.home() / ".attention_lab")


def open_store(setting: str | None = None) -> Store:
    """The store `setting` (default: $ATTENTION_LAB_CLASS_STORE) names: "redis://…" a shared Redis server, unset or
    "sqlite" the SQLite file classes.sqlite3 in the user folder, "sqlite:PATH" that file."""
    setting = (os.environ.get(STORE_SETTING, "") if setting is None else setting).strip()
    if setting.startswith(("redis://", "rediss://", "unix://")):
        return RedisStore(setting)
    if setting in ("", "sqlite"):
        return SQLiteStore(user_dir() / "classes.sqlite3")
    if setting.startswith("sqlite:"):
        return SQLiteStore(Path(setting.removeprefix("sqlite:")))
    raise ValueError(f"{STORE_SETTING} must be sqlite, sqlite:PATH or redis://host:port/db, not {setting!r}")


SCHEMA = """
CREATE TABLE IF NOT EXISTS classes (code TEXT PRIMARY KEY, record TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS fields (code TEXT NOT NULL, tbl TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL,
                                   PRIMARY KEY (code, tbl, field));
"""


class SQLiteStore:
    """Classes in one SQLite file: WAL (readers never wait for the writer), a busy timeout (writers queue rather than
    fail), one connection per thread, and every check-then-write in one IMMEDIATE transaction, so that several
    threads or processes sharing the file lose no answer and overrun no limit. Survives a server restart."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._db().executescript(SCHEMA)

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a committed answer survives a process crash
            self._local.db = db
        return db

    class _Transaction:
        def __init__(self, db: sqlite3.Connection):
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")  # takes the write lock now: no other writer between check and write
            return self.db

        def __exit__(self, kind, error, trace) -> None:
            self.db.execute("ROLLBACK" if kind else "COMMIT")

    def _transaction(self) -> _Transaction:
        return self._Transaction(self._db())

    def create(self, code: str, record: dict, expires_at: float, max_classes: int) -> bool:
        now = time.time()
        with self._transaction() as db:
            expired = [row[0] for row in db.execute("SELECT code FROM classes WHERE expires_at <= ?", (now,))]
            db.executemany("DELETE FROM fields WHERE code = ?", [(c,) for c in expired])
            db.execute("DELETE FROM classes WHERE expires_at <= ?", (now,))
            count = db.execute("SELECT COUNT(*) FROM classes").fetchone()[0]
            if count >= max_classes or db.execute("SELECT 1 FROM classes WHERE code = ?", (code,)).fetchone():
                return False
            db.execute("INSERT INTO classes VALUES (?, ?, ?)", (code, json.dumps(record), expires_at))
            return True

    def record(self, code: str) -> dict | None:
        row = self._db().execute("SELECT record, expires_at FROM classes WHERE code = ? AND expires_at > ?",
                                 (code, time.time())).fetchone()
        return None if row is None else {**json.loads(row[0]), "expires_at": row[1]}

    def put(self, code: str, table: str, field: str, value: str, *, max_fields: int = 0,
            unless: tuple[str, str] | None = None) -> bool:
        with self._transaction() as db:
            if not db.execute("SELECT 1 FROM classes WHERE code = ? AND expires_at > ?",
                              (code, time.time())).fetchone():
                return False
            if unless and db.execute("SELECT 1 FROM fields WHERE code = ? AND tbl = ? AND field = ?",
                                     (code, *unless)).fetchone():
                return False
            exists = db.execute("SELECT 1 FROM fields WHERE code = ? AND tbl = ? AND field = ?",
                                (code, table, field)).fetchone()
            held = db.execute("SELECT COUNT(*) FROM fields WHERE code = ? AND tbl = ?", (code, table)).fetchone()[0]
            if max_fields and not exists and held >= max_fields:
                return False
            db.execute("INSERT OR REPLACE INTO fields VALUES (?, ?, ?, ?)", (code, table, field, value))
            return True

    def table(self, code: str, table: str) -> dict[str, str]:
        rows = self._db().execute("SELECT field, value FROM fields WHERE code = ? AND tbl = ?", (code, table))
        return dict(rows.fetchall())

    def end(self, code: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM fields WHERE code = ?", (code,))
            db.execute("DELETE FROM classes WHERE code = ?", (code,))


# Redis: the record is the hash al:class:CODE, a table the hash al:class:CODE:TABLE, both expiring with the class;
# the sorted set al:classes scores each class by when it ends, so that live classes are counted without a scan.
CREATE_SCRIPT = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) or redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[4])
redis.call('EXPIREAT', KEYS[1], math.ceil(tonumber(ARGV[2])))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
return 1
"""
PUT_SCRIPT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if KEYS[3] ~= '' and redis.call('HEXISTS', KEYS[3], ARGV[4]) == 1 then return 0 end
local limit = tonumber(ARGV[3])
if limit > 0 and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 and redis.call('HLEN', KEYS[2]) >= limit then
  return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('EXPIREAT', KEYS[2], redis.call('EXPIRETIME', KEYS[1]))
return 1
"""


class RedisStore:
    """Classes in a Redis server that every replica shares (`ATTENTION_LAB_CLASS_STORE=redis://host:6379/0`): each
    check-then-write runs as one Lua script, which Redis runs alone, and keys expire with their class."""

    PREFIX = "al:class:"

    def __init__(self, url: str):
        import redis  # only a deployment that names a Redis server needs the client

        self.url = url
        self.redis = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5)
        self._create = self.redis.register_script(CREATE_SCRIPT)
        self._put = self.redis.register_script(PUT_SCRIPT)

    def _key(self, code: str, table: str = "") -> str:
        return f"{self.PREFIX}{code}" + (f":{table}" if table else "")

    def create(self, code: str, record: dict, expires_at: float, max_classes: int) -> bool:
        stored = json.dumps({**record, "expires_at": expires_at})
        return bool(self._create(keys=[self._key(code), "al:classes"],
                                 args=[time.time(), expires_at, max_classes, stored, code]))

    def record(self, code: str) -> dict | None:
        stored = self.redis.get(self._key(code))
        if stored is None:
            return None
        record = json.loads(stored)
        return record if record["expires_at"] > time.time() else None

    def put(self, code: str, table: str, field: str, value: str, *, max_fields: int = 0,
            unless: tuple[str, str] | None = None) -> bool:
        guard = self._key(code, unless[0]) if unless else ""
        return bool(self._put(keys=[self._key(code), self._key(code, table), guard],
                              args=[field, value, max_fields, unless[1] if unless else ""]))

    def table(self, code: str, table: str) -> dict[str, str]:
        return self.redis.hgetall(self._key(code, table))

    def end(self, code: str) -> None:
        tables = list(self.redis.scan_iter(match=f"{self._key(code)}:*", count=500))
        self.redis.delete(self._key(code), *tables)
        self.redis.zrem("al:classes", code)
