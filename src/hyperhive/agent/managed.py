"""claude's managed settings for an operator's ``hivectl choom`` session (spec 002).

A choom session passes neither ``--tools`` nor ``--allowedTools`` (it keeps
claude's own Bash), so what keeps ``Task`` (nested agents, ``Agent`` in this
claude) and ``TodoWrite`` (a plan that vanishes on compaction) out of it is
claude's *managed* settings: the policy layer above user, project, local and
``--settings``, which no setting of the session can loosen (a deny rule wins
over every allow, and nothing below the managed layer can remove it).

claude 2.1.328 reads them on Linux from ``/etc/claude-code`` (a fixed path:
``managed-settings.json`` and the ``managed-settings.d/`` drop-ins). The
hive never writes the machine's copy, which every claude on it reads: it
builds the session's own directory, the machine's policy (if any) with the
hive's denials added, and bubblewrap binds it read-only over
``/etc/claude-code`` in that sandbox alone. Bubblewrap needs the mount point
to exist, so an empty ``/etc/claude-code`` is made on the machine when missing
(as root; an empty directory changes nothing for any claude).

:func:`choom_policy` is the pure half; :func:`prepare_managed_dir` does the I/O.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hyperhive.atomic import atomic_write_text

__all__ = [
    "CHOOM_DENY",
    "MANAGED_DIR",
    "MANAGED_FILE",
    "choom_policy",
    "prepare_managed_dir",
]

log = logging.getLogger(__name__)

MANAGED_DIR = Path("/etc/claude-code")
MANAGED_FILE = "managed-settings.json"
# Spec 002's managed deny list: not Bash, which a choom session keeps on purpose.
CHOOM_DENY: tuple[str, ...] = ("Task", "TodoWrite")


def choom_policy(machine: Mapping[str, Any] | None) -> dict[str, Any]:
    """The machine's managed settings (None: it has none) with :data:`CHOOM_DENY` added
    to ``permissions.deny``; everything else of the machine's policy is kept. Pure."""
    out = dict(machine or {})
    permissions = dict(out.get("permissions") or {})
    deny = [str(rule) for rule in permissions.get("deny") or []]
    deny += [tool for tool in CHOOM_DENY if tool not in deny]
    permissions["deny"] = deny
    out["permissions"] = permissions
    return out


def _machine_policy(source: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((source / MANAGED_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("%s is unreadable (%s): choom adds its denials to nothing", source, exc)
        return None
    return data if isinstance(data, dict) else None


def prepare_managed_dir(target: Path, source: Path = MANAGED_DIR) -> bool:
    """Build ``target`` as a session's ``/etc/claude-code``: ``source``'s files with the
    merged :data:`MANAGED_FILE`. True if ``source`` exists (or was made) to bind over,
    False when it is missing and cannot be made (not root)."""
    if not source.is_dir():
        if os.geteuid() != 0:
            return False
        source.mkdir(mode=0o755, parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)
    target.chmod(0o755)
    text = json.dumps(choom_policy(_machine_policy(source)), indent=2) + "\n"
    atomic_write_text(target / MANAGED_FILE, text, 0o644)
    return True
