"""The agents that exist: their applied configs, kept in the hive's store.

The store (``MetaLogRepo``) holds each agent's applied ``agent.toml`` text and
logs every change; ``meta/agents/<name>.toml`` is only its exported mirror. A
config that fails to parse keeps its agent known (mail still queues for it)
but marks it broken with the line and the fix, so it is never started on a
guess.
"""

from __future__ import annotations

import logging

from hyperhive.config import AgentConfig, HivePaths, dump_agent_config, parse_agent_config
from hyperhive.errors import ConfigError, InvalidName, NotFound
from hyperhive.names import validate_agent_name
from hyperhive.store.base import MetaLogRepo
from hyperhive.store.rows import DeployEntry

__all__ = ["AgentRegistry"]

log = logging.getLogger(__name__)


class AgentRegistry:
    """Applied configs, loaded from the store and kept in memory.

    Only the active coordinator writes them, and it loads them when it starts,
    so the memory copy cannot go stale.
    """

    def __init__(self, paths: HivePaths, repo: MetaLogRepo) -> None:
        self.paths = paths
        self._repo = repo
        # Only this registry writes these; others ask through the methods below.
        self._configs: dict[str, AgentConfig] = {}
        self._broken: dict[str, str] = {}
        self._texts: dict[str, str] = {}

    async def load(self) -> None:
        texts = await self._repo.configs()
        self._configs.clear()
        self._broken.clear()
        self._texts.clear()
        for name, text in sorted(texts.items()):
            try:
                validate_agent_name(name)
            except InvalidName as exc:
                log.warning("ignoring the applied config of %r: %s", name, exc.message)
                continue
            self._texts[name] = text
            # Named after its mirror file: where an operator reads the applied text.
            where = str(self.paths.applied_config(name))
            try:
                config = self._configs[name] = parse_agent_config(text, where)
            except ConfigError as exc:
                self._broken[name] = exc.message
                log.error(
                    "agent %s has a broken config: %s (commit a fixed agent.toml in its "
                    "config repo and apply it, then restart it)",
                    name,
                    exc.message,
                )
                continue
            for warning in config.warnings:
                log.warning("agent %s: %s (%s)", name, warning, where)

    def applied(self, name: str) -> AgentConfig | None:
        """``name``'s applied config; ``None`` for no agent or a broken config."""
        return self._configs.get(name)

    def broken(self, name: str) -> str | None:
        """Why ``name``'s applied config does not load; ``None`` when it does (or no agent)."""
        return self._broken.get(name)

    def configured(self) -> list[str]:
        """The agents whose applied config loads, by name."""
        return sorted(self._configs)

    def texts(self) -> dict[str, str]:
        """Every agent's applied ``agent.toml`` text (a copy)."""
        return dict(self._texts)

    def warnings(self, name: str) -> list[str]:
        """What was skipped in ``name``'s applied config (stale tool groups, …)."""
        config = self._configs.get(name)
        return list(config.warnings) if config is not None else []

    def known(self) -> list[str]:
        return sorted({*self._configs, *self._broken})

    def exists(self, name: str) -> bool:
        return name in self._configs or name in self._broken

    def require(self, name: str) -> None:
        """``NotFound`` unless ``name`` is an agent (broken configs count: they exist)."""
        if not self.exists(name):
            raise NotFound(f"no agent named {name!r}; `hivectl agents list` shows the hive")

    def config(self, name: str) -> AgentConfig:
        """The applied config; ``NotFound`` or ``ConfigError`` (broken) otherwise."""
        if name in self._configs:
            return self._configs[name]
        if name in self._broken:
            raise ConfigError(self._broken[name])
        raise NotFound(f"no agent named {name!r}; `hivectl agents list` shows the hive")

    def text(self, name: str) -> str:
        """The applied ``agent.toml`` text ("" for an agent that has none)."""
        return self._texts.get(name, "")

    async def history(self, name: str, limit: int) -> list[DeployEntry]:
        """The newest ``limit`` deploy log entries about ``name``, newest first."""
        return await self._repo.log(limit, agent=name)

    async def write(
        self, name: str, config: AgentConfig, message: str, action: str = "apply"
    ) -> DeployEntry:
        """Make ``config`` ``name``'s applied config (one logged entry) and load it."""
        validate_agent_name(name)
        text = dump_agent_config(config)
        entry = await self._repo.apply_config(name, text, message, action)
        self._configs[name] = config
        self._texts[name] = text
        self._broken.pop(name, None)
        return entry

    async def remove(self, name: str, message: str) -> DeployEntry:
        entry = await self._repo.remove_config(name, message)
        self._configs.pop(name, None)
        self._broken.pop(name, None)
        self._texts.pop(name, None)
        return entry
