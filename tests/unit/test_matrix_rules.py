"""What wakes an agent on Matrix and what its wake says (pure rules), and ``[matrix]`` config."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperhive.config import AgentConfig, parse_agent_config
from hyperhive.errors import ConfigError
from hyperhive.matrix.config import AgentMatrixConfig, MatrixConfig
from hyperhive.matrix.ids import is_room_alias, is_room_id, is_room_ref, is_server_name
from hyperhive.matrix.rules import (
    WAKE_MAX_MESSAGES,
    Incoming,
    accept_invite,
    render_wake,
    wake_reason,
)

ME = "@hive-ana:example.org"
OP = "@op:example.org"


def _msg(**over: object) -> Incoming:
    base: dict[str, object] = {
        "room_id": "!r:example.org",
        "room_name": "ops",
        "sender": OP,
        "body": "hello",
        "is_direct": False,
    }
    return Incoming(**(base | over))  # type: ignore[arg-type]


def test_reasons() -> None:
    assert wake_reason(_msg(is_direct=True), ME, []) == "dm"
    assert wake_reason(_msg(body=f"{ME}: look"), ME, []) == "mention"
    assert wake_reason(_msg(mentions=(ME,)), ME, []) == "mention"
    assert wake_reason(_msg(formatted=f'<a href="https://matrix.to/#/{ME}">ana</a>'), ME, []) == (
        "mention"
    )
    assert wake_reason(_msg(), ME, ["!r:example.org"]) == "room"
    assert wake_reason(_msg(), ME, ["!other:example.org"]) is None


@given(direct=st.booleans(), mention=st.booleans(), room=st.booleans())
def test_its_own_messages_never_wake_it(direct: bool, mention: bool, room: bool) -> None:
    msg = _msg(sender=ME, is_direct=direct, mentions=(ME,) if mention else ())
    assert wake_reason(msg, ME, ["!r:example.org"] if room else []) is None


def test_invitations_only_from_the_operator_or_the_allowed() -> None:
    assert accept_invite(OP, OP, [])
    assert accept_invite("@al:x.org", OP, ["@al:x.org"])
    assert not accept_invite("@eve:x.org", OP, ["@al:x.org"])
    assert not accept_invite("@eve:x.org", None, [])


def test_wake_names_room_sender_text_and_cuts_long_text_with_the_read_call() -> None:
    body = render_wake([("dm", _msg(is_direct=True, body="short"))])
    assert f"direct message from {OP} in 'ops' (!r:example.org)" in body and "short" in body
    long = "x" * 5000
    cut = render_wake([("mention", _msg(body=long, since="t1"))], limit=100)
    assert "x" * 100 in cut and "x" * 101 not in cut
    read = 'mcp__matrix__read(room="!r:example.org", since="t1")'
    assert f"cut at 100 of 5000 characters; the rest: {read}" in cut


def test_a_flood_is_summarised_not_pasted() -> None:
    items = [("room", _msg(body=f"m{i}")) for i in range(WAKE_MAX_MESSAGES + 5)]
    body = render_wake(items)  # type: ignore[arg-type]
    assert f"m{WAKE_MAX_MESSAGES - 1}" in body and f"m{WAKE_MAX_MESSAGES}\n" not in body
    assert "and 5 more" in body


def test_hive_config_takes_at_most_one_credential_and_the_coordinator_needs_one() -> None:
    # An agent host's [matrix] names no credential (issue #14); the coordinator needs one.
    host_side = MatrixConfig(homeserver="https://m.example")
    with pytest.raises(ConfigError, match="names no credential: set exactly one"):
        host_side.require_credential()
    with pytest.raises(ValueError, match="only one"):
        MatrixConfig(
            homeserver="https://m.example",
            registration_shared_secret_file="/s",  # type: ignore[arg-type]
            admin_token_file="/t",  # type: ignore[arg-type]
        )
    config = MatrixConfig(homeserver="https://m.example/", admin_token_file="/t")  # type: ignore[arg-type]
    config.require_credential()
    assert config.user_id("ana") == "@hive-ana:m.example"
    with pytest.raises(ValueError, match="not a Matrix user ID"):
        MatrixConfig(homeserver="https://m.example", admin_token_file="/t", operator="me")  # type: ignore[arg-type]


def test_agent_config_matrix_adds_its_server_and_refuses_a_clash() -> None:
    assert "matrix" not in AgentConfig().servers()
    on = parse_agent_config('[matrix]\nenabled = true\nwake_rooms = ["#ops:example.org"]\n')
    assert on.servers()["matrix"].builtin and on.matrix.wake_rooms == ["#ops:example.org"]
    with pytest.raises(ConfigError, match="remove"):
        parse_agent_config('[matrix]\nenabled = true\n[mcp_servers.matrix]\ncommand = "bridge"\n')
    with pytest.raises(ConfigError, match="not a Matrix user ID"):
        parse_agent_config('[matrix]\nallowed_inviters = ["alice"]\n')


# Room version 12: the create event's hash, no server part (Synapse's default version).
V12_ROOM = "!RpdxDgpl534GIaHlOviDfo3uycFXvv-OWbJFnvmvUPM"


@pytest.mark.parametrize(
    "room",
    [
        V12_ROOM,
        "!opaque:example.org",
        "!a b c:example.org",  # any character but ':' and NUL (versions 1 to 11)
        "!x:example.org:8448",
        "!x:127.0.0.1",
        "!x:[::1]:8448",
        "#ops:example.org",
        "#ops room:example.org",
    ],
)
def test_every_room_id_form_of_the_spec_is_a_wake_room(room: str) -> None:
    assert is_room_ref(room)
    config = parse_agent_config(f"[matrix]\nenabled = true\nwake_rooms = [{room!r}]\n")
    assert config.matrix.wake_rooms == [room]


@pytest.mark.parametrize(
    "room",
    [
        "general",
        "!short",  # no server and not a 43-character hash
        V12_ROOM + "A",
        V12_ROOM[:-1] + "+",  # URL-safe base64 only
        "!:example.org",
        "!x:",
        "!x:bad host",
        "!x:[::1",
        "!x:example.org:port",
        "#ops",
        "@someone:example.org",
        "!x\x00y:example.org",
        "!" + "x" * 250 + ":example.org",  # past 255 bytes
    ],
)
def test_what_is_no_room_is_refused_naming_the_forms(room: str) -> None:
    assert not is_room_ref(room)
    with pytest.raises(ValueError, match="room version 12"):
        AgentMatrixConfig(wake_rooms=[room])


def test_room_ids_and_aliases_are_told_apart() -> None:
    assert is_room_id(V12_ROOM) and not is_room_alias(V12_ROOM)
    assert is_room_alias("#ops:example.org") and not is_room_id("#ops:example.org")
    assert is_server_name("[2001:db8::1]") and not is_server_name("[nope]")
