"""Logs, turn state and the live turn stream come from the host that holds the agent.

The coordinator reads none of it from disk (#14): it asks the host over the
link. The local host (``hivectl up``'s, here in-process on ``run/hosts.sock``)
goes the same way as a remote one; the hostile and host-loss cases use bare
hosts dialled over the network link, answering (or not) by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.core.dashboard.hostproxy import HostProxy
from hyperhive.core.hostcalls import STREAM_QUEUE, StreamEnded
from hyperhive.errors import NotFound, PermissionDenied, StorageError, Unavailable
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.permissions import ToolGroup
from hyperhive.protocol import LogTail, OpLogsReq
from hyperhive.protocol.hostreads import (
    EventsFollowCmd,
    HostTail,
    LinkAnswerReq,
    LinkStreamEndReq,
    LinkStreamItemsReq,
)
from tests.support.hive import agent, agent_call, coordinator, operator, running_hive, seed_home
from tests.support.hostlink import Pushes, add_host, link_url, registered
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio


def _seed(home: Path, hive_toml: str = "") -> HivePaths:
    return seed_home(
        home,
        dict.fromkeys(("alice", "bob"), AgentConfig(tool_groups=list(ToolGroup.MANAGER_DEFAULT))),
        topology={"alice": None, "bob": "alice"},
        hive_toml=hive_toml,
    )


async def test_logs_tail_and_follow_come_from_the_agents_host(
    tmp_path: Path, claude_bin: Path
) -> None:
    paths = _seed(tmp_path)
    log = paths.logs / "agents" / "bob.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(20)))
    async with running_hive(tmp_path, claude_bin) as (c, _host), operator(c.paths) as op:
        await until(lambda: {"alice", "bob"} <= set(c.hostlink.placement))
        tail = await op.call(OpLogsReq(cmd="logs", agent="bob", lines=2))
        assert tail.lines == ["line 18", "line 19"] and tail.host == "test-host"
        assert tail.cursor is not None and tail.cursor.startswith("test-host@")

        got: list[LogTail] = []

        async def follow() -> None:
            got.append(
                await op.call(
                    OpLogsReq(cmd="logs", agent="bob", lines=1, after=tail.cursor, wait=20)
                )
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            await until(lambda: c.hostlink.calls._asks)  # the host is waiting for a line
            with log.open("a") as fh:
                fh.write("a new line\n")
        assert got[0].lines == ["a new line"]

        # The agent tool reads the same way; a parent may read its child's log only.
        async with agent(c.paths, "alice") as alice:
            seen = await agent_call(alice, "get_logs", agent="bob", lines=1)
            assert isinstance(seen, dict) and seen["lines"] == ["a new line"]
        async with agent(c.paths, "bob") as bob:
            with pytest.raises(PermissionDenied, match="not a descendant"):
                await agent_call(bob, "get_logs", agent="alice")

        # Stopped, its log is still on the host it last ran on.
        await c.hostlink.deactivate("bob", graceful=False)
        after_stop = await op.call(OpLogsReq(cmd="logs", agent="bob", lines=1))
        assert after_stop.lines == ["a new line"]

        # A log the host cannot read is an error with the reason; the host runs on.
        log.rename(log.with_name("bob.old"))
        log.mkdir()
        with pytest.raises(StorageError, match="agent host test-host cannot read it"):
            await op.call(OpLogsReq(cmd="logs", agent="bob", lines=1))
        alice_state = await HostProxy(c.paths.run, c.hostlink).state("alice")
        assert alice_state["agent"] == "alice"


async def test_turn_state_and_live_stream_come_over_the_link(
    tmp_path: Path, claude_bin: Path
) -> None:
    _seed(tmp_path)
    async with running_hive(tmp_path, claude_bin) as (c, host):
        await until(lambda: "bob" in host.agents and host.agents["bob"].connection.up)
        proxy = HostProxy(c.paths.run, c.hostlink)
        state = await proxy.state("bob")
        assert state["agent"] == "bob" and state["turn_state"] == "idle"
        host.agents["bob"].bus.emit("text", text="before the viewer came")

        events: list[dict[str, Any]] = []
        ended: list[str] = []

        async def watch() -> None:
            try:
                async for event in proxy.events("bob"):
                    events.append(event)  # noqa: PERF401 (seen as it arrives, not at the end)
            except StreamEnded as exc:
                ended.append(exc.message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            # History first (what the host kept), then what happens while watching.
            await until(lambda: any(e.get("text") == "before the viewer came" for e in events))
            host.agents["bob"].bus.emit("text", text="live")
            await until(lambda: any(e.get("text") == "live" for e in events))
            await c.hostlink.deactivate("bob", graceful=False)
        assert ended == ["bob stopped on agent host test-host"]
        with pytest.raises(Unavailable, match="bob is not running on any agent host"):
            await proxy.state("bob")
        assert not c.hostlink.calls._streams  # nothing left buffered for a gone viewer


async def test_a_host_answers_only_its_own_asks_and_a_host_gone_ends_the_follow(
    tmp_path: Path,
) -> None:
    _seed(tmp_path, '[hostlink]\nlisten = "127.0.0.1:0"\n')
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        creds = tmp_path / "creds"
        h1_cred, h2_cred = await add_host(op, "h1", creds), await add_host(op, "h2", creds)
        h1_pushes, h2_pushes = Pushes(), Pushes()
        async with registered(LinkTarget(url, "h2", h2_cred), h2_pushes) as h2:
            async with registered(LinkTarget(url, "h1", h1_cred), h1_pushes) as h1:
                await until(lambda: c.hostlink.host_of("alice") is not None)
                holder, other = (h1, h2) if c.hostlink.host_of("alice") == "h1" else (h2, h1)
                holder_pushes = h1_pushes if holder is h1 else h2_pushes
                failures: list[Exception] = []

                async def follow() -> None:
                    try:
                        await op.call(OpLogsReq(cmd="logs", agent="alice", after="", wait=20))
                    except Unavailable as exc:
                        failures.append(exc)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(follow)
                    ask = await until(
                        lambda: next(
                            (f for f in holder_pushes.frames if f.get("cmd") == "log_tail"), None
                        )
                    )
                    assert ask["agent"] == "alice" and ask["wait"] == 20
                    # The other host can neither answer it nor feed a stream it does not own.
                    forged = HostTail(lines=["forged"], cursor="1:1", found=True)
                    with pytest.raises(PermissionDenied, match="was not made of agent host"):
                        await other.call(
                            LinkAnswerReq(cmd="answer", ask=ask["ask"], result=forged.model_dump())
                        )
                    # The holder goes away mid-follow: the follower hears it, at once.
                    await holder.aclose()
        assert len(failures) == 1
        assert "went away (its link to the coordinator closed)" in failures[0].message


async def test_an_answer_that_is_not_the_asks_model_is_the_hosts_failure(
    tmp_path: Path,
) -> None:
    # A log_tail asks for a HostTail: anything else the host sends back is refused here,
    # naming the host, rather than passed on to whoever asked.
    _seed(tmp_path, '[hostlink]\nlisten = "127.0.0.1:0"\n')
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        cred = await add_host(op, "h1", tmp_path / "creds")
        pushes = Pushes()
        async with registered(LinkTarget(link_url(c.paths), "h1", cred), pushes) as h1:
            await until(lambda: c.hostlink.host_of("alice") == "h1")
            failures: list[Exception] = []

            async def tail() -> None:
                try:
                    await op.call(OpLogsReq(cmd="logs", agent="alice", lines=3))
                except Unavailable as exc:
                    failures.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(tail)
                ask = await pushes.command("log_tail", "alice")
                await h1.call(
                    LinkAnswerReq(cmd="answer", ask=ask["ask"], result={"lines": "not a list"})
                )
        assert len(failures) == 1
        assert "agent host h1 answered a tail of alice's log with" in failures[0].message


async def test_stream_batches_are_refused_from_a_host_that_did_not_open_them(
    tmp_path: Path,
) -> None:
    _seed(tmp_path, '[hostlink]\nlisten = "127.0.0.1:0"\n')
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        creds = tmp_path / "creds"
        h1_cred, h2_cred = await add_host(op, "h1", creds), await add_host(op, "h2", creds)
        pushes = Pushes()
        async with (
            registered(LinkTarget(url, "h1", h1_cred), pushes) as h1,
            registered(LinkTarget(url, "h2", h2_cred)) as h2,
        ):
            await until(lambda: c.hostlink.host_of("bob") == "h1")
            proxy = HostProxy(c.paths.run, c.hostlink)
            seen: list[dict[str, Any]] = []
            ended: list[str] = []

            async def watch() -> None:
                try:
                    async for event in proxy.events("bob"):
                        seen.append(event)  # noqa: PERF401 (seen as it arrives)
                except StreamEnded as exc:
                    ended.append(exc.message)

            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                follow = await until(
                    lambda: next(
                        (f for f in pushes.frames if f.get("cmd") == "events_follow"), None
                    )
                )
                stream = follow["stream"]
                with pytest.raises(PermissionDenied, match="not opened on agent host h2"):
                    await h2.call(
                        LinkStreamItemsReq(
                            cmd="stream_items", stream=stream, items=[{"kind": "text", "text": "x"}]
                        )
                    )
                await h1.call(
                    LinkStreamItemsReq(
                        cmd="stream_items", stream=stream, items=[{"kind": "text", "text": "ok"}]
                    )
                )
                await until(lambda: seen)
                await h1.call(LinkStreamEndReq(cmd="stream_end", stream=stream, reason="done"))
            assert seen == [{"kind": "text", "text": "ok"}] and ended == ["done"]
            # A batch for a stream that is over is refused: the host stops feeding it.
            with pytest.raises(Unavailable, match="is closed"):
                await h1.call(LinkStreamItemsReq(cmd="stream_items", stream=stream, items=[]))
        with pytest.raises(NotFound):
            await op.call(OpLogsReq(cmd="logs", agent="nobody"))


async def test_a_reader_that_falls_behind_holds_the_hosts_feed_not_a_buffer(
    tmp_path: Path,
) -> None:
    _seed(tmp_path, '[hostlink]\nlisten = "127.0.0.1:0"\n')
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        cred = await add_host(op, "h1", tmp_path / "creds")
        pushes = Pushes()
        async with registered(LinkTarget(link_url(c.paths), "h1", cred), pushes) as h1:
            await until(lambda: c.hostlink.host_of("bob") == "h1")
            async with c.hostlink.calls.stream(
                "h1", lambda n: EventsFollowCmd(cmd="events_follow", stream=n, agent="bob")
            ) as batches:
                follow = await until(
                    lambda: next(
                        (f for f in pushes.frames if f.get("cmd") == "events_follow"), None
                    )
                )
                stream = follow["stream"]

                def batch(i: int) -> LinkStreamItemsReq:
                    return LinkStreamItemsReq(
                        cmd="stream_items", stream=stream, items=[{"kind": "n", "i": i}]
                    )

                # Nobody reads yet: the queue takes STREAM_QUEUE batches, acknowledged.
                for i in range(STREAM_QUEUE):
                    await h1.call(batch(i))
                acked: list[int] = []
                async with anyio.create_task_group() as tg:

                    async def one_more() -> None:
                        await h1.call(batch(STREAM_QUEUE))
                        acked.append(STREAM_QUEUE)

                    tg.start_soon(one_more)
                    # The next one is held at the full queue, its acknowledgement with it.
                    entry = c.hostlink.calls._streams[stream]
                    await until(lambda: entry.send.statistics().tasks_waiting_send == 1)
                    assert entry.send.statistics().current_buffer_used == STREAM_QUEUE
                    assert acked == []
                    got = [await anext(batches)]  # the reader catches up by one
                got += [await anext(batches) for _ in range(STREAM_QUEUE)]
                assert acked == [STREAM_QUEUE]
                assert [b[0]["i"] for b in got] == list(range(STREAM_QUEUE + 1))
            # The reader left: the host was told to stop feeding it.
            await until(
                lambda: any(
                    f.get("cmd") == "stream_stop" and f.get("stream") == stream
                    for f in pushes.frames
                )
            )
