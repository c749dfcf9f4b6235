"""The agent host's side of the network link: dial out, authenticate, speak JSON frames.

The host opens no port: it connects to the coordinator's ``wss://`` URL with
its name and credential in the handshake, then uses the same RPC client and
pushed commands as a local host over ``run/hosts.sock``.
"""

from __future__ import annotations

import os
import ssl
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from hyperhive.client import RpcClient, over_stream
from hyperhive.errors import ConfigError, HiveError, Unavailable
from hyperhive.framing import DEFAULT_MAX_FRAME
from hyperhive.netlink.wsstream import ENVELOPE_BYTES, HOST_HEADER, LINK_PATH, WsStream
from hyperhive.secretfile import systemd_credential

__all__ = ["LinkRefused", "LinkTarget", "dial", "read_credential"]


class LinkRefused(HiveError):
    """The coordinator refused this host's handshake (credential, revoked, name taken)."""

    code = "link_refused"


@dataclass(frozen=True, slots=True)
class LinkTarget:
    """Where a remote host dials, and as whom."""

    url: str
    name: str
    credential_file: Path
    ca_file: Path | None = None

    @property
    def link_url(self) -> str:
        """``url`` with the link's path (an operator may give just ``wss://host:port``)."""
        parts = urlsplit(self.url)
        if parts.scheme not in ("ws", "wss"):
            raise ConfigError(
                f"--coordinator {self.url!r} must be a wss://HOST:PORT URL (ws:// only to a "
                "coordinator listening on loopback)"
            )
        return urlunsplit(parts._replace(path=parts.path.rstrip("/") or LINK_PATH))


def read_credential(path: Path, euid: int | None = None) -> str:
    """The credential in ``path``, refused unless only this user can read it."""
    uid = os.geteuid() if euid is None else euid
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the host credential file {path}: {exc.strerror or exc}"
        ) from exc
    if (info.st_uid != uid or info.st_mode & 0o077) and not systemd_credential(path):
        raise ConfigError(
            f"the host credential file {path} is mode {stat.S_IMODE(info.st_mode):o} owned "
            f"by uid {info.st_uid}: it must be readable by this host's user alone (uid {uid}); "
            f"fix: chown {uid} {path} && chmod 600 {path}"
        )
    if not text:
        raise ConfigError(
            f"the host credential file {path} is empty: put in it what "
            "`hivectl hosts add NAME` printed"
        )
    return text


def _tls(target: LinkTarget, url: str) -> ssl.SSLContext | None:
    if urlsplit(url).scheme != "wss":
        return None
    try:
        context = ssl.create_default_context(cafile=target.ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the CA file {target.ca_file}: {exc}") from exc
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


@asynccontextmanager
async def dial(
    target: LinkTarget,
    max_frame: int = DEFAULT_MAX_FRAME,
    on_push: Callable[[dict[str, Any]], None] | None = None,
    on_close: Callable[[], None] | None = None,
) -> AsyncIterator[RpcClient]:
    """Connect and authenticate; ``LinkRefused`` with the coordinator's reason, or
    ``Unavailable`` if it cannot be reached. The credential file is read afresh on
    every dial, so a rotated credential is picked up without a restart."""
    url = target.link_url
    credential = read_credential(target.credential_file)
    try:
        ws = await connect(
            url,
            additional_headers={"Authorization": f"Bearer {credential}", HOST_HEADER: target.name},
            ssl=_tls(target, url),
            max_size=max_frame + ENVELOPE_BYTES,
            compression=None,
            open_timeout=10,
            close_timeout=2,
            proxy=None,
        )
    except InvalidStatus as exc:
        response = exc.response
        reason = response.body.decode(errors="replace").strip() if response.body else ""
        raise LinkRefused(
            f"the coordinator at {url} refused agent host {target.name!r} "
            f"(HTTP {response.status_code}): {reason or response.reason_phrase}"
        ) from exc
    except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
        raise Unavailable(
            f"cannot reach the coordinator at {url}: {exc or type(exc).__name__}"
        ) from exc
    async with over_stream(WsStream(ws), max_frame, on_push, on_close) as client:
        yield client
