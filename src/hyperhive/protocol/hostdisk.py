"""What the coordinator asks of the host that holds an agent's directories, over the link.

An agent's proposed config repo, its state, home and workspace, and its
system user are on the disk (and in the user database) of its host, never
the coordinator's (#14: no shared disk). The coordinator asks that host —
the agent's durable placement, even while the agent is stopped — with the
one-answer asks (:class:`~hyperhive.protocol.hostreads.Ask`) of
:mod:`hyperhive.protocol.hostreads`, each naming the model of its answer:

- ``repo_write``: make the agent's directories and proposed repo if missing,
  and commit ``agent.toml`` (or, ``missing_only``, only seed a repo not there);
- ``repo_show``: a file of the proposed repo at a commit;
- ``repos_missing``: which of some agents have no proposed repo on this host;
- ``repo_acl``: who may write each proposed repo (the agent and its ancestors);
- ``agent_trash``: move a destroyed agent's directories to the host's trash and
  remove its system user;
- ``mirrors_keep`` / ``mirror_write``: the *mirrors* a host keeps of config repos
  held on other hosts, for the ancestors it runs (``core/configmirrors.py``):
  which it keeps (any other goes) and who may write each, then a mirror's
  ``agent.toml`` brought to its real repo's head. ``repo_show`` with ``mirror``
  reads a commit an ancestor made in one.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hyperhive.protocol.base import _Out
from hyperhive.protocol.hostreads import AGENT_NAME, Ask

__all__ = [
    "AgentTrashAsk",
    "HostDiskAsk",
    "MirrorWriteAsk",
    "MirrorWriters",
    "MirrorsKeepAsk",
    "MirrorsKept",
    "RepoAcl",
    "RepoAclAsk",
    "RepoFile",
    "RepoShowAsk",
    "RepoWriteAsk",
    "RepoWritten",
    "ReposMissingAsk",
    "Trashed",
]

# An agent.toml is small; this bounds what one ask carries (a frame holds it).
MAX_CONFIG = 256 * 1024


class RepoWritten(_Out):
    commit: str  # the repo's head after the write
    changed: bool  # whether this write made a commit


class RepoWriteAsk(Ask[RepoWritten]):
    cmd: Literal["repo_write"]
    agent: AGENT_NAME
    text: str = Field(max_length=MAX_CONFIG)
    message: str = Field(min_length=1, max_length=2000)
    # Seed a repo that is not there yet; one that is keeps its commits untouched.
    missing_only: bool = False


class RepoFile(_Out):
    commit: str  # the full commit id ``commit`` resolved to
    text: str
    subject: str = ""  # that commit's subject line


class RepoShowAsk(Ask[RepoFile]):
    cmd: Literal["repo_show"]
    agent: AGENT_NAME
    commit: str = Field(min_length=1, max_length=64)
    path: Literal["agent.toml"] = "agent.toml"
    # Read this host's mirror of the agent's repo (an ancestor here committed in it),
    # never its real one; and, without it, never a mirror.
    mirror: bool = False


class ReposMissingAsk(Ask[list[str]]):
    """Which of ``agents`` have no proposed repo of their own on this host."""

    cmd: Literal["repos_missing"]
    agents: list[AGENT_NAME] = Field(max_length=100_000)

    def subject(self) -> str:
        return f" for {len(self.agents)} agent(s)"


class RepoAcl(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: AGENT_NAME
    # Who may write the repo: the agent and its ancestors (those with users here count).
    writers: list[AGENT_NAME] = Field(max_length=64)


class RepoAclAsk(Ask[None]):
    cmd: Literal["repo_acl"]
    repos: list[RepoAcl] = Field(max_length=100_000)
    # Every agent of the hive: entries for these users are the hive's to revoke.
    hive_agents: list[AGENT_NAME] = Field(max_length=100_000)

    def subject(self) -> str:
        return f" for {len(self.repos)} config repo(s)"


class Trashed(_Out):
    moved_to: str | None  # where its directories went on the host; None: it had none


class AgentTrashAsk(Ask[Trashed]):
    cmd: Literal["agent_trash"]
    agent: AGENT_NAME


class MirrorWriters(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent: AGENT_NAME
    # Its ancestors on this host, who may write the mirror (nearest first).
    writers: list[AGENT_NAME] = Field(min_length=1, max_length=64)


class MirrorsKept(_Out):
    # Each kept mirror's source: the real repo's head it was last brought to.
    sources: dict[str, str]


class MirrorsKeepAsk(Ask[MirrorsKept]):
    cmd: Literal["mirrors_keep"]
    # The mirrors this host is to keep, with their writers; any other mirror goes.
    mirrors: list[MirrorWriters] = Field(max_length=100_000)
    # Every agent of the hive: entries for these users are the hive's to revoke, and a
    # mirror of an agent not among them (destroyed) takes its user here with it.
    hive_agents: list[AGENT_NAME] = Field(max_length=100_000)

    def subject(self) -> str:
        return f" for {len(self.mirrors)} config repo mirror(s)"


class MirrorWriteAsk(Ask[RepoWritten]):
    """A mirror's ``agent.toml`` brought to its real repo's head: the commit it made."""

    cmd: Literal["mirror_write"]
    agent: AGENT_NAME
    writers: list[AGENT_NAME] = Field(min_length=1, max_length=64)
    text: str = Field(max_length=MAX_CONFIG)
    source: str = Field(pattern=r"^[0-9a-f]{40,64}$")  # the real repo's head it mirrors
    source_host: str = Field(min_length=1, max_length=200)  # the host holding that repo


HostDiskAsk = (
    RepoWriteAsk
    | RepoShowAsk
    | ReposMissingAsk
    | RepoAclAsk
    | AgentTrashAsk
    | MirrorsKeepAsk
    | MirrorWriteAsk
)
"""This module's asks, as members of the host link's ``LinkCommand``."""
