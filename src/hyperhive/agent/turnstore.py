"""One agent's turn records on its host: a SQLite file (WAL) with an FTS5 index, and
the step texts too long for the index as files beside it.

The directory is the host's (``agents/<name>/turns``, 0700, never bound into
the sandbox): the agent cannot forge or erase its own history. One writer, the
agent's :class:`~.turnrecorder.TurnRecorder`, on the host's event loop, one
short transaction per step (a crash keeps every step before it); readers
(the coordinator's asks) and the pruner open their own connections on worker
threads. A step's text is kept whole in the index up to :data:`INDEX_CHARS`;
past that, the index holds its start and ``blobs/<turn>/<seq>.txt`` the whole.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from hyperhive.protocol.turns import TurnHit, TurnRecord, TurnStep, TurnSummary
from hyperhive.safefs import atomic_write_beneath

__all__ = [
    "DB_NAME",
    "INDEX_CHARS",
    "Pruned",
    "TurnStore",
    "list_turns",
    "prune",
    "search_turns",
    "show_turn",
]

DB_NAME = "turns.db"
INDEX_CHARS = 16 << 10  # a step's text kept in the index (and searched) up to this
BUSY_MS = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS turns(
  id TEXT PRIMARY KEY, agent TEXT NOT NULL, kind TEXT NOT NULL,
  started REAL NOT NULL, ended REAL, wake TEXT NOT NULL, wake_reason TEXT NOT NULL,
  prompt TEXT NOT NULL, outcome TEXT, cost_usd REAL, input_tokens INTEGER,
  output_tokens INTEGER, model_calls INTEGER NOT NULL DEFAULT 0, session_id TEXT,
  model TEXT, bytes INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS turns_started ON turns(started);
CREATE TABLE IF NOT EXISTS steps(
  turn TEXT NOT NULL, seq INTEGER NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL,
  call_id TEXT, name TEXT, parent TEXT, is_error INTEGER NOT NULL DEFAULT 0,
  body TEXT NOT NULL, size INTEGER NOT NULL, cut INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(turn, seq));
CREATE VIRTUAL TABLE IF NOT EXISTS steps_fts USING fts5(body, content='steps',
  content_rowid='rowid');
CREATE TRIGGER IF NOT EXISTS steps_ai AFTER INSERT ON steps BEGIN
  INSERT INTO steps_fts(rowid, body) VALUES (new.rowid, new.body); END;
CREATE TRIGGER IF NOT EXISTS steps_ad AFTER DELETE ON steps BEGIN
  INSERT INTO steps_fts(steps_fts, rowid, body) VALUES ('delete', old.rowid, old.body); END;
"""

_SUMMARY_COLS = (
    "id, agent, kind, started, ended, wake_reason, outcome, cost_usd, input_tokens, "
    "output_tokens, model_calls, session_id, model, bytes"
)


def _connect(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # WAL: a process crash loses no commit
    return conn


@contextmanager
def _tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _blob(root: Path, turn: str, seq: int) -> Path:
    return root / "blobs" / turn / f"{seq}.txt"


class TurnStore:
    """The writer of one agent's records (see module); opened by its recorder."""

    def __init__(self, root: Path, agent: str) -> None:
        self.root = root
        self.agent = agent
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if root.stat().st_uid != os.geteuid():
            # Not the host's: an agent could have made it to write its own history.
            raise PermissionError(f"{root} is not owned by the agent host; move it aside")
        root.chmod(0o700)
        self._conn = _connect(root / DB_NAME)
        self._conn.executescript(_SCHEMA)
        # A turn left open by an earlier activation ended with its host (a crash, a kill).
        self._conn.execute("UPDATE turns SET outcome='unfinished' WHERE outcome IS NULL")

    def close(self) -> None:
        self._conn.close()

    def begin(
        self,
        turn: str,
        kind: str,
        started: float,
        wake: dict[str, JsonValue],
        wake_reason: str,
        prompt: str,
    ) -> None:
        with _tx(self._conn) as c:
            c.execute(
                "INSERT INTO turns(id, agent, kind, started, wake, wake_reason, prompt, bytes) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (turn, self.agent, kind, started, json.dumps(wake), wake_reason, prompt,
                 len(prompt)),
            )  # fmt: skip

    def step(
        self,
        turn: str,
        seq: int,
        kind: str,
        text: str,
        *,
        call_id: str | None = None,
        name: str | None = None,
        parent: str | None = None,
        is_error: bool = False,
    ) -> None:
        """One step, committed (the whole text to a file first, when the index cuts it)."""
        cut = len(text) > INDEX_CHARS
        if cut:
            path = _blob(self.root, turn, seq)
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write_beneath(self.root, path, text.encode(), 0o600)
        body = text[:INDEX_CHARS]
        with _tx(self._conn) as c:
            c.execute(
                "INSERT INTO steps(turn, seq, at, kind, call_id, name, parent, is_error, body, "
                "size, cut) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (turn, seq, time.time(), kind, call_id, name, parent, int(is_error), body,
                 len(text), int(cut)),
            )  # fmt: skip
            c.execute(
                "UPDATE turns SET bytes = bytes + ? WHERE id = ?",
                (len(body) + (len(text) if cut else 0), turn),
            )

    def prompt(self, turn: str, prompt: str) -> None:
        self._conn.execute(
            "UPDATE turns SET prompt=?, bytes = bytes + ? WHERE id=?", (prompt, len(prompt), turn)
        )

    def session(self, turn: str, session_id: str, model: str | None) -> None:
        self._conn.execute(
            "UPDATE turns SET session_id=?, model=COALESCE(?, model) WHERE id=?",
            (session_id, model, turn),
        )

    def finish(self, turn: str, outcome: str, ended: float, model_calls: int) -> None:
        self._conn.execute(
            "UPDATE turns SET outcome=?, ended=?, model_calls=? WHERE id=?",
            (outcome, ended, model_calls, turn),
        )

    def counted(self, turn: str, cost_usd: float, input_tokens: int, output_tokens: int) -> None:
        self._conn.execute(
            "UPDATE turns SET cost_usd=?, input_tokens=?, output_tokens=? WHERE id=?",
            (cost_usd, input_tokens, output_tokens, turn),
        )


# ---- reads (each on a connection of its own, on a worker thread) ----------------------


@contextmanager
def _reader(root: Path) -> Iterator[sqlite3.Connection | None]:
    db = root / DB_NAME
    if not db.exists():
        yield None
        return
    with closing(_connect(db)) as conn:
        yield conn


def _summaries(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> list[TurnSummary]:
    ids = [str(r[0]) for r in rows]
    tools: dict[str, list[str]] = {i: [] for i in ids}
    if ids:
        marks = ",".join("?" * len(ids))
        for turn, name in conn.execute(
            f"SELECT DISTINCT turn, name FROM steps WHERE kind='tool_use' AND turn IN ({marks}) "
            "ORDER BY turn, name",
            ids,
        ):
            tools[turn].append(name)
    names = _SUMMARY_COLS.split(", ")
    return [TurnSummary(**dict(zip(names, r, strict=True)), tools=tools[str(r[0])]) for r in rows]


def list_turns(root: Path, since: float | None, limit: int) -> list[TurnSummary]:
    """The agent's turns, newest first (none: it has no records on this host)."""
    with _reader(root) as conn:
        if conn is None:
            return []
        rows = conn.execute(
            f"SELECT {_SUMMARY_COLS} FROM turns WHERE started >= ? ORDER BY started DESC LIMIT ?",
            (since if since is not None else 0.0, limit),
        ).fetchall()
        return _summaries(conn, rows)


def show_turn(root: Path, turn: str, after_seq: int, full: bool, budget: int) -> TurnRecord | None:
    """The turn and its steps after ``after_seq``, as many as fit ``budget`` characters
    (at least one); ``None``: no such turn here."""
    with _reader(root) as conn:
        if conn is None:
            return None
        row = conn.execute(
            f"SELECT {_SUMMARY_COLS}, wake, prompt FROM turns WHERE id=?", (turn,)
        ).fetchone()
        if row is None:
            return None
        (summary,) = _summaries(conn, [row[:-2]])
        steps: list[TurnStep] = []
        used, next_seq = len(row[-1]), None
        for seq, at, kind, call_id, name, parent, is_error, body, size, cut in conn.execute(
            "SELECT seq, at, kind, call_id, name, parent, is_error, body, size, cut FROM steps "
            "WHERE turn=? AND seq>? ORDER BY seq",
            (turn, after_seq),
        ):
            text = body
            if cut and full:
                try:
                    text = _blob(root, turn, seq).read_text()
                except FileNotFoundError:
                    pass  # pruned between the row and the file: the index's start stands
            if steps and used + len(text) > budget:
                next_seq = steps[-1].seq
                break
            used += len(text)
            steps.append(
                TurnStep(
                    seq=seq, at=at, kind=kind, text=text, size=size,
                    truncated=len(text) < size, call_id=call_id, name=name, parent=parent,
                    is_error=bool(is_error),
                )
            )  # fmt: skip
        subagents = [
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT parent FROM steps WHERE turn=? AND parent IS NOT NULL "
                "ORDER BY parent",
                (turn,),
            )
        ]
        return TurnRecord(
            hive_subagents=_hive_subagents(conn, turn),
            turn=summary,
            wake=json.loads(row[-2]),
            prompt=row[-1],
            steps=steps,
            subagents=subagents,
            next_seq=next_seq,
        )


_STARTED = re.compile(r"^subagent \w+: id=([A-Za-z0-9_.-]+)")
_SUBAGENT_TOOL = "mcp__subagent__"


def _hive_subagents(conn: sqlite3.Connection, turn: str) -> list[str]:
    """The hive subagents a turn started (the id ``start`` answered) or steered (the id
    ``continue``/``interrupt``/``status`` were given), in order, once each."""
    found: list[str] = []
    calls: dict[str, str] = {}
    for kind, call_id, name, body in conn.execute(
        "SELECT kind, call_id, name, body FROM steps WHERE turn=? ORDER BY seq", (turn,)
    ):
        sid: str | None = None
        if kind == "tool_use" and name and name.startswith(_SUBAGENT_TOOL):
            calls[call_id] = name
            try:
                given = json.loads(body).get("id")
            except (ValueError, AttributeError):
                given = None
            sid = given if isinstance(given, str) else None
        elif kind == "tool_result" and calls.get(call_id) == _SUBAGENT_TOOL + "start":
            m = _STARTED.match(body)
            sid = m.group(1) if m else None
        if sid and sid not in found:
            found.append(sid)
    return found


def _fts_query(text: str) -> str:
    """The user's text as one FTS5 phrase (its own syntax is not the operator's)."""
    return '"' + text.replace('"', '""') + '"'


def search_turns(root: Path, text: str, limit: int) -> list[TurnHit]:
    """Steps matching ``text`` (a phrase), newest turn first, one hit per turn."""
    with _reader(root) as conn:
        if conn is None:
            return []
        rows = conn.execute(
            "SELECT s.turn, s.seq, s.kind, snippet(steps_fts, 0, '[', ']', '…', 24) "
            "FROM steps_fts JOIN steps s ON s.rowid = steps_fts.rowid "
            "JOIN turns t ON t.id = s.turn WHERE steps_fts MATCH ? "
            "ORDER BY t.started DESC, s.seq",
            (_fts_query(text),),
        ).fetchall()
        first: dict[str, tuple[int, str, str]] = {}
        for turn, seq, kind, snip in rows:
            first.setdefault(turn, (seq, kind, snip))
            if len(first) >= limit:
                break
        if not first:
            return []
        marks = ",".join("?" * len(first))
        found = conn.execute(
            f"SELECT {_SUMMARY_COLS} FROM turns WHERE id IN ({marks}) ORDER BY started DESC",
            list(first),
        ).fetchall()
        return [
            TurnHit(turn=s, seq=first[s.id][0], kind=first[s.id][1], snippet=first[s.id][2])
            for s in _summaries(conn, found)
        ]


@dataclass(frozen=True, slots=True)
class Pruned:
    turns: int
    bytes: int


def prune(root: Path, keep_seconds: float, keep_bytes: int, now: float) -> Pruned:
    """Drop finished turns older than ``keep_seconds``, then the oldest finished ones
    until the rest fit ``keep_bytes``; a running turn is never dropped. One short
    transaction per turn, so the recorder's writes wait for none of it for long."""
    dropped = freed = 0
    with _reader(root) as conn:
        if conn is None:
            return Pruned(0, 0)
        rows = conn.execute(
            "SELECT id, started, bytes FROM turns WHERE outcome IS NOT NULL ORDER BY started"
        ).fetchall()
        total = conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM turns").fetchone()[0]
        for turn, started, size in rows:
            if started >= now - keep_seconds and total <= keep_bytes:
                break
            with _tx(conn) as c:
                c.execute("DELETE FROM steps WHERE turn=?", (turn,))
                c.execute("DELETE FROM turns WHERE id=?", (turn,))
            shutil.rmtree(root / "blobs" / turn, ignore_errors=True)
            total -= size
            dropped, freed = dropped + 1, freed + size
    return Pruned(dropped, freed)
