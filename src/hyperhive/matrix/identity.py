"""An agent's Matrix account and watcher state on disk, in the agent's own state dir.

``matrix-account.json`` (user ID, device, access token) is mode 0600 and
owned by the agent's system user: no other agent's sandbox binds that dir
and no other user can open it. ``matrix-sync.json`` is the watcher's
``/sync`` token and the invitations it left pending; both are replaced
atomically (temp + fsync + rename), never through a planted link.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hyperhive.safefs import atomic_write_beneath, read_beneath

__all__ = [
    "ACCOUNT_FILE",
    "SYNC_FILE",
    "Account",
    "PendingInvite",
    "SyncState",
    "read_account",
    "read_sync_state",
    "write_account",
    "write_sync_state",
]

log = logging.getLogger(__name__)

ACCOUNT_FILE = "matrix-account.json"
SYNC_FILE = "matrix-sync.json"


@dataclass(frozen=True, slots=True)
class Account:
    user_id: str
    device_id: str
    access_token: str
    homeserver: str


@dataclass(frozen=True, slots=True)
class PendingInvite:
    room_id: str
    inviter: str
    room_name: str = ""


@dataclass(frozen=True, slots=True)
class SyncState:
    since: str | None = None
    pending_invites: tuple[PendingInvite, ...] = field(default_factory=tuple)


def _read_json(state_dir: Path, name: str) -> Any:
    path = state_dir / name
    raw = read_beneath(state_dir, path, 1 << 20)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        log.warning("%s is not JSON; ignoring it", path)
        return None


def _write_json(state_dir: Path, name: str, data: Any, owner: tuple[int, int] | None) -> None:
    path = state_dir / name
    atomic_write_beneath(state_dir, path, json.dumps(data).encode(), 0o600)
    if owner is not None:
        os.chown(path, *owner, follow_symlinks=False)


def read_account(state_dir: Path) -> Account | None:
    data = _read_json(state_dir, ACCOUNT_FILE)
    try:
        return Account(**data) if isinstance(data, dict) else None
    except TypeError:
        log.warning("%s/%s has unexpected fields; provisioning afresh", state_dir, ACCOUNT_FILE)
        return None


def write_account(state_dir: Path, account: Account, owner: tuple[int, int] | None) -> None:
    _write_json(state_dir, ACCOUNT_FILE, asdict(account), owner)


def read_sync_state(state_dir: Path) -> SyncState:
    data = _read_json(state_dir, SYNC_FILE)
    if not isinstance(data, dict):
        return SyncState()
    since = data.get("since")
    invites = data.get("pending_invites")
    pending = tuple(
        PendingInvite(str(i["room_id"]), str(i["inviter"]), str(i.get("room_name", "")))
        for i in (invites if isinstance(invites, list) else [])
        if isinstance(i, dict) and "room_id" in i and "inviter" in i
    )
    return SyncState(since if isinstance(since, str) else None, pending)


def write_sync_state(state_dir: Path, state: SyncState, owner: tuple[int, int] | None) -> None:
    _write_json(state_dir, SYNC_FILE, asdict(state), owner)
