"""Matrix identifiers: which strings are room IDs, room aliases and server names.

Pure module: no I/O. The grammar is the Matrix specification's (appendices,
"Room IDs" and "Server Name"; room version 12):

- ``!opaque_id:server_name``: rooms of versions 1 to 11. ``opaque_id`` is any
  non-empty run of characters but ``:`` and NUL.
- ``!`` and 43 URL-safe unpadded base64 characters: version 12 on, where the
  room ID is the create event's reference hash (no server part). Synapse
  makes rooms in version 12 by default.
- ``#localpart:server_name``: a room alias; the localpart, any characters but
  ``:`` and NUL.

Each whole ID is at most 255 bytes. ``server_name`` is a DNS name, an IPv4
literal or a bracketed IPv6 literal, with an optional port.
"""

from __future__ import annotations

import ipaddress
import re

__all__ = ["ROOM_FORMS", "is_room_alias", "is_room_id", "is_room_ref", "is_server_name"]

MAX_ID_BYTES = 255
ROOM_FORMS = (
    "a room ID (!id:server, or !id without a server from room version 12) or alias (#name:server)"
)

_HASH_ROOM = re.compile(r"![A-Za-z0-9_-]{43}")
_DNS = re.compile(r"[A-Za-z0-9.-]{1,255}")
_PORT = re.compile(r"[0-9]{1,5}")


def is_server_name(value: str) -> bool:
    """``host [":" port]``: a DNS name, an IPv4 literal or ``[IPv6]``."""
    host, port = value, None
    if value.startswith("["):
        close = value.find("]")
        if close < 0:
            return False
        host, rest = value[1:close], value[close + 1 :]
        if rest:
            if not rest.startswith(":"):
                return False
            port = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
    else:
        if ":" in value:
            host, port = value.split(":", 1)
        if not _DNS.fullmatch(host):
            return False
    return port is None or _PORT.fullmatch(port) is not None


def _sigil_local_server(value: str, sigil: str) -> bool:
    if not value.startswith(sigil) or "\x00" in value:
        return False
    if len(value.encode()) > MAX_ID_BYTES:
        return False
    local, sep, server = value[1:].partition(":")
    return bool(local) and bool(sep) and is_server_name(server)


def is_room_id(value: str) -> bool:
    """A room ID of any room version."""
    return _HASH_ROOM.fullmatch(value) is not None or _sigil_local_server(value, "!")


def is_room_alias(value: str) -> bool:
    return _sigil_local_server(value, "#")


def is_room_ref(value: str) -> bool:
    """A room ID or a room alias: what the tools and ``wake_rooms`` take for a room."""
    return is_room_id(value) or is_room_alias(value)
