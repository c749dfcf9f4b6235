"""``hivectl serve`` on PostgreSQL: a restart of the database under a running coordinator
makes requests fail clearly (``unavailable``) and then carry on; across that and a
``kill -9`` of the coordinator, nothing acked comes back and nothing unacked is lost."""

from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path

import anyio
import pytest

from hyperhive.agent import harness
from hyperhive.client import RpcClient, connect
from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import Unavailable
from hyperhive.protocol import AckUntilReq, AttachReq, RecvReq, RemindReq, SendReq, WaitReq
from hyperhive.store.postgres import open_postgres
from tests.support.hive import coordinator, running_hive, seed_home, start_serve
from tests.support.postgres import PgCluster
from tests.support.procs import agent_rows, log_tail, start_host, stop, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


async def _recv_ids(client: RpcClient) -> list[int]:
    return [m.id for m in await client.call(RecvReq(cmd="recv", max=5))]


async def _send_when_back(paths: HivePaths, body: str) -> int:
    """What an agent's harness does while the database is away: retry until it answers."""
    with anyio.fail_after(60):
        while True:
            try:
                async with connect(paths.agent_sock("alice")) as alice:
                    sent = await alice.call(SendReq(cmd="send", to="sink", body=body))
                    return sent.id
            except (Unavailable, OSError):
                await anyio.sleep(0.2)


async def test_a_coordinator_on_postgres_rides_out_a_database_restart(
    tmp_path: Path, pg_private_cluster: PgCluster
) -> None:
    cluster = pg_private_cluster
    url = cluster.url(cluster.create_database())
    seed_home(
        tmp_path,
        {"alice": AgentConfig(), "sink": AgentConfig()},
        hive_toml='store_url_file = "store.url"\n',
    )
    (tmp_path / "store.url").write_text(url + "\n")
    (tmp_path / "store.url").chmod(0o600)
    paths = HivePaths(tmp_path)
    serve = start_serve(tmp_path)
    try:
        async with connect(paths.agent_sock("alice")) as alice:
            # Falls due while the database is away: the scheduler must survive that.
            await alice.call(RemindReq(cmd="remind", message="due in the outage", delay_seconds=1))
            ids = []
            for i in range(3):
                sent = await alice.call(SendReq(cmd="send", to="sink", body=f"before {i}"))
                ids.append(sent.id)
        async with connect(paths.agent_sock("sink")) as sink:
            await sink.call(AttachReq(cmd="attach"))
            assert await _recv_ids(sink) == ids
            await sink.call(AckUntilReq(cmd="ack_until", up_to=ids[0]))

        await anyio.to_thread.run_sync(cluster.stop)
        async with connect(paths.agent_sock("alice")) as alice:
            with pytest.raises(Unavailable) as down:
                await alice.call(SendReq(cmd="send", to="sink", body="while down"))
        assert "unavailable" in down.value.message and "retry" in down.value.message
        await anyio.sleep(2)  # let the reminder fall due and its firing fail
        assert serve.poll() is None, "the coordinator died with its database"

        await anyio.to_thread.run_sync(cluster.start)
        after = await _send_when_back(paths, "after the restart")
        async with connect(paths.agent_sock("alice")) as alice:
            await alice.call(AttachReq(cmd="attach"))
            woke = await alice.call(WaitReq(cmd="wait", timeout=60))
        assert any("due in the outage" in m.body for m in woke.messages)

        serve.send_signal(signal.SIGKILL)
        serve.wait()
        serve = start_serve(tmp_path)
        async with connect(paths.agent_sock("sink")) as sink:
            await sink.call(AttachReq(cmd="attach"))
            again = await _recv_ids(sink)
        assert again == [ids[1], ids[2], after]  # the acked row never comes back
    finally:
        serve.terminate()
        serve.wait(timeout=30)

    store = await open_postgres(url)
    try:
        bodies = [m.body for m in await store.messages.scan() if m.recipient == "sink"]
    finally:
        await store.close()
    assert bodies == ["before 0", "before 1", "before 2", "after the restart"]


async def test_a_host_registering_while_the_database_is_away_is_served_once_it_is_back(
    tmp_path: Path, pg_private_cluster: PgCluster
) -> None:
    cluster = pg_private_cluster
    seed_home(tmp_path, {"solo": AgentConfig()}, hive_toml='store_url_file = "store.url"\n')
    (tmp_path / "store.url").write_text(cluster.url(cluster.create_database()) + "\n")
    (tmp_path / "store.url").chmod(0o600)
    serve = start_serve(tmp_path)
    host = None
    try:
        await anyio.to_thread.run_sync(cluster.stop)
        host = await anyio.to_thread.run_sync(start_host, tmp_path)
        # The host registers; the coordinator's read of who should run fails for want of
        # its store (after the pool's wait), and it must live through that.
        await anyio.to_thread.run_sync(
            lambda: wait_until(
                lambda: (
                    # Resolving unfinished moves comes first, then activation: either waits.
                    any(
                        f"cannot {what} yet" in log_tail(tmp_path, "serve.log", 50_000)
                        for what in ("resolve moves", "activate agents")
                    )
                    or serve.poll() is not None
                ),
                60,
                "the coordinator meets its missing store",
            )
        )
        assert serve.poll() is None, log_tail(tmp_path, "serve.log")
        await anyio.to_thread.run_sync(cluster.start)
        await anyio.to_thread.run_sync(
            lambda: wait_until(lambda: agent_rows(tmp_path)["solo"]["running"], 60, "solo runs")
        )
        assert serve.poll() is None
    finally:
        if host is not None:
            stop(host)
        serve.terminate()
        serve.wait(timeout=30)


async def test_a_crash_restart_due_while_the_database_is_away_waits_for_it(
    tmp_path: Path, pg_private_cluster: PgCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = pg_private_cluster
    url = cluster.url(cluster.create_database())
    paths = seed_home(tmp_path, {"alice": AgentConfig(), "sink": AgentConfig()}, store_url=url)
    async with coordinator(tmp_path) as coord:
        await anyio.to_thread.run_sync(cluster.stop)
        # Its host reports alice crashed; the notice may fail with the store away, the
        # restart (due 2 s later) must wait for the store, not end the coordinator.
        with contextlib.suppress(Unavailable):
            await coord.lifecycle.crashed("alice", "killed by the test")
        with anyio.fail_after(120):
            while "agent alice: cannot restart it yet" not in caplog.text:  # noqa: ASYNC110
                await anyio.sleep(0.1)
        await anyio.to_thread.run_sync(cluster.start)
        # Still serving: alice's socket answers once the database is back.
        assert await _send_when_back(paths, "after the outage") > 0


async def test_agents_whose_database_is_away_warn_once_each_not_per_redial(
    tmp_path: Path,
    pg_private_cluster: PgCluster,
    caplog: pytest.LogCaptureFixture,
    claude_bin: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The coordinator stays up and takes each redial; only its database is away, so every
    # attach fails. Once per agent (and once per ten seconds for the store) is the rule.
    monkeypatch.setattr(harness, "WAIT_SECONDS", 1.0)  # their long-polls return soon
    cluster = pg_private_cluster
    url = cluster.url(cluster.create_database())
    agents = ["a0", "a1", "a2"]
    seed_home(tmp_path, {name: AgentConfig() for name in agents}, store_url=url)
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, "hyperhive.agent.harness")
    async with running_hive(tmp_path, claude_bin) as (_coord, host):

        def attached() -> bool:
            return all((rt := host.agents.get(n)) is not None and rt.connection.up for n in agents)

        def redialled() -> bool:
            debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
            return all(
                any(m.startswith(f"{n}: coordinator unavailable") for m in debug) for n in agents
            )

        def back() -> bool:
            return all(f"{n}: coordinator unavailable: back after" in caplog.text for n in agents)

        with anyio.fail_after(60):
            while not attached():  # noqa: ASYNC110 - another component's state
                await anyio.sleep(0.05)
        caplog.clear()
        await anyio.to_thread.run_sync(cluster.stop)
        # Each request waits for a connection (10 s) before it fails: until every agent
        # has failed twice (the second time a debug line), the first on its wait, the
        # second on the attach of its redial, which the coordinator took.
        with anyio.fail_after(90):
            while not redialled():  # noqa: ASYNC110 - the log
                await anyio.sleep(0.2)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        for name in agents:
            away = [m for m in said if m.startswith(f"{name}: coordinator unavailable")]
            assert len(away) == 1, said
        assert sum(" unavailable: " in m and m.startswith("store ") for m in said) <= 3, said
        await anyio.to_thread.run_sync(cluster.start)
        with anyio.fail_after(60):
            while not back():  # noqa: ASYNC110 - the log
                await anyio.sleep(0.1)
