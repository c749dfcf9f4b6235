"""The dashboard URL printed and written to dashboard.json is one an operator can open."""

from __future__ import annotations

import socket

from hyperhive.core.api.dashboard.server import dashboard_url


def test_a_wildcard_bind_is_named_by_the_machine_not_the_wildcard() -> None:
    name = socket.gethostname()
    assert dashboard_url("0.0.0.0", 8080) == f"http://{name}:8080"  # noqa: S104
    assert "::" not in dashboard_url("::", 8080)


def test_specific_addresses_are_kept_and_ipv6_is_bracketed() -> None:
    assert dashboard_url("127.0.0.1", 7777) == "http://127.0.0.1:7777"
    assert dashboard_url("::1", 7777) == "http://[::1]:7777"
