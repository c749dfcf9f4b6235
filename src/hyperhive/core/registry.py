"""The agents that exist: their applied configs in ``meta/agents/<name>.toml``.

A config that fails to parse keeps its agent known (mail still queues for
it) but marks it broken with the file, line and fix, so it is never started
on a guess.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hyperhive.atomic import atomic_write_text
from hyperhive.config import AgentConfig, HivePaths, dump_agent_config, load_agent_config
from hyperhive.errors import ConfigError, InvalidName, NotFound
from hyperhive.names import validate_agent_name

__all__ = ["AgentRegistry"]

log = logging.getLogger(__name__)


class AgentRegistry:
    """Applied configs, loaded from disk and kept in memory."""

    def __init__(self, paths: HivePaths) -> None:
        self.paths = paths
        self.configs: dict[str, AgentConfig] = {}
        self.broken: dict[str, str] = {}
        self.reload()

    def reload(self) -> None:
        self.configs.clear()
        self.broken.clear()
        folder = self.paths.meta / "agents"
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*.toml")):
            name = path.stem
            try:
                validate_agent_name(name)
            except InvalidName as exc:
                log.warning("ignoring %s: %s", path, exc.message)
                continue
            try:
                config = self.configs[name] = load_agent_config(path)
            except ConfigError as exc:
                self.broken[name] = exc.message
                log.error(
                    "agent %s has a broken config: %s (fix the file, then restart it)",
                    name,
                    exc.message,
                )
                continue
            for warning in config.warnings:
                log.warning("agent %s: %s (%s)", name, warning, path)

    def warnings(self, name: str) -> list[str]:
        """What was skipped in ``name``'s applied config (stale tool groups, …)."""
        config = self.configs.get(name)
        return list(config.warnings) if config is not None else []

    def known(self) -> list[str]:
        return sorted({*self.configs, *self.broken})

    def exists(self, name: str) -> bool:
        return name in self.configs or name in self.broken

    def require(self, name: str) -> None:
        """``NotFound`` unless ``name`` is an agent (broken configs count: they exist)."""
        if not self.exists(name):
            raise NotFound(f"no agent named {name!r}; `hivectl agents list` shows the hive")

    def config(self, name: str) -> AgentConfig:
        """The applied config; ``NotFound`` or ``ConfigError`` (broken) otherwise."""
        if name in self.configs:
            return self.configs[name]
        if name in self.broken:
            raise ConfigError(self.broken[name])
        raise NotFound(f"no agent named {name!r}; `hivectl agents list` shows the hive")

    def write(self, name: str, config: AgentConfig) -> Path:
        """Store ``name``'s applied config atomically and load it."""
        validate_agent_name(name)
        path = self.paths.applied_config(name)
        atomic_write_text(path, dump_agent_config(config))
        self.configs[name] = config
        self.broken.pop(name, None)
        return path

    def remove(self, name: str) -> None:
        self.paths.applied_config(name).unlink(missing_ok=True)
        self.configs.pop(name, None)
        self.broken.pop(name, None)

    def agent_dir_ready(self, name: str) -> None:
        """Create the agent's private directories (state, home, work)."""
        for d in (
            self.paths.agent_state(name),
            self.paths.agent_home(name),
            self.paths.agent_work(name),
        ):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
