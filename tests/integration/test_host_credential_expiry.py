"""A host credential's expiry: ``hosts add/rotate --expires``, refused once past it (at
the handshake, and at a live link's next heartbeat), shown by ``hosts list``.

A real coordinator serves the network link on loopback; hosts dial it for real
(``tests.support.hostlink``), and one is a real ``hivectl host`` process whose
console says why it cannot link.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hyperhive.config import AgentConfig
from hyperhive.errors import InvalidRequest, PermissionDenied
from hyperhive.netlink.dialer import LinkRefused, LinkTarget, dial
from hyperhive.protocol import (
    HostCapacity,
    LinkHeartbeatReq,
    LinkRegisterReq,
    OpHostsAddReq,
    OpHostsListReq,
    OpHostsRotateReq,
)
from tests.support.hive import coordinator, operator, seed_home
from tests.support.hostlink import (
    credential_from,
    link_url,
    start_remote_host,
    write_credential,
)
from tests.support.procs import hivectl, stop, wait_until
from tests.support.surfaces import until

pytestmark = pytest.mark.anyio

HIVE_TOML = 'hostlink = { listen = "127.0.0.1:0", lease_seconds = 30 }\n'
CAPACITY = HostCapacity(claude_slots=1, slots_in_use=0, mem_total=1 << 30, mem_available=1 << 29)
SOON = 1.5  # seconds until a short-lived credential expires
# ... one a host must dial, register and beat with before it expires (a slow machine's
# handshake and first calls can take seconds).
LIVE_FOR = 6.0


async def _past(at: float) -> None:
    await anyio.sleep(max(0.0, at - time.time()) + 0.05)


async def test_an_expired_credential_is_refused_a_live_one_taken_and_rotate_clears_it(
    tmp_path: Path, hive_store_url: str | None
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml=HIVE_TOML, store_url=hive_store_url)
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        soon = time.time() + SOON
        short = await op.call(OpHostsAddReq(cmd="hosts_add", name="h1", expires_at=soon))
        assert short.expires_at == soon
        later = time.time() + 86400
        long = await op.call(OpHostsAddReq(cmd="hosts_add", name="h2", expires_at=later))
        h1 = LinkTarget(url, "h1", write_credential(tmp_path / "h1.cred", short.credential))
        h2 = LinkTarget(url, "h2", write_credential(tmp_path / "h2.cred", long.credential))
        with pytest.raises(InvalidRequest, match="not in the future"):
            await op.call(OpHostsAddReq(cmd="hosts_add", name="h3", expires_at=time.time() - 1))
        await _past(soon)
        # Past its expiry: refused at the handshake, with what to do.
        with pytest.raises(LinkRefused) as refused:
            async with dial(h1):
                pass
        message = refused.value.message
        assert "HTTP 401" in message and "credential for agent host 'h1' expired at" in message
        assert "hivectl hosts rotate h1" in message
        # Not yet expired: taken.
        async with dial(h2) as link:
            await link.call(LinkRegisterReq(cmd="register", host_id="h2"))
            await link.call(LinkHeartbeatReq(cmd="heartbeat", capacity=CAPACITY))
        views = {h.name: h for h in await op.call(OpHostsListReq(cmd="hosts_list"))}
        assert views["h1"].credential_expires_at == soon
        assert views["h2"].credential_expires_at == later
        # Rotation issues a credential that never expires (unless told): h1 links again.
        fresh = await op.call(OpHostsRotateReq(cmd="hosts_rotate", name="h1"))
        assert fresh.expires_at is None
        write_credential(tmp_path / "h1.cred", fresh.credential)
        async with dial(h1) as link:
            await link.call(LinkRegisterReq(cmd="register", host_id="h1"))
        views = {h.name: h for h in await op.call(OpHostsListReq(cmd="hosts_list"))}
        assert views["h1"].credential_expires_at is None


async def test_a_connected_host_is_cut_at_its_first_heartbeat_past_the_expiry(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()}, hive_toml=HIVE_TOML)
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        soon = time.time() + LIVE_FOR
        cred = await op.call(OpHostsAddReq(cmd="hosts_add", name="h1", expires_at=soon))
        target = LinkTarget(
            link_url(c.paths), "h1", write_credential(tmp_path / "h1.cred", cred.credential)
        )
        closed = anyio.Event()
        async with dial(target, on_close=closed.set) as link:
            await link.call(LinkRegisterReq(cmd="register", host_id="h1"))
            await link.call(LinkHeartbeatReq(cmd="heartbeat", capacity=CAPACITY))
            assert "h1" in c.hostlink.hosts
            await _past(soon)
            with pytest.raises(PermissionDenied, match="expired at .*hivectl hosts rotate h1"):
                await link.call(LinkHeartbeatReq(cmd="heartbeat", capacity=CAPACITY))
            with anyio.fail_after(10):
                await closed.wait()  # and its link is ended
            # Cut like a revoke: no lease keeps it (booked out as its connection ends).
            await until(lambda: "h1" not in c.hostlink.all_hosts(), 10)


async def test_the_cli_sets_and_shows_the_expiry_and_a_host_console_says_it_expired(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {}, hive_toml=HIVE_TOML)
    async with coordinator(tmp_path) as c:
        run = anyio.to_thread.run_sync
        added = await run(lambda: hivectl(tmp_path, "hosts", "add", "h1", "--expires", "30d"))
        assert "It expires at " in added.stderr
        listed = await run(lambda: hivectl(tmp_path, "hosts", "list"))
        assert "credential expires " in listed.stdout
        bad = await run(
            lambda: hivectl(tmp_path, "hosts", "add", "h2", "--expires", "soonish", check=False)
        )
        assert bad.returncode != 0 and "not a span or a date" in bad.stderr
        past = await run(
            lambda: hivectl(tmp_path, "hosts", "add", "h2", "--expires", "2020-01-01", check=False)
        )
        assert past.returncode != 0 and "not in the future" in past.stderr
        assert await c.store.hosts.get("h2") is None  # refused before anything was made
        # A credential that runs out: the real host process says so on its console.
        async with operator(c.paths) as op:
            soon = time.time() + SOON
            cred = await op.call(OpHostsAddReq(cmd="hosts_add", name="h3", expires_at=soon))
        await _past(soon)
        proc = await run(
            lambda: start_remote_host(
                tmp_path,
                "h3",
                link_url(c.paths),
                write_credential(tmp_path / "h3.cred", cred.credential),
            )
        )
        try:
            log = tmp_path / "host-h3.log"
            await run(
                lambda: wait_until(
                    lambda: "credential for agent host 'h3' expired at" in log.read_text(),
                    30,
                    "the host's console says its credential expired",
                )
            )
            assert "hivectl hosts rotate h3" in log.read_text()
            # Rotated (with a new expiry): the same host links with the new credential.
            rotated = await run(
                lambda: hivectl(tmp_path, "hosts", "rotate", "h3", "--expires", "2w")
            )
            write_credential(tmp_path / "h3.cred", credential_from(rotated.stdout))
            await run(
                lambda: wait_until(
                    lambda: "h3" in c.hostlink.hosts, 60, "the host links after the rotation"
                )
            )
        finally:
            await run(lambda: stop(proc))
