"""``[hostlink]`` in hive.toml: where the coordinator listens for remote agent hosts."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["HostLinkConfig", "split_address"]


def split_address(address: str) -> tuple[str, int]:
    """``"HOST:PORT"`` (``"[v6]:PORT"`` for IPv6) as ``(host, port)``; ``ValueError`` if not."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f'{address!r} is not HOST:PORT (e.g. "0.0.0.0:7443")')
    return host.removeprefix("[").removesuffix("]"), int(port)


class HostLinkConfig(BaseModel):
    """Remote agent hosts dial ``listen``; TLS with the operator's cert and key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listen: str = Field(description='HOST:PORT to listen on, e.g. "0.0.0.0:7443".')
    tls_cert: Path | None = Field(default=None, description="PEM certificate (chain) file.")
    tls_key: Path | None = Field(default=None, description="PEM private key file.")
    lease_seconds: float = Field(
        default=15.0,
        ge=1.0,
        le=3600.0,
        description=(
            "How long a remote host holds its agents without a heartbeat (it sends one "
            "every third of this); past it they show as lost."
        ),
    )

    @field_validator("listen")
    @classmethod
    def _address(cls, v: str) -> str:
        split_address(v)
        return v

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None

    def problem(self) -> str | None:
        """Why the coordinator must refuse to start with this link (``None``: fine)."""
        if (self.tls_cert is None) != (self.tls_key is None):
            return "[hostlink] needs both tls_cert and tls_key (or neither, on loopback only)"
        host, _ = split_address(self.listen)
        if self.tls_cert is None and not _loopback(host):
            return (
                f"[hostlink] listen = {self.listen!r} is not a loopback address, and plain TCP "
                "would carry host credentials and every agent's frames in the clear: set "
                "tls_cert and tls_key (PEM files), or listen on 127.0.0.1"
            )
        return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
