"""One active agent inside the agent host: its resolved permissions and handles.

Tool groups and capabilities are resolved once, here, from the applied
config, and read by everything that serves the agent (its harness, its MCP
surfaces, its subagents): one resolution, nothing to drift.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio

from hyperhive.agent.admission import Admission
from hyperhive.agent.bwrap import Isolation
from hyperhive.agent.events import EventsBus
from hyperhive.agent.isolation import build_isolation, retarget_isolation
from hyperhive.agent.metacache import MetaCache
from hyperhive.agent.prompt import render_system_prompt
from hyperhive.agent.sandbox import AgentSandbox
from hyperhive.agent.skills import install_skills, skills_for
from hyperhive.client import RpcClient, call_once
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from hyperhive.credentials import effective_env
from hyperhive.errors import StorageError
from hyperhive.forge.identity import forge_env, git_credential_config
from hyperhive.permissions import CAPABILITIES_ENV, TOOL_GROUPS_ENV, Capability, ToolGroup
from hyperhive.protocol import Req

if TYPE_CHECKING:
    from hyperhive.bash.tasks import TaskManager
    from hyperhive.forge.agent import AgentForge
    from hyperhive.matrix.agent import AgentMatrix
    from hyperhive.subagent.session import SubagentManager

__all__ = ["AgentRuntime"]

R = TypeVar("R")
# A one-off call that gets no answer in this long is reported as the coordinator being away.
CALL_TIMEOUT = 30.0
# How long a tool call made while the agent's directories are prepared waits for them.
SERVICES_WAIT = 30.0
log = logging.getLogger(__name__)


@dataclass
class AgentRuntime:
    name: str
    config: AgentConfig
    parent: str | None
    paths: HivePaths
    hive: HiveConfig
    groups: tuple[ToolGroup, ...] = ()
    capabilities: tuple[Capability, ...] = ()
    descendants: tuple[str, ...] = ()
    isolation: Isolation | None = None
    isolation_notes: list[str] = field(default_factory=list)
    prepared: bool = False
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    bus: EventsBus = field(default_factory=EventsBus)
    rpc: RpcClient | None = None
    incarnation: int | None = None  # the coordinator's activation this runtime serves
    stopping: anyio.Event = field(default_factory=anyio.Event)
    killed: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    base_url: str = ""
    claude_pid: int | None = None  # the turn's claude, while one runs
    needs_login: bool = False  # held: no turns until its credentials change
    # The host's claude slots, shared by all its agents (unlimited when run alone).
    admission: Admission = field(default_factory=Admission)
    # Per-agent services the host runs beside the harness, while the agent is active.
    bash_tasks: TaskManager | None = None
    subagents: SubagentManager | None = None
    # Set once bash_tasks and subagents serve: a tool call that arrives while the host is
    # still preparing the agent's directories waits for it rather than failing.
    services_up: anyio.Event = field(default_factory=anyio.Event)
    # Its forge identity (None: no forge group, or no forge on this host: forge_problem says).
    forge: AgentForge | None = None
    forge_problem: str | None = None
    # Its Matrix account (None: [matrix] not enabled, or no homeserver: matrix_problem says).
    matrix: AgentMatrix | None = None
    matrix_problem: str | None = None
    # Its own get_agent_meta, until the coordinator pushes a change (see metacache).
    meta: MetaCache = field(default_factory=MetaCache)
    # One re-binding of its config repos at a time, each from the descendants of then.
    reaching: anyio.Lock = field(default_factory=anyio.Lock)

    def __post_init__(self) -> None:
        if not self.groups:
            self.groups = tuple(self.config.tool_groups)
        if not self.capabilities:
            self.capabilities = tuple(self.config.capabilities)

    async def services_ready(self, within: float = SERVICES_WAIT) -> None:
        """Wait (bounded) until the agent's services serve, or it stops."""
        with anyio.move_on_after(within):
            async with anyio.create_task_group() as tg:

                async def stopped() -> None:
                    await self.stopping.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stopped)
                await self.services_up.wait()
                tg.cancel_scope.cancel()

    @property
    def runtime_dir(self) -> Path:
        """Private (0700) dir for the per-turn claude config files."""
        return self.paths.agent_runtime(self.name)

    @property
    def state_dir(self) -> Path:
        return self.paths.agent_state(self.name)

    async def call(self, request: Req[R], within: float = CALL_TIMEOUT) -> R:
        """Forward a request to the coordinator over this agent's own socket.

        The harness's connection is used while it is up. While it is down — the
        host just started, or the coordinator restarted in the middle of a turn
        and the harness reconnects only once the turn is over — a one-off
        connection to the same socket: a tool call must not fail, or a todo
        retry for minutes, on a connection that is known to be dead.
        """
        rpc = self.rpc
        if rpc is not None and not rpc.closed:
            return await rpc.call(request)
        return await call_once(self.paths.agent_sock(self.name), request, within)

    def hive_env(self) -> dict[str, str]:
        """``HIVE_*`` identity for every process spawned for the agent."""
        env = {
            "HIVE_AGENT": self.name,
            TOOL_GROUPS_ENV: ",".join(g.value for g in self.groups),
            CAPABILITIES_ENV: ",".join(c.value for c in self.capabilities),
            "HIVE_AGENT_SOCKET": str(self.paths.agent_sock(self.name)),
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

    def sandbox(self, *, agent_socket: bool = True) -> AgentSandbox:
        """The agent's sandbox; ``agent_socket=False`` leaves its coordinator socket out.

        A subagent gets no socket: the socket *is* the agent's identity at the
        coordinator, and a subagent must not act as its parent there.
        """
        # Read per sandbox (so per turn): `hivectl login` needs no restart.
        passthrough = effective_env(self.paths, os.environ, self.hive.env_passthrough)
        isolation = self.isolation
        if isolation is not None and not agent_socket:
            isolation = replace(isolation, sockets=())
        return AgentSandbox(
            agent=self.name,
            work=self.paths.agent_work(self.name),
            home=self.paths.agent_home(self.name),
            state=self.state_dir,
            env={**passthrough, **self.config.env, **self.hive_env()},
            isolation=isolation,
        )

    def prepare_dirs(self) -> None:
        """Create the agent's dirs; under bubblewrap also its user, ownership and limits."""
        if self.prepared:
            return
        self.prepared = True
        own = (self.state_dir, self.paths.agent_home(self.name), self.paths.agent_work(self.name))
        for d in (*own, self.runtime_dir):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.hive.runtime == "bwrap":
            self.isolation, self.isolation_notes = build_isolation(self)
        else:
            self.isolation = None
            self.isolation_notes = [
                "runtime = unsandboxed: this agent's processes run as the host's own user "
                "with its whole filesystem in reach"
            ]
        self.install_skills()

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
            str(self.paths.agent_work(self.name)),
            self.config.system_prompt,
            servers=self.config.servers_for(self.groups),
            hive_home=str(self.paths.home),
        )

    def move(self, parent: str | None, descendants: tuple[str, ...]) -> None:
        """A reparent, without a restart: the next turn, task or subagent sees it.

        The system prompt and ``HIVE_*`` env are built per spawn from these
        fields; the sandbox's writable config repos follow the descendants once
        :meth:`reach_config_repos` has run (its host starts it).
        """
        self.parent = parent
        self.descendants = descendants
        self.meta.forget()

    async def reach_config_repos(self) -> None:
        """The sandbox's writable config repos as they are on disk now (its own and its
        descendants', or this host's mirrors of them), from the next spawn: one made
        after it started (its host seeds a new agent's repo after activating it) is
        bound from then on. On a worker thread: granting it the repos' ACLs runs
        ``setfacl``, which must not stall the host's other agents."""
        async with self.reaching:
            if self.isolation is not None:
                self.isolation = await anyio.to_thread.run_sync(
                    retarget_isolation, self, self.isolation
                )

    def install_skills(self) -> None:
        """The hive's skills for this agent, in its claude config (see :mod:`.skills`)."""
        iso = self.isolation
        owner = None
        if iso is not None and iso.uid is not None and iso.gid is not None:
            owner = (iso.uid, iso.gid)
        try:
            install_skills(
                self.paths.agent_home(self.name),
                self.skills(),
                self.name,
                self.paths.home,
                owner=owner,
                groups=self.groups,
                servers=self.config.servers_for(self.groups),
            )
        except StorageError as exc:  # a link the agent planted in its own home: its loss
            note = f"hive skills not installed: {exc.message}"
            log.warning("%s: %s", self.name, note)
            self.isolation_notes.append(note)

    def give(self, path: Path) -> None:
        """Hand a file the host wrote (claude's config, prompts) to the agent's user."""
        iso = self.isolation
        if iso is not None and iso.uid is not None and iso.gid is not None:
            os.chown(path, iso.uid, iso.gid, follow_symlinks=False)
