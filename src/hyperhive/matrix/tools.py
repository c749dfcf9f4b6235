"""The ``matrix`` MCP surface: ``send``, ``read``, ``rooms``, ``join``, ``leave``.

Declared in :mod:`hyperhive.tools.matrix`; the handlers here are bound by name.

Served by the agent host to agents whose ``agent.toml`` enables ``[matrix]``
(the surface's gate refuses the rest, server-side). Each call acts as the
agent the surface authenticated (path + that agent's bearer token) with that
agent's own Matrix account: never a name or token from the arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hyperhive.agent.mcp_surface import Handler, Surface, SurfaceAgent
from hyperhive.config import MATRIX_SERVER, AgentConfig
from hyperhive.matrix.agent import AgentMatrix, nio_call
from hyperhive.matrix.config import USER_ID_RE
from hyperhive.matrix.errors import MatrixError, MatrixNotConfigured
from hyperhive.matrix.ids import ROOM_FORMS, is_room_ref
from hyperhive.tools.decl import NoArgs
from hyperhive.tools.matrix import TOOLS, ReadArgs, RoomArgs, SendArgs

__all__ = ["HANDLERS", "matrix_gate", "matrix_surface", "render_html"]

READ_BODY_CHARS = 8_000


class MatrixCaller(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def config(self) -> AgentConfig: ...

    @property
    def matrix(self) -> AgentMatrix | None: ...

    @property
    def matrix_problem(self) -> str | None: ...


def _matrix(agent: MatrixCaller) -> AgentMatrix:
    if agent.matrix is None:
        raise MatrixNotConfigured(
            agent.matrix_problem
            or "no homeserver is configured for this hive: the operator sets [matrix] in "
            "hive.toml (docs/matrix.md)"
        )
    return agent.matrix


def render_html(text: str) -> str:
    """Markdown as the HTML Matrix clients show; raw HTML in it stays text (no injection)."""
    from markdown_it import MarkdownIt

    html: str = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return html.strip()


def _check_room(room: str) -> str:
    if not is_room_ref(room):
        raise MatrixError(f"{room!r} is not {ROOM_FORMS}; mcp__matrix__rooms lists your rooms")
    return room


async def _room_id(m: AgentMatrix, room: str) -> str:
    if not _check_room(room).startswith("#"):
        return room
    client = await m.client()
    resp = await nio_call(m.homeserver, f"resolving {room}", client.room_resolve_alias(room))
    return str(resp.room_id)


async def _dm_room(m: AgentMatrix, user: str) -> str:
    """The direct-message room with ``user``: one both are in, else a new one."""
    client = await m.client()
    for room_id, room in client.rooms.items():
        members = set(room.users) | set(room.invited_users)
        if members == {m.user_id, user}:
            return str(room_id)
    resp = await nio_call(
        m.homeserver,
        f"creating a direct-message room with {user}",
        client.room_create(is_direct=True, invite=[user]),
    )
    return str(resp.room_id)


async def _send(agent: MatrixCaller, a: SendArgs) -> str:
    m = _matrix(agent)
    client = await m.client()
    if a.to.startswith("@"):
        if not USER_ID_RE.fullmatch(a.to):
            raise MatrixError(f"{a.to!r} is not a Matrix user ID like @someone:server")
        room_id = await _dm_room(m, a.to)
    else:
        room_id = await _room_id(m, a.to)
    content: dict[str, Any] = {"msgtype": "m.text", "body": a.text}
    if a.format == "markdown":
        html = render_html(a.text)
        if html != f"<p>{a.text}</p>":  # plain prose needs no HTML twin
            content |= {"format": "org.matrix.custom.html", "formatted_body": html}
    resp = await nio_call(
        m.homeserver,
        f"sending to {a.to}",
        client.room_send(room_id, "m.room.message", content, ignore_unverified_devices=True),
    )
    return f"sent to {a.to} (room {room_id}, event {resp.event_id})"


def _line(event: Any) -> str:
    body = str(getattr(event, "body", "") or "")
    if len(body) > READ_BODY_CHARS:
        body = body[:READ_BODY_CHARS] + f"\n[… cut at {READ_BODY_CHARS} of {len(body)} characters]"
    return f"{event.sender}: {body}"


async def _read(agent: MatrixCaller, a: ReadArgs) -> str:
    from nio import MessageDirection, RoomMessageText

    m = _matrix(agent)
    client = await m.client()
    room_id = await _room_id(m, a.room)
    if a.since is not None:
        resp = await nio_call(
            m.homeserver,
            f"reading {a.room}",
            client.room_messages(
                room_id, start=a.since, direction=MessageDirection.front, limit=a.limit
            ),
        )
        events = list(resp.chunk)
    else:
        resp = await nio_call(
            m.homeserver,
            f"reading {a.room}",
            client.room_messages(room_id, start="", direction=MessageDirection.back, limit=a.limit),
        )
        events = list(reversed(resp.chunk))
    texts = [e for e in events if isinstance(e, RoomMessageText)]
    if texts:  # read up to here: the room's unread count drops
        last = texts[-1].event_id
        await nio_call(m.homeserver, "marking read", client.room_read_markers(room_id, last, last))
    lines = [_line(e) for e in texts] or ["(no messages)"]
    marker: str | None = resp.end if a.since is not None else None
    if marker is None:
        marker = client.next_batch or None
    tail = f'\nmore later: mcp__matrix__read(room="{room_id}", since="{marker}")' if marker else ""
    return f"room {room_id}:\n" + "\n".join(lines) + tail


async def _rooms(agent: MatrixCaller, a: NoArgs) -> str:
    m = _matrix(agent)
    client = await m.client()
    joined = await nio_call(m.homeserver, "listing rooms", client.joined_rooms())
    lines = [f"you are {m.user_id}"]
    for room_id in joined.rooms:
        room = client.rooms.get(room_id)
        if room is None:
            lines.append(f"- {room_id}")
            continue
        kind = "direct" if room.member_count <= 2 else f"{room.member_count} members"
        lines.append(
            f"- {room.display_name!r} {room_id} ({kind}): {room.unread_notifications} unread, "
            f"{room.unread_highlights} mentioning you"
        )
    if not joined.rooms:
        lines.append("no rooms joined")
    lines.extend(
        f"- invited to {p.room_id} by {p.inviter} (pending: join to accept)" for p in m.pending()
    )
    return "\n".join(lines)


async def _join(agent: MatrixCaller, a: RoomArgs) -> str:
    m = _matrix(agent)
    client = await m.client()
    resp = await nio_call(m.homeserver, f"joining {a.room}", client.join(_check_room(a.room)))
    await m.drop_pending(str(resp.room_id))
    return f"joined {a.room} (room {resp.room_id})"


async def _leave(agent: MatrixCaller, a: RoomArgs) -> str:
    m = _matrix(agent)
    client = await m.client()
    room_id = await _room_id(m, a.room)
    await nio_call(m.homeserver, f"leaving {a.room}", client.room_leave(room_id))
    await m.drop_pending(room_id)
    return f"left {a.room}"


HANDLERS: dict[str, Handler] = {
    "send": _send,
    "read": _read,
    "rooms": _rooms,
    "join": _join,
    "leave": _leave,
}


def matrix_gate(agent: MatrixCaller) -> str | None:
    """Only an agent whose agent.toml enables [matrix] has this surface."""
    if agent.config.matrix.enabled:
        return None
    return f"{agent.name} has no Matrix identity ([matrix] enabled = false in its agent.toml)"


def matrix_surface(lookup: Callable[[str], SurfaceAgent | None]) -> Surface:
    return Surface(MATRIX_SERVER, TOOLS, HANDLERS, lookup, gate=matrix_gate)
