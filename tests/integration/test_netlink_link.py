"""Starting the network host link, and a host's view of a link that cannot be made."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from hyperhive.config import HivePaths
from hyperhive.core.coordinator import Coordinator
from hyperhive.errors import ConfigError, Unavailable
from hyperhive.netlink.dialer import LinkTarget, dial
from tests.support.hive import coordinator, hive_config, operator, seed_home
from tests.support.hostlink import add_host, link_tls, link_url, registered

pytestmark = pytest.mark.anyio


async def test_plain_tcp_off_loopback_is_refused_at_start_with_the_reason(tmp_path: Path) -> None:
    seed_home(tmp_path, {}, hive_toml='[hostlink]\nlisten = "0.0.0.0:0"\n')
    coord = await Coordinator.open(HivePaths(tmp_path), hive_config(tmp_path))
    with pytest.raises(ConfigError, match="not a loopback address.*tls_cert and tls_key"):
        await coord.run()
    assert not HivePaths(tmp_path).host_sock.exists()  # refused before serving anything


async def test_a_silent_coordinator_url_is_unavailable_with_the_address(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on (bound, never listening)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        cred = tmp_path / "c"
        cred.touch(mode=0o600)
        cred.write_text("hhc1_x\n")
        target = LinkTarget(f"ws://127.0.0.1:{port}", "h1", cred)
        with pytest.raises(
            Unavailable, match=rf"cannot reach the coordinator at ws://127.0.0.1:{port}/hostlink"
        ):
            async with dial(target):
                pass
    with pytest.raises(ConfigError, match="must be a wss://HOST:PORT URL"):
        LinkTarget("https://x:1", "h1", cred).link_url  # noqa: B018


async def test_tls_link_verifies_the_coordinators_certificate(tmp_path: Path) -> None:
    link_tls(tmp_path, "127.0.0.1")
    seed_home(
        tmp_path,
        {},
        hive_toml='[hostlink]\nlisten = "127.0.0.1:0"\n'
        'tls_cert = "link.pem"\ntls_key = "link.pem"\n',
    )
    async with coordinator(tmp_path) as c, operator(c.paths) as op:
        url = link_url(c.paths)
        assert url.startswith("wss://127.0.0.1:")
        cred = await add_host(op, "h1", tmp_path / "creds")
        # Without the operator's CA the self-signed certificate is refused: no credential
        # is ever sent to a coordinator the host cannot verify.
        with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED|certificate verify"):
            async with dial(LinkTarget(url, "h1", cred)):
                pass
        async with registered(LinkTarget(url, "h1", cred, tmp_path / "ca.pem")):
            assert "h1" in c.hostlink.hosts  # registered over TLS, with the CA
