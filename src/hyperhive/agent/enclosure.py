"""An agent's enclosure on its host: its directories, system user and sandbox.

Prepared once per activation, before anything of the agent runs
(:meth:`Enclosure.prepare`, blocking: ``useradd``, ``chown`` and ``setfacl``
run on a worker thread), so there is no moment at which a process of the
agent could be started without its isolation. What changes afterwards (the
config repos a reparent brings into reach, a skill that could not be
installed) changes here, through this class's methods.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import anyio

from hyperhive.agent.bwrap import Isolation
from hyperhive.agent.isolation import build_isolation, retarget_isolation
from hyperhive.agent.sandbox import AgentSandbox
from hyperhive.agent.skills import install_skills
from hyperhive.agent.spec import AgentSpec
from hyperhive.credentials import effective_env
from hyperhive.errors import StorageError

__all__ = ["UNSANDBOXED_NOTE", "Enclosure"]

log = logging.getLogger(__name__)

UNSANDBOXED_NOTE = (
    "runtime = unsandboxed: this agent's processes run as the host's own user "
    "with its whole filesystem in reach"
)


class Enclosure:
    """Where and as whom an agent's processes run; every one starts from :meth:`sandbox`."""

    __slots__ = ("_isolation", "_notes", "_reaching")

    def __init__(self, isolation: Isolation | None, notes: Sequence[str] = ()) -> None:
        """``isolation``: bubblewrap's (``None``: unsandboxed); ``notes``: what it lacks."""
        self._isolation = isolation
        self._notes = list(notes)
        # One re-binding of its config repos at a time, each from the descendants of then.
        self._reaching = anyio.Lock()

    @classmethod
    def prepare(cls, spec: AgentSpec) -> Enclosure:
        """Make the agent's dirs; under bubblewrap also its user, ownership and limits;
        install its skills. Blocking: call it on a worker thread."""
        for d in (spec.state_dir, spec.home_dir, spec.work_dir, spec.runtime_dir):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
        if spec.hive.runtime == "bwrap":
            isolation, notes = build_isolation(spec)
            enclosure = cls(isolation, notes)
        else:
            enclosure = cls(None, [UNSANDBOXED_NOTE])
        enclosure._install_skills(spec)
        return enclosure

    @property
    def isolation(self) -> Isolation | None:
        return self._isolation

    @property
    def notes(self) -> tuple[str, ...]:
        """What this enclosure could not do (unsandboxed, a limit not applied, …)."""
        return tuple(self._notes)

    @property
    def owner(self) -> tuple[int, int] | None:
        """The agent's own user and group, when it has them: its files are theirs."""
        iso = self._isolation
        if iso is not None and iso.uid is not None and iso.gid is not None:
            return iso.uid, iso.gid
        return None

    def sandbox(self, spec: AgentSpec, *, agent_socket: bool = True) -> AgentSandbox:
        """The agent's sandbox; ``agent_socket=False`` leaves its coordinator socket out.

        A subagent gets no socket: the socket *is* the agent's identity at the
        coordinator, and a subagent must not act as its parent there.
        """
        # Read per sandbox (so per turn): `hivectl login` needs no restart.
        passthrough = effective_env(spec.paths, os.environ, spec.hive.env_passthrough)
        isolation = self._isolation
        if isolation is not None and not agent_socket:
            isolation = replace(isolation, sockets=())
        return AgentSandbox(
            agent=spec.name,
            work=spec.work_dir,
            home=spec.home_dir,
            state=spec.state_dir,
            env={**passthrough, **spec.config.env, **spec.hive_env()},
            isolation=isolation,
        )

    def give(self, path: Path) -> None:
        """Hand a file the host wrote (claude's config, prompts) to the agent's user."""
        owner = self.owner
        if owner is not None:
            os.chown(path, *owner, follow_symlinks=False)

    async def reach(self, spec: AgentSpec) -> None:
        """The sandbox's writable config repos as they are on disk now (its own and
        ``spec``'s descendants', or this host's mirrors of them), from the next spawn.
        On a worker thread: granting the repos' ACLs runs ``setfacl``, which must not
        stall the host's other agents."""
        async with self._reaching:
            if self._isolation is not None:
                self._isolation = await anyio.to_thread.run_sync(
                    retarget_isolation, spec, self._isolation
                )

    def _install_skills(self, spec: AgentSpec) -> None:
        """The hive's skills for this agent, in its claude config (see :mod:`.skills`)."""
        try:
            install_skills(
                spec.home_dir,
                spec.skills(),
                spec.name,
                spec.paths.home,
                owner=self.owner,
                groups=spec.groups,
                servers=spec.config.servers_for(spec.groups),
            )
        except StorageError as exc:  # a link the agent planted in its own home: its loss
            note = f"hive skills not installed: {exc.message}"
            log.warning("%s: %s", spec.name, note)
            self._notes.append(note)
