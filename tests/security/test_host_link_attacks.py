"""A host credential is worth one host's agents, nothing more.

A real coordinator serves the network host link (plain TCP on loopback, which
is the one place it is allowed); hostile hosts dial it with real credentials
made by ``hosts add``. One holds agent alice; the other tries to speak for
her, to register under her host's name, to pass a stale incarnation, and to
send operator requests. Revocation cuts a live link and refuses the next dial.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hyperhive.config import AgentConfig
from hyperhive.errors import PermissionDenied, UnknownCommand
from hyperhive.netlink.dialer import LinkRefused, LinkTarget, dial
from hyperhive.protocol import (
    HostView,
    LinkAbandonReq,
    LinkForwardReq,
    LinkRegisterReq,
    OpHostsRevokeReq,
    OpHostsRotateReq,
    OpLifecycleReq,
    OpSendReq,
    Response,
    encode,
)
from tests.support.hive import coordinator, operator, seed_home
from tests.support.hostlink import (
    Pushes,
    add_host,
    link_url,
    linked_hive,
    registered,
    write_credential,
)
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio

if TYPE_CHECKING:
    from tests.support.forgejo_server import FakeForgejo

HIVE_TOML = '[hostlink]\nlisten = "127.0.0.1:0"\n'


def meta_frame(rid: int = 7) -> dict[str, object]:
    return {"cmd": "get_agent_meta", "id": rid}


async def test_a_host_speaks_only_for_its_own_agents_at_their_incarnation(
    tmp_path: Path,
) -> None:
    async with linked_hive(tmp_path, {"alice": AgentConfig()}, HIVE_TOML) as (c, op, add):
        h1, h2 = await add("h1"), await add("h2")
        pushes = Pushes()
        async with registered(h1, pushes) as link1:
            activation = await pushes.activation("alice")
            incarnation = activation["incarnation"]
            got: Response = await link1.call(
                LinkForwardReq(
                    cmd="forward", agent="alice", incarnation=incarnation, frame=meta_frame()
                )
            )
            assert got.ok and got.id == 7 and isinstance(got.result, dict)
            assert got.result["name"] == "alice"
            # A stale activation (an older incarnation) is refused, even from alice's host.
            with pytest.raises(PermissionDenied, match="stale"):
                await link1.call(
                    LinkForwardReq(
                        cmd="forward",
                        agent="alice",
                        incarnation=incarnation - 1,
                        frame=meta_frame(),
                    )
                )
            async with registered(h2) as link2:
                # h2's valid credential buys nothing for h1's agent.
                with pytest.raises(PermissionDenied, match="held by another host"):
                    await link2.call(
                        LinkForwardReq(
                            cmd="forward",
                            agent="alice",
                            incarnation=incarnation,
                            frame=meta_frame(),
                        )
                    )
                # Nor can a host send operator requests: the link does not speak them.
                with pytest.raises(UnknownCommand):
                    await link2.call_json({"cmd": "hosts_revoke", "name": "h1"})
                with pytest.raises(UnknownCommand):
                    await link2.call_json({"cmd": "spawn", "name": "mallory"})
            # Its body cannot rename it either: h2's credential registers as h2 only.
            async with dial(h2) as link2:
                with pytest.raises(PermissionDenied, match="cannot register as 'h1'"):
                    await link2.call(LinkRegisterReq(cmd="register", host_id="h1"))
            assert c.hostlink.host_of("alice") == "h1"


async def test_wrong_unknown_and_taken_credentials_are_refused_with_reasons(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {}, hive_toml=HIVE_TOML)
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        good = await add_host(op, "h1", tmp_path / "creds")
        forged = write_credential(tmp_path / "creds" / "forged", "hhc1_" + "A" * 43)
        with pytest.raises(LinkRefused, match="401.*credential refused for agent host 'h1'"):
            async with dial(LinkTarget(url, "h1", forged)):
                pass
        with pytest.raises(LinkRefused, match="401.*'ghost'"):
            async with dial(LinkTarget(url, "ghost", good)):
                pass
        async with registered(LinkTarget(url, "h1", good)):
            with pytest.raises(LinkRefused, match="409.*already connected"):
                async with dial(LinkTarget(url, "h1", good)):
                    pass


async def test_revoke_cuts_the_live_link_and_rotate_refuses_the_old_secret(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml=HIVE_TOML)
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        cred = await add_host(op, "h1", tmp_path / "creds")
        target = LinkTarget(url, "h1", cred)
        pushes = Pushes()
        async with registered(target, pushes) as link:
            await pushes.activation("alice")
            assert c.hostlink.host_of("alice") == "h1"
            view: HostView = await op.call(OpHostsRevokeReq(cmd="hosts_revoke", name="h1"))
            assert view.revoked and not view.connected
            await until(lambda: link.closed, 10)  # the coordinator ended it at once
            assert c.hostlink.host_of("alice") is None
        with pytest.raises(LinkRefused, match="403.*revoked"):
            async with dial(target):
                pass
        old = cred.read_text().strip()
        rotated = await op.call(OpHostsRotateReq(cmd="hosts_rotate", name="h1"))
        assert rotated.credential != old
        with pytest.raises(LinkRefused, match="401"):
            async with dial(target):
                pass
        write_credential(cred, rotated.credential)
        async with registered(target):  # the file is read on every dial
            pass
        stored = json.dumps([h.model_dump() for h in await c.host_admin.list()])
        assert rotated.credential not in stored and old not in stored


def forward(agent: str, incarnation: int, frame: dict[str, object], conn: int) -> LinkForwardReq:
    return LinkForwardReq(
        cmd="forward", agent=agent, incarnation=incarnation, frame=frame, conn=conn
    )


async def test_an_abandoned_long_poll_takes_no_mail_and_a_stopping_agent_can_fence(
    tmp_path: Path,
) -> None:
    async with linked_hive(tmp_path, {"alice": AgentConfig()}, HIVE_TOML) as (c, op, add):
        h1, h2 = await add("h1"), await add("h2")
        pushes = Pushes()
        async with registered(h1, pushes) as link, registered(h2) as other:
            inc = (await pushes.activation("alice"))["incarnation"]
            await link.call(forward("alice", inc, {"cmd": "attach", "id": 1}, conn=1))
            # A harness's long-poll, then its connection to the host goes (it crashed):
            # sent raw so the frames reach the coordinator in this order.
            stale = forward("alice", inc, {"cmd": "wait", "id": 2, "timeout": 60}, conn=1)
            await link.send_raw(encode(stale.model_copy(update={"id": 999_999})))
            await link.call(LinkAbandonReq(cmd="abandon", agent="alice", conn=1))
            await op.call(OpSendReq(cmd="send", to="alice", body="for the live reader"))
            fresh = forward("alice", inc, {"cmd": "wait", "id": 3, "timeout": 5}, conn=2)
            woke = await link.call(fresh)
            assert woke.ok and isinstance(woke.result, dict), woke
            assert [m["body"] for m in woke.result["messages"]] == ["for the live reader"]
            # Killed: alice's host may still fence her and end her turn; h2 may not.
            await op.call(OpLifecycleReq(cmd="agent_kill", agent="alice"))
            assert c.hostlink.host_of("alice") is None
            fenced = await link.call(forward("alice", inc, {"cmd": "fence", "id": 4}, conn=2))
            assert fenced.ok, fenced
            with pytest.raises(PermissionDenied, match="held by another host"):
                await other.call(forward("alice", inc, {"cmd": "fence", "id": 5}, conn=1))


@contextmanager
def _forge_hive(home: Path) -> Iterator[FakeForgejo]:
    """A fake Forgejo, and ``home`` seeded with alice and bob in the forge group; only the
    coordinator holds the forge's admin token (a file of its home's)."""
    from hyperhive.permissions import ToolGroup
    from tests.support.forgejo_server import FakeForgejo

    with FakeForgejo() as forgejo:
        forgejo.add_org("agents")
        token_file = home / "forge-admin-token"
        token_file.write_text(forgejo.admin_token)
        token_file.chmod(0o600)
        forge = [*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE]
        seed_home(
            home,
            {"alice": AgentConfig(tool_groups=forge), "bob": AgentConfig(tool_groups=forge)},
            hive_toml=HIVE_TOML
            + f'[forge]\nurl = "{forgejo.url}"\nadmin_token_file = "{token_file}"\n',
        )
        yield forgejo


async def test_a_host_gets_only_its_own_agents_forge_token_never_anothers(
    tmp_path: Path,
) -> None:
    """Issue #14: the coordinator holds the forge's admin token and hands a host only the
    token of an agent it holds, at its incarnation; a host asking for another host's
    agent (or for its own at a stale incarnation) gets nothing and mints nothing."""

    with _forge_hive(tmp_path) as forgejo:
        async with coordinator(tmp_path) as c, operator(c.paths) as op:
            url = link_url(c.paths)
            h1 = LinkTarget(url, "h1", await add_host(op, "h1", tmp_path / "creds"))
            h2 = LinkTarget(url, "h2", await add_host(op, "h2", tmp_path / "creds"))
            pushes = Pushes()
            async with registered(h1, pushes) as link1:
                inc = (await pushes.activation("alice"))["incarnation"]
                await pushes.activation("bob")
                # alice's host gets alice's own token, which works as alice only.
                got = await link1.call(forward("alice", inc, {"cmd": "forge_token", "id": 1}, 1))
                assert got.ok and isinstance(got.result, dict), got
                token = got.result["token"]
                assert [t.sha1 for t in forgejo.tokens_of("alice")] == [token]
                assert forgejo.tokens[token].user == "alice"
                assert forgejo.admin_token not in json.dumps(got.result)
                async with registered(h2) as link2:
                    before = dict(forgejo.tokens)
                    for agent in ("alice", "bob"):
                        with pytest.raises(PermissionDenied, match="held by another host"):
                            await link2.call(
                                forward(agent, inc, {"cmd": "forge_token", "id": 2}, 1)
                            )
                        with pytest.raises(PermissionDenied, match="held by another host"):
                            await link2.call(
                                forward(
                                    agent,
                                    inc,
                                    {"cmd": "forge_create_repo", "name": "x", "id": 3},
                                    1,
                                )
                            )
                        with pytest.raises(PermissionDenied, match="held by another host"):
                            await link2.call(
                                forward(agent, inc, {"cmd": "matrix_account", "id": 5}, 1)
                            )
                    # A stale incarnation of its own agent is refused too.
                    with pytest.raises(PermissionDenied, match="stale"):
                        await link1.call(
                            forward("alice", inc - 1, {"cmd": "forge_token", "id": 4}, 1)
                        )
                    # Nothing was minted or made for the refused asks; alice's token lives.
                    assert forgejo.tokens == before
                    assert "agents/x" not in forgejo.repos


async def test_a_host_cannot_mint_its_agents_tokens_and_repos_without_limit(
    tmp_path: Path,
) -> None:
    """Each forge_token mints a token and each forge_create_repo makes a repository, with
    the hive's admin token: a host hammering them for an agent it holds is refused past
    a few a minute, per agent and kind, before anything is minted or made."""
    from hyperhive.core.state.identities import ASKS_BURST

    with _forge_hive(tmp_path) as forgejo:
        async with coordinator(tmp_path) as c, operator(c.paths) as op:
            h1 = LinkTarget(link_url(c.paths), "h1", await add_host(op, "h1", tmp_path / "creds"))
            pushes = Pushes()
            async with registered(h1, pushes) as link:
                alice = (await pushes.activation("alice"))["incarnation"]
                bob = (await pushes.activation("bob"))["incarnation"]
                for i in range(ASKS_BURST):
                    got = await link.call(
                        forward("alice", alice, {"cmd": "forge_token", "id": i}, 1)
                    )
                    assert got.ok, got
                minted = dict(forgejo.tokens)
                refused = await link.call(
                    forward("alice", alice, {"cmd": "forge_token", "id": 9}, 1)
                )
                assert not refused.ok and refused.error is not None, refused
                assert refused.error.code == "limit_exceeded", refused
                assert re.search(r"too often.*try again in \d+ s", refused.error.message), refused
                assert forgejo.tokens == minted  # the refused ask minted nothing
                # Another agent of the same host has its own allowance.
                got = await link.call(forward("bob", bob, {"cmd": "forge_token", "id": 10}, 1))
                assert got.ok, got
                # Repositories likewise, counted apart from tokens.
                for i in range(ASKS_BURST):
                    frame = {"cmd": "forge_create_repo", "name": f"r{i}", "id": 20 + i}
                    got = await link.call(forward("alice", alice, frame, 1))
                    assert got.ok, got
                frame = {"cmd": "forge_create_repo", "name": "over", "id": 30}
                refused = await link.call(forward("alice", alice, frame, 1))
                assert not refused.ok and refused.error is not None, refused
                assert refused.error.code == "limit_exceeded", refused
                assert "agents/over" not in forgejo.repos
                assert "agents/r0" in forgejo.repos
