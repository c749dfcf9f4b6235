"""Shared fixtures: anyio on asyncio, and the scripted model server."""

from __future__ import annotations

import pytest

pytest_plugins = [
    # First: postgres and synapse import it, and a plugin must be registered before its import.
    "tests.support.strays",
    "tests.support.fixtures",
    "tests.support.postgres",
    "tests.support.spans",
    "tests.support.stores",
    "tests.support.store_switch",
    "tests.support.store_reach",
    "tests.support.synapse",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
