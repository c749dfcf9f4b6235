"""Where the store URL (and so the database password) may live in the configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.config import load_hive_config
from hyperhive.errors import ConfigError

URL = "postgresql://hive:s3cret@db.internal:5432/hive"


def test_the_url_comes_from_a_private_store_url_file(tmp_path: Path) -> None:
    (tmp_path / "hive.toml").write_text('store_url_file = "secrets/store.url"\n')
    (tmp_path / "secrets").mkdir()
    url_file = tmp_path / "secrets" / "store.url"
    url_file.write_text(URL + "\n")
    url_file.chmod(0o600)
    assert load_hive_config(tmp_path, {}).store == URL
    # HIVE_STORE_URL (the coordinator's environment) wins over the file.
    env = {"HIVE_STORE_URL": "postgresql://other@/hive?host=/run/pg"}
    assert load_hive_config(tmp_path, env).store == env["HIVE_STORE_URL"]


def test_a_store_url_file_others_can_read_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hive.toml").write_text('store_url_file = "store.url"\n')
    (tmp_path / "store.url").write_text(URL + "\n")
    (tmp_path / "store.url").chmod(0o644)
    with pytest.raises(ConfigError, match=r"readable by others.*chmod 600") as err:
        load_hive_config(tmp_path, {})
    assert "s3cret" not in str(err.value)


def test_a_password_in_a_world_readable_hive_toml_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "hive.toml"
    toml.write_text(f'store = "{URL}"\n')
    toml.chmod(0o644)
    with pytest.raises(ConfigError, match="store_url_file") as err:
        load_hive_config(tmp_path, {})
    assert "s3cret" not in str(err.value)
    toml.chmod(0o600)
    assert load_hive_config(tmp_path, {}).store == URL
    toml.chmod(0o644)
    toml.write_text('store = "postgresql://hive@/hive?host=/run/hive-pg"\n')  # no password
    assert load_hive_config(tmp_path, {}).store is not None


def test_store_and_store_url_file_together_are_refused(tmp_path: Path) -> None:
    (tmp_path / "hive.toml").write_text(
        'store = "postgresql://hive@db/hive"\nstore_url_file = "store.url"\n'
    )
    with pytest.raises(ConfigError, match="not both"):
        load_hive_config(tmp_path, {})


def test_hive_store_url_from_a_secret_file_loses_its_trailing_newline(tmp_path: Path) -> None:
    """A Kubernetes Secret made from a file (`echo URL > secrets/store-url`) reaches the
    environment with the file's newline, which would end up in the database's name."""
    (tmp_path / "hive.toml").write_text("")
    assert load_hive_config(tmp_path, {"HIVE_STORE_URL": URL + "\n"}).store == URL
    assert load_hive_config(tmp_path, {"HIVE_STORE_URL": "  \n"}).store is None
