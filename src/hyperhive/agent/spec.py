"""What one activation of an agent on its host is, as values: an :class:`AgentSpec`.

Pure module: no I/O. The spec is frozen; a change (a reparent, a re-sent
activation's incarnation) is a new spec, handed to the agent whole through
:meth:`hyperhive.agent.active.ActiveAgent.respec`. Everything derived from it
(tool groups, ``HIVE_*`` env, system prompt, skills, paths) is computed here,
from the spec alone, so the harness, the MCP surfaces and the subagents of an
agent read one resolution and nothing can drift.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from hyperhive.agent.prompt import render_system_prompt
from hyperhive.agent.skills import skills_for
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.forge.identity import forge_env, git_credential_config
from hyperhive.permissions import CAPABILITIES_ENV, TOOL_GROUPS_ENV, Capability, ToolGroup
from hyperhive.protocol import ActivateCmd

__all__ = ["AgentSpec"]


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """Who the agent is, what it may do, where it lives and where it sits in the tree.

    ``groups`` and ``capabilities`` are resolved once, here, from ``config``.
    ``incarnation``: the coordinator's activation this spec serves (``None``
    outside a host: ``hivectl choom``, tests).
    """

    name: str
    config: AgentConfig
    paths: HivePaths
    hive: HiveConfig
    parent: str | None = None
    descendants: tuple[str, ...] = ()
    incarnation: int | None = None
    groups: tuple[ToolGroup, ...] = field(init=False)
    capabilities: tuple[Capability, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(self.config.tool_groups))
        object.__setattr__(self, "capabilities", tuple(self.config.capabilities))

    @classmethod
    def of(cls, cmd: ActivateCmd, paths: HivePaths, hive: HiveConfig) -> AgentSpec:
        """The spec a coordinator's ``activate`` asks for, on a host of ``paths``."""
        return cls(
            name=cmd.agent,
            config=cmd.config,
            paths=paths,
            hive=hive,
            parent=cmd.parent,
            descendants=tuple(cmd.descendants),
            incarnation=cmd.incarnation,
        )

    def placed(self, parent: str | None, descendants: tuple[str, ...]) -> AgentSpec:
        """This spec at another place in the tree (a reparent: no restart)."""
        return dataclasses.replace(self, parent=parent, descendants=descendants)

    def same_place(self, other: AgentSpec) -> bool:
        return (self.parent, self.descendants) == (other.parent, other.descendants)

    # ---- where it lives ---------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """Its durable notes (``/state`` in the sandbox)."""
        return self.paths.agent_state(self.name)

    @property
    def runtime_dir(self) -> Path:
        """Private (0700) dir for the per-turn claude config files."""
        return self.paths.agent_runtime(self.name)

    @property
    def home_dir(self) -> Path:
        return self.paths.agent_home(self.name)

    @property
    def work_dir(self) -> Path:
        return self.paths.agent_work(self.name)

    @property
    def socket(self) -> Path:
        """Its coordinator socket: its identity (spec 002)."""
        return self.paths.agent_sock(self.name)

    @property
    def log_file(self) -> Path:
        return self.paths.logs / "agents" / f"{self.name}.log"

    @property
    def model(self) -> str | None:
        """The model its turns use (its own, else the hive's default)."""
        return self.config.model or self.hive.default_model

    # ---- what it is told ---------------------------------------------------------------

    def hive_env(self) -> dict[str, str]:
        """``HIVE_*`` identity for every process spawned for the agent."""
        env = {
            "HIVE_AGENT": self.name,
            TOOL_GROUPS_ENV: ",".join(g.value for g in self.groups),
            CAPABILITIES_ENV: ",".join(c.value for c in self.capabilities),
            "HIVE_AGENT_SOCKET": str(self.socket),
            "HYPERHIVE_STATE_DIR": str(self.state_dir),
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": f"{self.name}@hyperhive",
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": f"{self.name}@hyperhive",
        }
        if self.parent:
            env["HIVE_PARENT"] = self.parent
        # Its own and its descendants' config repos belong to other users; git
        # inside the sandbox must still work on them, and sign as the agent.
        git = [("safe.directory", "*")]
        forge = self.hive.forge
        if forge is not None and ToolGroup.FORGE in self.groups:
            env.update(forge_env(forge, self.name))
            git.extend(git_credential_config(forge))
        env["GIT_CONFIG_COUNT"] = str(len(git))
        for i, (key, value) in enumerate(git):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        return env

    def skills(self) -> list[str]:
        """The hive skills this agent is given (installed at activation, named in its prompt)."""
        return skills_for(self.groups, self.config.servers_for(self.groups))

    def system_prompt(self) -> str:
        """The text appended to claude's system prompt on every turn."""
        return render_system_prompt(
            self.name,
            self.parent,
            self.groups,
            str(self.state_dir),
            str(self.work_dir),
            self.config.system_prompt,
            servers=self.config.servers_for(self.groups),
            hive_home=str(self.paths.home),
        )
