"""Versions: what changed between an agent's start and its host now, and the host's claude
version, re-read only when its file changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import hyperhive
from hyperhive.agent.versions import HostVersions
from hyperhive.core.fleet.versions import behind
from hyperhive.protocol import NeedsUpdate, Versions, describe
from hyperhive.tools.groups import ToolGroup

pytestmark = pytest.mark.anyio


def test_behind_names_each_version_that_changed() -> None:
    old = Versions(hive="0.1.0", claude="2.1.328")
    assert behind(old, old) == ""
    assert behind(old, Versions(hive="0.1.0", claude="2.1.400")) == "claude 2.1.328 → 2.1.400"
    assert behind(old, Versions(hive="0.2.0", claude=None)) == (
        "hyperhive 0.1.0 → 0.2.0, claude 2.1.328 → unknown"
    )


def test_the_event_says_what_changed_and_how_to_catch_up() -> None:
    event = NeedsUpdate(agent="w1", behind="claude 2.1.328 → 2.1.400")
    manager = describe(event, [ToolGroup.LIFECYCLE])
    assert manager == (
        "[needs_update] w1 runs older versions than its host now has (claude 2.1.328 → "
        "2.1.400). Restart w1 when its work allows; that brings it up to date."
    )
    assert "Ask the operator to restart w1" in describe(event, [ToolGroup.MESSAGING])


def _claude(path: Path, version: str, calls: Path) -> None:
    """A claude that says ``version`` and counts how often it was asked."""
    tmp = path.with_suffix(".new")
    tmp.write_text(f'#!/bin/sh\necho x >> {calls}\necho "{version} (Claude Code)"\n')
    tmp.chmod(0o755)
    os.replace(tmp, path)  # a new file, as an upgrade in place makes


async def test_the_host_rereads_claudes_version_only_when_its_file_changed(
    tmp_path: Path,
) -> None:
    claude, calls = tmp_path / "claude", tmp_path / "calls"
    _claude(claude, "2.1.328", calls)
    versions = HostVersions(claude)
    first = await versions.current()
    assert first == Versions(hive=hyperhive.__version__, claude="2.1.328")
    assert await versions.current() == first
    assert len(calls.read_text().splitlines()) == 1  # asked once: the file did not change
    _claude(claude, "2.1.400", calls)
    assert (await versions.current()).claude == "2.1.400"
    assert len(calls.read_text().splitlines()) == 2
    assert (await HostVersions(None).current()).claude is None
