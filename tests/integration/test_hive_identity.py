"""The hive id comes from the store: coordinators with different homes on one database
agree on it, and an existing hive keeps the id its home already had (its agents'
system users are named after it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.config import AgentConfig
from hyperhive.protocol import AgentMeta
from tests.support.hive import agent, agent_call, coordinator, seed_home

pytestmark = pytest.mark.anyio


async def _served_id(home: Path) -> str:
    """The id a coordinator on ``home`` runs with, as its agents see it too."""
    async with coordinator(home) as c, agent(c.paths, "alice") as alice:
        meta = AgentMeta.model_validate(await agent_call(alice, "get_agent_meta"))
        assert c.hive_id is not None and meta.hive_name == c.hive_id  # hive.toml names none
        return c.hive_id


def _home_id(home: Path) -> str:
    return (home / "hive-id").read_text().strip()


async def test_coordinators_with_different_homes_on_one_database_agree(
    tmp_path: Path, pg_url: str
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for home in (first, second):
        home.mkdir()
        seed_home(home, {"alice": AgentConfig()}, store_url=pg_url)
    # The first coordinator's home has an id (an existing hive): the store keeps it.
    (first / "hive-id").write_text("abc123\n")
    # The second's home holds another id (left from elsewhere): the store's wins.
    (second / "hive-id").write_text("zzz999\n")
    assert await _served_id(first) == "abc123"
    assert await _served_id(second) == "abc123"
    # Its home now agrees: a host on its machine names agents' users the same way.
    assert _home_id(second) == "abc123"
    assert await _served_id(first) == "abc123"


async def test_a_hive_with_an_id_file_keeps_it_and_the_store_then_holds_it(
    tmp_path: Path,
) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()})
    (tmp_path / "hive-id").write_text("keep01\n")
    assert await _served_id(tmp_path) == "keep01"
    assert _home_id(tmp_path) == "keep01"
    # The store holds it now: a home that lost its file gets it back from there.
    (tmp_path / "hive-id").unlink()
    assert await _served_id(tmp_path) == "keep01"
    assert _home_id(tmp_path) == "keep01"


async def test_a_new_hive_makes_one_id_and_keeps_it(tmp_path: Path) -> None:
    seed_home(tmp_path, {"alice": AgentConfig()})
    made = await _served_id(tmp_path)
    assert _home_id(tmp_path) == made
    assert await _served_id(tmp_path) == made
