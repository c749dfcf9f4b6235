"""A coordinator that restarts mid-move resolves it from the store: a move not yet
committed is undone (the agent starts on its source), a committed one starts the
agent on its target and has the returning source drop its copy. Move reports are
taken only from the move's own hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.config import AgentConfig, HivePaths
from hyperhive.errors import Conflict
from hyperhive.netlink.dialer import LinkTarget
from hyperhive.protocol import LinkMoveDroppedReq, LinkMovePutReq
from tests.support.hive import coordinator, operator, seed_home
from tests.support.hostlink import Pushes, add_host, link_url, registered
from tests.support.stores import open_hive_store
from tests.support.surfaces import until_async

pytestmark = pytest.mark.anyio


async def _store_edit(home: Path, *steps: str) -> None:
    store = await open_hive_store(HivePaths(home))
    try:
        await store.placements.begin_move("a", "a1", "h2")
        if "copying" in steps:
            await store.placements.move_phase("a", "a1", "copying")
        if "commit" in steps:
            await store.placements.commit_move("a", "a1")
    finally:
        await store.close()


async def _move_phase(home: Path) -> str | None:
    store = await open_hive_store(HivePaths(home), readonly=True)
    try:
        row = await store.placements.get("a")
        assert row is not None
        return row.move_phase
    finally:
        await store.close()


async def test_a_restart_undoes_an_uncommitted_move_and_finishes_a_committed_one(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {"a": AgentConfig()}, hive_toml='[hostlink]\nlisten = "127.0.0.1:0"\n')
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        creds = {n: await add_host(op, n, tmp_path / "creds") for n in ("h1", "h2")}
        first = Pushes()
        async with registered(LinkTarget(url, "h1", creds["h1"]), first):
            await first.activation("a")

    # The coordinator died mid-copy: on restart, the agent belongs on its source.
    await _store_edit(tmp_path, "copying")
    async with coordinator(tmp_path) as c:
        url = link_url(c.paths)
        h1 = Pushes()
        async with registered(LinkTarget(url, "h1", creds["h1"]), h1):
            assert (await h1.activation("a"))["agent"] == "a"
            assert await _move_phase(tmp_path) is None
            assert c.hostlink.host_of("a") == "h1"

    # It died after the commit: the agent runs on the target, the source drops its copy.
    await _store_edit(tmp_path, "copying", "commit")
    async with coordinator(tmp_path) as c:
        url = link_url(c.paths)
        h1, h2 = Pushes(), Pushes()
        async with (
            registered(LinkTarget(url, "h2", creds["h2"]), h2) as link2,
            registered(LinkTarget(url, "h1", creds["h1"]), h1) as link1,
        ):
            await h2.activation("a")
            drop = await h1.command("move_drop", "a")
            assert drop["move_id"] == "a1"
            assert not any(f.get("cmd") == "activate" for f in h1.frames)  # never both
            # Only the move's source may report the drop; nobody may upload to a move
            # that is not in progress.
            with pytest.raises(Conflict, match="no move a1 of a is waiting for 'h2'"):
                await link2.call(LinkMoveDroppedReq(cmd="move_dropped", agent="a", move_id="a1"))
            with pytest.raises(Conflict, match="no move a1 of a is in progress"):
                await link1.call(
                    LinkMovePutReq(
                        cmd="move_put", agent="a", move_id="a1", offset=0, data="", sha256="0" * 64
                    )
                )
            assert await _move_phase(tmp_path) == "cleanup"
            await link1.call(LinkMoveDroppedReq(cmd="move_dropped", agent="a", move_id="a1"))
            await until_async(lambda: _no_move(tmp_path), 10)
            assert c.hostlink.host_of("a") == "h2"


async def _no_move(home: Path) -> bool:
    return await _move_phase(home) is None
