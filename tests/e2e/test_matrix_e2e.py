"""Matrix end to end: a person DMs an agent on a real Synapse; the agent wakes and answers.

Coordinator, agent host, the real claude CLI against the scripted model, and
a real Synapse (SQLite, one per test session). The operator's client
(matrix-nio) opens a DM with the agent; the agent's watcher accepts the
invitation (the operator is an allowed inviter), wakes the agent exactly
once, its turn calls ``mcp__matrix__send`` and the operator's client
receives the reply. Then: a host restart between two messages (no second
wake for the first, no miss of the second), an invitation from a stranger
left pending, tokens that are the agent's alone, and the homeserver going
down and coming back.
"""

from __future__ import annotations

import logging
import secrets
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.matrix.config import AgentMatrixConfig
from hyperhive.matrix.identity import (
    ACCOUNT_FILE,
    SYNC_FILE,
    read_account,
    read_sync_state,
    write_sync_state,
)
from tests.e2e.test_bash_mcp import coordinator_and_host, start_host
from tests.support.hive import agent_env, op_call, operator, seed_home
from tests.support.model_server import ModelServer, always, text, tool_call
from tests.support.procs import hivectl
from tests.support.surfaces import result_text, surface_client, until, until_async
from tests.support.synapse import Person, Synapse, TcpGate, register

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(240)]

AGENT = "mx-ana"
People = Callable[[str], Awaitable[Person]]


def _hive(tmp_path: Path, synapse: Synapse, homeserver: str, operator_id: str) -> tuple[str, str]:
    """The [matrix] section for hive.toml, and the hive's prefix (unique per test)."""
    secret = synapse.write_secret(tmp_path / "matrix-secret")
    hive = f"t{secrets.token_hex(3)}"
    return (
        f'[matrix]\nhomeserver = "{homeserver}"\nserver_name = "{synapse.server_name}"\n'
        f'registration_shared_secret_file = "{secret}"\noperator = "{operator_id}"\n'
        f'hive = "{hive}"\nsync_timeout_seconds = 2\nbackoff_max = 0.5\n'
    ), hive


async def _matrix_messages(home: Path, agent: str = AGENT) -> list[dict[str, Any]]:
    async with operator(HivePaths(home)) as op:
        views = await op_call(op, "messages", agent=agent)
    assert isinstance(views, dict)
    return [m for m in views["inbox"] if m["from"] == "matrix"]


async def _wait_messages(home: Path, count: int, within: float = 60) -> list[dict[str, Any]]:
    with anyio.fail_after(within):
        while True:
            rows = await _matrix_messages(home)
            if len(rows) >= count:
                return rows
            await anyio.sleep(0.1)


@pytest.fixture
async def people(synapse: Synapse) -> AsyncIterator[People]:
    """People with Matrix accounts (registered as a person would be), closed after the test."""
    made: list[Person] = []

    async def person(name: str) -> Person:
        account = await anyio.to_thread.run_sync(
            register, synapse, f"{name}-{secrets.token_hex(3)}"
        )
        made.append(Person(synapse, account))
        await made[-1].texts(timeout_ms=0)  # the baseline: only what comes after is news
        return made[-1]

    yield person
    for p in made:
        await p.close()


async def _reply(person: Person, room_id: str, want: str, within: float = 60) -> str:
    with anyio.fail_after(within):
        while True:
            for room, _sender, body in await person.texts():
                if room == room_id and want in body:
                    return body


async def _host_gone(home: Path) -> None:
    """Until the coordinator has seen the agent's host go (its watcher with it)."""
    with anyio.fail_after(30):
        while True:
            async with operator(HivePaths(home)) as op:
                rows = await op_call(op, "agents")
            assert isinstance(rows, list)
            if not any(r["name"] == AGENT and r["running"] for r in rows):  # type: ignore[index]
                return
            await anyio.sleep(0.1)


async def _synced(state_dir: Path) -> None:
    """Until the agent's watcher has a sync token (its account exists, its first sync done)."""
    await until(lambda: read_sync_state(state_dir).since is not None, within=60)


async def test_dm_wakes_once_reply_reaches_the_operator_across_a_host_restart(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    synapse: Synapse,
    people: People,
) -> None:
    op = await people("op")
    matrix_toml, hive = _hive(tmp_path, synapse, synapse.url, op.user_id)
    agent_id = f"@{hive}-{AGENT}:{synapse.server_name}"
    model_server.set_script(
        [
            tool_call("mcp__matrix__send", {"to": op.user_id, "text": "pong: **got it**"}),
            text("answered on matrix"),
        ]
    )
    seed_home(
        tmp_path,
        {
            AGENT: AgentConfig(
                matrix=AgentMatrixConfig(enabled=True), env=agent_env(model_server.url)
            ),
            "mx-bob": AgentConfig(env=agent_env(model_server.url)),
        },
    )
    async with coordinator_and_host(tmp_path, claude_bin, matrix_toml) as (host, scope, tg):
        await until(lambda: AGENT in host.agents and "mx-bob" in host.agents)
        state = host.agents[AGENT].state_dir
        await _synced(state)
        # Provisioned: the account file is the agent's alone, and names its Matrix ID.
        account = read_account(state)
        assert account is not None and account.user_id == agent_id
        assert stat.S_IMODE((state / ACCOUNT_FILE).stat().st_mode) == 0o600
        assert stat.S_IMODE((state / SYNC_FILE).stat().st_mode) == 0o600

        # get_agent_meta names the account; an agent without [matrix] has none.
        async with surface_client(host, "mx-bob", "hyperhive") as hh:
            meta = result_text(await hh.call_tool("get_agent_meta", {"name": AGENT}))
            bob_meta = result_text(await hh.call_tool("get_agent_meta", {}))
        assert agent_id in meta and synapse.url in meta
        assert '"matrix_accounts"' in meta and '"matrix_accounts"' not in bob_meta

        before_dm = read_sync_state(state)
        room_id = await op.dm(agent_id)
        await op.say(room_id, "ping from the operator")
        reply = await _reply(op, room_id, "pong")
        assert reply == "pong: **got it**"
        woken = await _wait_messages(tmp_path, 1)
        assert len(woken) == 1
        body = woken[0]["body"]
        assert "ping from the operator" in body and op.user_id in body and room_id in body
        # The turn was woken by that body (the wake reached claude's prompt).
        first = model_server.main_requests[0]
        assert "ping from the operator" in str(first.messages)

        # The host dies — as if before it noted its progress: the next host syncs from
        # before the DM again. A message arrives while none runs; the next host wakes
        # the agent for it once, and the first, delivered again, lands no second time.
        model_server.set_script(always(text("noted")))
        scope.cancel()
        await _host_gone(tmp_path)
        write_sync_state(state, before_dm, None)
        await op.say(room_id, "second, while the host was away")
        second, second_scope = await start_host(tg, tmp_path, "second-host")
        try:
            woken = await _wait_messages(tmp_path, 2)
            assert "second, while the host was away" in woken[1]["body"]
            assert "ping from the operator" not in woken[1]["body"]
            # The replayed batch was delivered before the new message (same sync, in
            # order): had the first landed again, it would be the second message.
            assert len(woken) == 2
            # The host saves its sync position after delivering the batch: a moment later.
            await until(lambda: read_sync_state(state).since != before_dm.since)
        finally:
            with anyio.move_on_after(10):
                await second.stop_all(graceful=False)
            second_scope.cancel()


async def test_a_room_of_the_homeservers_default_version_is_a_wake_room_and_answered(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    synapse: Synapse,
    people: People,
) -> None:
    """Synapse makes rooms in version 12 unless told otherwise: IDs with no server part.
    One such room is the agent's wake room (agent.toml), and its turn answers there."""
    op = await people("op")
    matrix_toml, hive = _hive(tmp_path, synapse, synapse.url, op.user_id)
    agent_id = f"@{hive}-{AGENT}:{synapse.server_name}"
    room_id = await op.room([], "standup")  # no version asked for: the server's default
    assert await op.room_version(room_id) == await op.default_room_version()
    assert ":" not in room_id and len(room_id) == 44, room_id  # ! and the create event's hash
    model_server.set_script(
        [
            tool_call("mcp__matrix__send", {"to": room_id, "text": "on my way"}),
            tool_call("mcp__matrix__read", {"room": room_id, "limit": 5}),
            text("answered in the standup room"),
        ]
    )
    seed_home(
        tmp_path,
        {
            AGENT: AgentConfig(
                matrix=AgentMatrixConfig(enabled=True, wake_rooms=[room_id]),
                env=agent_env(model_server.url),
            )
        },
    )
    async with coordinator_and_host(tmp_path, claude_bin, matrix_toml) as (host, _s, _tg):
        await until(lambda: AGENT in host.agents)
        state = host.agents[AGENT].state_dir
        await _synced(state)
        await op.invite(room_id, agent_id)  # the operator's invitation: accepted

        async def joined() -> bool:
            return (await op.members(room_id)).get(agent_id) == "join"

        await until_async(joined, 60)
        await op.say(room_id, "standup starts in five minutes")  # no mention: the room wakes
        reply = await _reply(op, room_id, "on my way")
        assert reply == "on my way"
        [woken] = await _wait_messages(tmp_path, 1)
        assert f"message from {op.user_id}" in woken["body"] and room_id in woken["body"]
        assert "standup starts in five minutes" in woken["body"]
        # The read the turn made with the same ID: its result reached the model.
        await until(lambda: len(model_server.main_requests) >= 3)
        read_result = str(model_server.main_requests[2].messages)
        assert f"room {room_id}:" in read_result and "standup starts" in read_result


async def test_stranger_invite_pending_and_tokens_are_the_agents_own(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    synapse: Synapse,
    people: People,
) -> None:
    op, stranger = await people("op"), await people("stranger")
    matrix_toml, hive = _hive(tmp_path, synapse, synapse.url, op.user_id)
    agent_id = f"@{hive}-{AGENT}:{synapse.server_name}"
    model_server.set_script(always(text("ok")))
    seed_home(
        tmp_path,
        {
            AGENT: AgentConfig(
                matrix=AgentMatrixConfig(enabled=True), env=agent_env(model_server.url)
            ),
            "mx-bob": AgentConfig(
                matrix=AgentMatrixConfig(enabled=True), env=agent_env(model_server.url)
            ),
            "mx-carl": AgentConfig(env=agent_env(model_server.url)),
        },
    )
    async with coordinator_and_host(tmp_path, claude_bin, matrix_toml) as (host, _s, _tg):
        await until(lambda: all(a in host.agents for a in (AGENT, "mx-bob", "mx-carl")))
        state = host.agents[AGENT].state_dir
        await _synced(state)

        # Three in it (the operator invited too): a room, not a direct message.
        room_id = await stranger.room([agent_id, op.user_id], "not yours to join")
        await stranger.say(room_id, f"{agent_id} come in")
        await until(lambda: read_sync_state(state).pending_invites, within=60)
        pending = read_sync_state(state).pending_invites
        assert [(p.room_id, p.inviter) for p in pending] == [(room_id, stranger.user_id)]
        assert (await stranger.members(room_id)).get(agent_id) == "invite"
        assert await _matrix_messages(tmp_path) == []  # an invitation is no wake
        # The operator sees it, on the host's view of the agent (dashboard, hivectl).
        async with httpx.AsyncClient() as http:
            got = await http.get(
                f"{host.base_url}/api/agents/{AGENT}/state",
                headers={"authorization": f"Bearer {host.operator_token}"},
            )
        view = got.json()["matrix"]
        assert view["user_id"] == agent_id
        assert view["pending_invites"] == [f"{room_id} from {stranger.user_id}"]

        shown = await anyio.to_thread.run_sync(hivectl, tmp_path, "agents", "show", AGENT)
        assert f"matrix: {agent_id} on {synapse.url}" in shown.stdout
        assert f"pending invitation: {room_id} from {stranger.user_id}" in shown.stdout

        # Its own tools: the agent's rooms list shows the pending invitation.
        async with surface_client(host, AGENT, "matrix") as mx:
            listed = {t.name for t in (await mx.list_tools()).tools}
            rooms = result_text(await mx.call_tool("rooms", {}))
            # A room's name is no room ID: refused here, naming the forms, nothing sent.
            named = await mx.call_tool("send", {"to": "not yours to join", "text": "hi"})
        assert named.is_error and "room version 12" in result_text(named)
        assert listed == {"send", "read", "rooms", "join", "leave"}
        assert agent_id in rooms and f"invited to {room_id} by {stranger.user_id}" in rooms

        # The agent may still take it up itself; then a mention there wakes it, and
        # read shows the room; leave leaves.
        async with surface_client(host, AGENT, "matrix") as mx:
            joined = await mx.call_tool("join", {"room": room_id})
            assert not joined.is_error, result_text(joined)
            assert read_sync_state(state).pending_invites == ()
            assert (await stranger.members(room_id)).get(agent_id) == "join"
            await stranger.say(room_id, f"now that you are here, {agent_id}: status?")
            # Mentions wake it: the one sent while it was only invited, and the new one.
            bodies = ""
            with anyio.fail_after(60):
                while "status?" not in bodies:
                    bodies = "\n".join(m["body"] for m in await _matrix_messages(tmp_path))
                    await anyio.sleep(0.1)
            assert f"mention from {stranger.user_id}" in bodies and "come in" in bodies
            assert "direct message" not in bodies
            read = result_text(await mx.call_tool("read", {"room": room_id}))
            assert f"{stranger.user_id}: {agent_id} come in" in read
            assert "status?" in read and "since=" in read
            marker = read.rsplit('since="', 1)[1].split('"', 1)[0]
            await stranger.say(room_id, "one more thing")
            later = result_text(await mx.call_tool("read", {"room": room_id, "since": marker}))
            assert "one more thing" in later and "come in" not in later
            left = await mx.call_tool("leave", {"room": room_id})
            assert not left.is_error, result_text(left)
            assert (await stranger.members(room_id)).get(agent_id) == "leave"

        # Another agent's token does not open ana's matrix surface …
        async with httpx.AsyncClient() as http:
            refused = await http.post(
                f"{host.base_url}/agents/{AGENT}/mcp/matrix",
                headers={
                    "authorization": f"Bearer {host.agents['mx-bob'].token}",
                    "accept": "application/json, text/event-stream",
                },
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
        assert refused.status_code == 401
        # … and an agent without [matrix] has no matrix tools on its own (server-side).
        async with surface_client(host, "mx-carl", "matrix") as carl:
            assert (await carl.list_tools()).tools == []
            denied = await carl.call_tool("send", {"to": op.user_id, "text": "hi"})
        assert denied.is_error and "no Matrix identity" in result_text(denied)
        # bob's account is his own: a different user and token from ana's.
        await _synced(host.agents["mx-bob"].state_dir)
        bob, ana = read_account(host.agents["mx-bob"].state_dir), read_account(state)
        assert bob is not None and ana is not None
        assert bob.user_id != ana.user_id and bob.access_token != ana.access_token

        # Destroying bob deactivates his account: his token is dead on the homeserver.
        async with operator(HivePaths(tmp_path)) as opsock:
            await op_call(opsock, "agent_destroy", agent="mx-bob")
        async with httpx.AsyncClient() as http:
            whoami = await http.get(
                f"{synapse.url}/_matrix/client/v3/account/whoami",
                headers={"Authorization": f"Bearer {bob.access_token}"},
            )
        assert whoami.status_code == 401


async def test_homeserver_down_backs_off_logs_and_recovers(
    tmp_path: Path,
    model_server: ModelServer,
    claude_bin: Path,
    synapse: Synapse,
    people: People,
    caplog: pytest.LogCaptureFixture,
) -> None:
    op = await people("op")
    gate = TcpGate(int(synapse.url.rsplit(":", 1)[1]))
    caplog.set_level(logging.INFO, logger="hyperhive.matrix")
    try:
        matrix_toml, hive = _hive(tmp_path, synapse, gate.url, op.user_id)
        agent_id = f"@{hive}-{AGENT}:{synapse.server_name}"
        model_server.set_script(always(text("ok")))
        seed_home(
            tmp_path,
            {
                AGENT: AgentConfig(
                    matrix=AgentMatrixConfig(enabled=True), env=agent_env(model_server.url)
                )
            },
        )
        async with coordinator_and_host(tmp_path, claude_bin, matrix_toml) as (host, _s, _tg):
            await until(lambda: AGENT in host.agents)
            state = host.agents[AGENT].state_dir
            await _synced(state)
            room_id = await op.dm(agent_id)
            await until(lambda: read_sync_state(state).since and _joined(host), within=30)

            gate.down()
            await op.say(room_id, "sent while the homeserver was unreachable")

            def failures() -> int:
                return sum("matrix sync failed" in r.getMessage() for r in caplog.records)

            await until(lambda: failures() >= 2, within=30)  # retried, not given up
            record = next(r for r in caplog.records if "matrix sync failed" in r.getMessage())
            assert gate.url in record.getMessage() and record.levelno == logging.WARNING
            assert host.agents[AGENT].matrix.view().problem  # type: ignore[union-attr]
            assert await _matrix_messages(tmp_path) == []

            gate.up()
            woken = await _wait_messages(tmp_path, 1)
            assert "sent while the homeserver was unreachable" in woken[0]["body"]
            await until(
                lambda: any("matrix sync works again" in r.getMessage() for r in caplog.records)
            )
            assert host.agents[AGENT].matrix.view().problem is None  # type: ignore[union-attr]
    finally:
        gate.close()


def _joined(host: Any) -> bool:
    """The agent's client has the DM room (it accepted the operator's invitation)."""
    m = host.agents[AGENT].matrix
    client = m._client if m is not None else None
    return client is not None and any(len(r.users) == 2 for r in client.rooms.values())
