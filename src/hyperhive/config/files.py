"""Reading the config files: TOML parsed and validated, errors naming file and line.

``agent.toml`` is parsed (strictly for a config proposed now) and written back;
``hive.toml`` is read from the home, then the environment's overrides, and the
store URL from wherever it is kept.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import tomli_w
from pydantic import BaseModel, ValidationError

from hyperhive.config.agent import AgentConfig
from hyperhive.config.hive import HiveConfig
from hyperhive.errors import ConfigError
from hyperhive.store.url import has_password, read_url_file

__all__ = [
    "STORE_URL_ENV",
    "dump_agent_config",
    "load_agent_config",
    "load_hive_config",
    "parse_agent_config",
]

STORE_URL_ENV = "HIVE_STORE_URL"


def _loc_line(text: str, loc: tuple[int | str, ...]) -> int | None:
    """Best-effort line of the key a validation error points at."""
    keys = [k for k in loc if isinstance(k, str)]
    lines = text.splitlines()
    for key in reversed(keys):
        pattern = re.compile(rf"^\s*(\[+\s*)?([\w.-]+\.)?{re.escape(key)}\s*(=|\]|\.)")
        for i, line in enumerate(lines, start=1):
            if pattern.search(line):
                return i
    return None


_M = TypeVar("_M", bound=BaseModel)


def _parse_toml(model: type[_M], text: str, path: str) -> _M:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        line = int(match.group(1)) if match else max(1, len(text.splitlines()))
        raise ConfigError(f"not valid TOML: {exc}", path=path, line=line) from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        problem = first["msg"]
        if first["type"] == "extra_forbidden":
            problem = "unknown setting (check the spelling)"
        count = len(exc.errors())
        more = f" (and {count - 1} more problem(s))" if count > 1 else ""
        raise ConfigError(
            f"{where}: {problem}{more}", path=path, line=_loc_line(text, tuple(first["loc"]))
        ) from exc


def parse_agent_config(text: str, path: str = "agent.toml", *, strict: bool = False) -> AgentConfig:
    """Parse an ``agent.toml`` text; ``ConfigError`` names file and line.

    ``strict`` refuses what would otherwise be skipped with a warning (a stale
    tool-group name): right for a config being proposed now, whose author
    can fix it, unlike an applied one that must keep its agent running.
    """
    config = _parse_toml(AgentConfig, text, path)
    if strict and config.warnings:
        line = _loc_line(text, ("tool_groups",))
        raise ConfigError("; ".join(config.warnings), path=path, line=line)
    return config


def load_agent_config(path: Path) -> AgentConfig:
    """Read and parse an ``agent.toml``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    return parse_agent_config(text, str(path))


def dump_agent_config(config: AgentConfig) -> str:
    """Render a config back to TOML (defaults left out, so files stay short)."""
    data: dict[str, Any] = config.model_dump(mode="json", exclude_defaults=True)
    return tomli_w.dumps(data)


def load_hive_config(home: Path, env: Mapping[str, str] | None = None) -> HiveConfig:
    """Read ``<home>/hive.toml`` (absent = defaults), then environment overrides."""
    source = os.environ if env is None else env
    path = home / "hive.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
    config = _parse_toml(HiveConfig, text, str(path))
    override = source.get("HIVE_REMIND_MAX_PENDING_PER_AGENT")
    if override:
        try:
            config = config.model_copy(update={"remind_max_pending": max(1, int(override))})
        except ValueError as exc:
            raise ConfigError(
                f"HIVE_REMIND_MAX_PENDING_PER_AGENT={override!r} is not a whole number"
            ) from exc
    if config.store and has_password(config.store) and _readable_by_others(path):
        raise ConfigError(
            "`store` carries the database password but hive.toml is readable by other "
            "users (agents run as other users): move the URL into a store_url_file "
            "(mode 0600), or chmod 600 hive.toml",
            path=str(path),
        )
    if config.store and config.store_url_file is not None:
        raise ConfigError("set `store` or `store_url_file`, not both", path=str(path))
    # A Secret made from a file keeps its trailing newline in the environment.
    url = (source.get(STORE_URL_ENV) or "").strip()
    where = STORE_URL_ENV
    if not url and config.store_url_file is not None:
        url_file = home / config.store_url_file
        url = read_url_file(url_file)
        where = str(url_file)
    if url:
        try:
            config = HiveConfig.model_validate({**config.model_dump(), "store": url})
        except ValidationError as exc:
            raise ConfigError(f"{where}: {exc.errors()[0]['msg']}") from exc
    return config


def _readable_by_others(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & 0o077)
    except OSError:
        return False
