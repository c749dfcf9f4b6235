"""The hive id names the agents' system users: made once, kept, never silently replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.config import HivePaths
from hyperhive.errors import ConfigError
from hyperhive.sysusers import hive_id


def test_a_corrupt_hive_id_is_refused_in_words(tmp_path: Path) -> None:
    paths = HivePaths(tmp_path)
    first = hive_id(paths)
    assert hive_id(paths) == first and (tmp_path / "hive-id").read_text().strip() == first
    (tmp_path / "hive-id").write_text("../../etc\n")
    with pytest.raises(ConfigError, match="not a hive id"):
        hive_id(paths)
    assert (tmp_path / "hive-id").read_text() == "../../etc\n"  # nothing overwritten
