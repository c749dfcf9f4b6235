"""Pytest fixtures shared by the suites (loaded from ``tests/conftest.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.model_server import ModelServer

CLAUDE_BIN_ENV = "HIVE_TEST_CLAUDE_BIN"
_REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """A started scripted model server; set its script with ``set_script``."""
    with ModelServer() as server:
        yield server


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """The real claude CLI: ``$HIVE_TEST_CLAUDE_BIN``, else the project's npm install."""
    path = Path(os.environ.get(CLAUDE_BIN_ENV) or _REPO / "node_modules" / ".bin" / "claude")
    if not os.access(path, os.X_OK):
        # A failure, not a skip: the e2e suite is the point of installing it.
        pytest.fail(f"claude CLI not found at {path}; run `npm ci` (or set {CLAUDE_BIN_ENV})")
    return path
