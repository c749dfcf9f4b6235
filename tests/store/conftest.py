"""The ``store`` fixture: every contract test runs once per backend in ``BACKENDS``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hyperhive.store import Store
from tests.support.stores import BACKENDS, Backend


@pytest.fixture(params=sorted(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with BACKENDS[request.param](request, tmp_path) as b:
        yield b


@pytest.fixture
async def store(backend: Backend) -> AsyncIterator[Store]:
    s = await backend.open()
    try:
        yield s
    finally:
        await s.close()
