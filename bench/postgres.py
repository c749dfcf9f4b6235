"""The PostgreSQL store against ``pgbench`` and a bare socket (issue 11, "Speed").

A throwaway cluster from Debian's packages (``tests/support/postgres.py``)
with fsync on, so every figure is durable; the ``pgbench`` floors run against
the same cluster, the same table, in the same run. ``postgres.sends`` drives
the store in-process, so its CPU per send is this process's (store and
callers); ``postgres.coordinator`` drives ``hivectl serve`` and reads the
coordinator's CPU from ``/proc``.

Floors: one INSERT per transaction (what a store without group commit could
reach), the same with its ``pg_notify`` (the NOTIFY lock serialises commits),
and the group-commit floor: each transaction one statement inserting
``GROUP_ROWS`` rows with one ``pg_notify``, the shape of the store's batches.

The store row also stands beside the same transactions from *one* pgbench
client: with ``IN_FLIGHT`` sends in flight, a sender's next send waits for its
last one's commit, and notifying commits never overlap, so no client can beat
``IN_FLIGHT`` rows per (statement + commit) round; that is the ceiling on this
disk, where ``-c 8`` has 64 rows in flight. A second store row runs the same
sends as the active coordinator does under a lease: every batch also proves
the lease's epoch (``hyperhive_fence``) inside its statement; a third sends
each message in reply to one sent before (the batch checks that it exists).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns

import anyio
import psycopg
from tests.support.postgres import PgCluster, start_cluster

from bench._procs import echo_server, seed_home, serve
from bench.coordinator import BODY, SENDERS, SINK, _lanes, _pingpong_samples
from bench.coordinator import _send_rate as _coord_send_rate
from bench.registry import Context, Latency, Row, Throughput, benchmark
from hyperhive.store.postgres import PostgresStore, open_postgres
from hyperhive.store.postgres.lease import Lease

__all__ = ["pg_coordinator_sends", "pg_sends", "pg_wake"]

IN_FLIGHT = 8
# Rows per transaction in the group-commit floor: the 8 in flight, committed together.
GROUP_ROWS = 8


@benchmark("postgres.sends")
def pg_sends(ctx: Context) -> list[Row]:
    total = 2000 if ctx.quick else 20_000
    cluster = start_cluster(fsync=True)
    try:
        db = cluster.create_database("bench")
        url = cluster.url(db)
        plain_run = asyncio.run(_send_rate(url, total, fenced=False))
        # Each on an empty mailbox of its own, as the first run had.
        fresh = cluster.url(cluster.create_database("fenced"))
        fenced_run = asyncio.run(_send_rate(fresh, total, fenced=True))
        fresh = cluster.url(cluster.create_database("replies"))
        reply_run = asyncio.run(_send_rate(fresh, total, fenced=False, replies=True))
        scratch = ctx.scratch("pgb")
        plain = _pgbench(cluster, db, scratch, total, notify=False)
        notified = _pgbench(cluster, db, scratch, total, notify=True)
        grouped = _pgbench(cluster, db, scratch, total, notify=True, rows=GROUP_ROWS)
        serial = _pgbench(cluster, db, scratch, total, notify=True, rows=GROUP_ROWS, clients=1)
    finally:
        cluster.destroy()
    name = f"PostgreSQL durable sends/s, {IN_FLIGHT} in flight (store API)"
    fenced_name = f"PostgreSQL durable sends/s, {IN_FLIGHT} in flight (store API, lease-fenced)"
    reply_name = f"PostgreSQL durable sends/s, {IN_FLIGHT} in flight (store API, each a reply)"
    goal = "≥ 5,000/s"
    figure = plain_run.figure
    return [
        Row(
            name,
            figure,
            f"pgbench -c {IN_FLIGHT}: INSERT per transaction",
            plain,
            goal,
            plain_run.note("PostgreSQL store"),
        ),
        Row(name, figure, f"pgbench -c {IN_FLIGHT}: INSERT + pg_notify", notified, goal),
        Row(name, figure, GROUPED.format(rows=GROUP_ROWS), grouped, goal),
        Row(name, figure, SERIAL.format(rows=GROUP_ROWS), serial, goal),
        Row(
            fenced_name,
            fenced_run.figure,
            SERIAL.format(rows=GROUP_ROWS),
            serial,
            goal,
            fenced_run.note("PostgreSQL store, every batch fenced by the lease's epoch"),
        ),
        Row(
            reply_name,
            reply_run.figure,
            SERIAL.format(rows=GROUP_ROWS),
            serial,
            goal,
            reply_run.note(
                "PostgreSQL store, every send in reply to a message (the batch checks that "
                "it exists)"
            ),
        ),
    ]


GROUPED = "pgbench -c 8: {rows} rows + 1 pg_notify per transaction (group commit)"
SERIAL = "pgbench -c 1: the same {rows} rows + pg_notify per transaction (ceiling at 8 in flight)"


@dataclass(frozen=True)
class SendRun:
    """One run of ``total`` sends through the store API."""

    figure: Throughput
    cpu_s: float  # this process's CPU over the run (store and callers)
    commits: int  # batches committed
    round_ns: int  # their rounds summed: statement sent to committed reply

    def note(self, what: str) -> str:
        per_commit = self.figure.ops / self.commits
        per_batch_us = self.figure.elapsed_ns / self.commits / 1e3
        round_us = self.round_ns / self.commits / 1e3
        return (
            f"{what}: {self.cpu_s / self.figure.ops * 1e6:.0f} µs of CPU per send in the "
            f"calling process (store + callers), "
            f"{self.cpu_s / (self.figure.elapsed_ns / 1e9):.0%} of one core; "
            f"{per_commit:.1f} sends per commit, one round trip each: "
            f"{round_us:.0f} µs from a batch's statement to its committed reply as the store "
            f"sees it, {per_batch_us - round_us:.0f} µs per batch outside it (the callers' "
            "turn, the next batch forming)"
        )


async def _send_rate(url: str, total: int, *, fenced: bool, replies: bool = False) -> SendRun:
    """``total`` sends at ``IN_FLIGHT`` in flight; ``fenced``: as the active coordinator
    under a lease, every batch proving its epoch; ``replies``: each send in reply to
    one message, sent before them."""
    store = await open_postgres(url)
    lease = Lease(url, "bench", ttl=3600)  # never renewed: it must outlast the run
    try:
        if fenced:
            epoch = await lease.try_acquire()
            if epoch is None:
                raise RuntimeError("the bench's lease is held by someone else")
            store.db.fence_with(epoch)
        for _ in range(200):  # warm-up: pool connections, prepared statements
            await store.messages.send("warm", "sink", BODY)
        reply = await store.messages.send("bench", "sink", BODY) if replies else None
        batcher = store.pg_messages.batcher
        commits0, round0 = batcher.commits, batcher.round_ns
        cpu0 = time.process_time()
        t0 = perf_counter_ns()
        async with anyio.create_task_group() as tg:
            for n in _lanes(total, IN_FLIGHT):
                tg.start_soon(_lane, store, n, reply)
        elapsed = perf_counter_ns() - t0
        cpu = time.process_time() - cpu0
        return SendRun(
            Throughput(total, elapsed),
            cpu,
            batcher.commits - commits0,
            batcher.round_ns - round0,
        )
    finally:
        if fenced:
            await lease.release()
        await lease.close()
        await store.close()


async def _lane(store: PostgresStore, count: int, reply: int | None = None) -> None:
    for _ in range(count):
        await store.messages.send("bench", "sink", BODY, reply)


def _wal_syncs(cluster: PgCluster) -> int:
    """WAL flushes (fsyncs) the cluster has made: the disk's work, whoever commits."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    return int(row[0]) if row else 0


_TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")


def _pgbench(
    cluster: PgCluster,
    db: str,
    scratch: Path,
    total: int,
    notify: bool,
    rows: int = 1,
    clients: int = IN_FLIGHT,
) -> Throughput:
    """Rows/s of ``pgbench -c clients`` inserting ``total`` rows, ``rows`` per transaction."""
    body = BODY.replace("'", "''")
    insert = (
        "INSERT INTO messages(sender, recipient, body, created_at) "
        f"VALUES ('s', 'sink', '{body}', 0)"
    )
    if rows > 1:  # one statement, one NOTIFY, one commit: the store's batch
        script = (
            "WITH ins AS (INSERT INTO messages(sender, recipient, body, created_at) "
            f"SELECT 's', 'sink', '{body}', 0 FROM generate_series(1, {rows}) RETURNING 1) "
            "SELECT pg_notify('bench', 'sink') FROM (SELECT count(*) FROM ins) AS n;\n"
        )
    elif notify:
        script = (
            f"WITH ins AS ({insert} RETURNING recipient) "
            "SELECT pg_notify('bench', recipient) FROM ins;\n"
        )
    else:
        script = insert + ";\n"
    path = scratch / f"insert-{rows}-{int(notify)}.sql"
    path.write_text(script)
    path.chmod(0o644)
    per_client = max(1, total // (clients * rows))
    proc = subprocess.run(
        [
            str(cluster.bindir / "pgbench"),
            "-n",  # no vacuum of pgbench's own tables: it has none here
            "-h",
            str(cluster.sockdir),
            "-p",
            str(cluster.port),
            "-U",
            cluster.superuser,
            "-c",
            str(clients),
            "-j",
            str(min(2, clients)),
            "-t",
            str(per_client),
            "-f",
            str(path),
            db,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    found = _TPS.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"pgbench failed ({proc.returncode}): {proc.stderr.strip()}")
    transactions = per_client * clients
    return Throughput(transactions * rows, int(transactions / float(found.group(1)) * 1e9))


@benchmark("postgres.coordinator")
def pg_coordinator_sends(ctx: Context) -> list[Row]:
    per_client = 100 if ctx.quick else 1000
    senders = [f"s{i}" for i in range(SENDERS)]
    cluster = start_cluster(fsync=True)
    try:
        db = cluster.create_database("bench")
        home = ctx.scratch("pc")
        (home / "store.url").write_text(cluster.url(db) + "\n")
        (home / "store.url").chmod(0o600)
        (home / "hive.toml").write_text('runtime = "unsandboxed"\nstore_url_file = "store.url"\n')
        paths = seed_home(home, [*senders, SINK])
        syncs0 = _wal_syncs(cluster)
        with serve(paths, [*senders, SINK]) as proc:
            figure, cpu = anyio.run(_coord_send_rate, paths, senders, per_client, 8, proc.pid)
        # The whole serve run (start, warm-up, stop); its backends have exited, so
        # their counts are in.
        syncs = _wal_syncs(cluster) - syncs0
        scratch = ctx.scratch("pgb")
        floor = _pgbench(cluster, db, scratch, per_client * SENDERS, notify=False)
        grouped = _pgbench(cluster, db, scratch, per_client * SENDERS, notify=True, rows=GROUP_ROWS)
    finally:
        cluster.destroy()
    busy = cpu.total / (figure.elapsed_ns / 1e9)
    loop_user, loop_sys = (seconds / figure.ops * 1e6 for seconds in cpu.loop)
    note = (
        f"coordinator on PostgreSQL: {cpu.total / figure.ops * 1e6:.0f} µs of coordinator CPU "
        f"per send (event loop {loop_user:.0f} user + {loop_sys:.0f} kernel), {busy:.0%} of "
        f"one core during the run; ~{figure.ops / max(1, syncs):.1f} sends per WAL flush "
        "(pg_stat_wal, the whole serve run)"
    )
    name = f"PostgreSQL durable sends/s, {SENDERS} clients × 8 in flight (hivectl serve)"
    return [
        Row(
            name,
            figure,
            f"pgbench -c {IN_FLIGHT}: INSERT per transaction",
            floor,
            "≥ 5,000/s",
            note,
        ),
        Row(name, figure, GROUPED.format(rows=GROUP_ROWS), grouped, "≥ 5,000/s"),
    ]


@benchmark("postgres.wake")
def pg_wake(ctx: Context) -> list[Row]:
    samples = 200 if ctx.quick else 2000
    idle_s = 0.003
    cluster = start_cluster(fsync=True)
    try:
        url = cluster.url(cluster.create_database("bench"))
        figure = asyncio.run(_wake_samples(url, samples, idle_s))
    finally:
        cluster.destroy()
    sock = ctx.scratch("e") / "echo.sock"
    with echo_server(sock):
        floor = anyio.run(_pingpong_samples, sock, samples, idle_s)
    return [
        Row(
            "cross-process wake on PostgreSQL (insert + NOTIFY → listener)",
            figure,
            "bare anyio unix-socket ping-pong",
            floor,
            "p50 ≤ 5 ms",
        )
    ]


async def _heard(heard: dict[str, int], name: str) -> None:
    # A tight poll, not an Event: the callback stamps the time itself, so the
    # poll's granularity adds nothing to the figure.
    while name not in heard:  # noqa: ASYNC110
        await asyncio.sleep(0.0002)


async def _wake_samples(url: str, samples: int, idle_s: float) -> Latency:
    store = await open_postgres(url)
    heard: dict[str, int] = {}

    def hear(agent: str) -> None:
        heard.setdefault(agent, perf_counter_ns())

    store.on_change(hear)
    waker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench._pg_waker",
        url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert waker.stdin is not None and waker.stdout is not None
    try:
        if (await waker.stdout.readline()).strip() != b"ready":
            raise RuntimeError("bench._pg_waker did not start")
        names = [f"w{i}" for i in range(samples + 20)]  # the first 20 are the warm-up
        for name in names:
            await asyncio.sleep(idle_s)
            waker.stdin.write(name.encode() + b"\n")
            await waker.stdin.drain()
            await waker.stdout.readline()  # "sent": committed
            async with asyncio.timeout(10):
                await _heard(heard, name)
        out = []
        for name in names[20:]:
            (row,) = await store.messages.inbox(name, limit=1)
            out.append(heard[name] - int(row.body))
        return Latency.of(out)
    finally:
        waker.stdin.close()
        await waker.wait()
        await store.close()
