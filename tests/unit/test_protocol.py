"""Wire models, framing and the error tree."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter

from hyperhive.errors import (
    FrameTooLarge,
    HiveError,
    MalformedFrame,
    RouteRefused,
    UnknownCommand,
    error_from_code,
)
from hyperhive.framing import FrameDecoder
from hyperhive.protocol import (
    INBOX_EVENTS,
    AgentRequest,
    ApprovalResolved,
    ContainerCrash,
    HelperEvent,
    HostLost,
    HostRequest,
    LinkCommand,
    LostAgent,
    Message,
    RemindReq,
    Response,
    SendReq,
    Sent,
    Spawned,
    WaitResult,
    WakeReq,
    decode_request,
    decode_response,
    describe,
    encode,
    encode_ok,
    error_response,
    ok_response,
    peek_id,
)


def test_requests_roundtrip_through_encode_and_decode() -> None:
    req = SendReq(id=7, cmd="send", to="alice", body="hi", in_reply_to=3)
    assert decode_request(AgentRequest, encode(req)) == req
    wake = decode_request(AgentRequest, b'{"cmd":"wake","from":"matrix","body":"dm"}')
    assert isinstance(wake, WakeReq) and wake.sender == "matrix"
    assert json.loads(encode(wake))["from"] == "matrix"


def test_a_from_field_is_refused_on_send_naming_the_identity_rule() -> None:
    with pytest.raises(MalformedFrame, match="identity comes from the socket"):
        decode_request(AgentRequest, b'{"cmd":"send","to":"a","body":"b","from":"operator"}')


@pytest.mark.parametrize(
    ("line", "error", "text"),
    [
        (b"not json", MalformedFrame, "not valid UTF-8 JSON"),
        (b"\xff\xfe", MalformedFrame, "not valid UTF-8 JSON"),
        (b"[1,2]", MalformedFrame, "JSON object"),
        (b'{"cmd":"launch_missiles"}', UnknownCommand, "launch_missiles"),
        (b'{"body":"x"}', UnknownCommand, "known: "),
        (b'{"cmd":"recv","max":0}', MalformedFrame, "max"),
        (
            b'{"cmd":"remind","message":"x","delay_seconds":1,"at_unix_timestamp":2}',
            MalformedFrame,
            "exactly one",
        ),
    ],
)
def test_bad_frames_get_named_errors(line: bytes, error: type[HiveError], text: str) -> None:
    with pytest.raises(error, match=text):
        decode_request(AgentRequest, line)


def test_operator_commands_are_not_spoken_on_the_agent_socket() -> None:
    with pytest.raises(UnknownCommand):
        decode_request(AgentRequest, b'{"cmd":"set_parent","child":"a"}')
    req = decode_request(HostRequest, b'{"cmd":"set_parent","child":"a"}')
    assert req.new_parent is None


def test_remind_needs_exactly_one_time() -> None:
    assert RemindReq(cmd="remind", message="x", delay_seconds=5).delay_seconds == 5
    with pytest.raises(ValueError, match="exactly one"):
        RemindReq(cmd="remind", message="x")


def test_responses() -> None:
    ok = ok_response(3, Message(id=1, sender="a", recipient="b", body="x", created_at=1.0))
    back = decode_response(encode(ok))
    assert back.ok and isinstance(back.result, dict) and back.result["from"] == "a"
    err = error_response("r1", RouteRefused("no"))
    wire = json.loads(encode(err))
    assert wire == {
        "id": "r1",
        "ok": False,
        "result": None,
        "error": {"code": "route_refused", "message": "no"},
    }
    rebuilt = error_from_code(wire["error"]["code"], wire["error"]["message"])
    assert isinstance(rebuilt, RouteRefused)
    assert type(error_from_code("no_such_code", "m")) is HiveError
    with pytest.raises(MalformedFrame):
        decode_response(b'{"ok": "maybe"}')
    assert Response.model_validate({"ok": True}).result is None


@pytest.mark.parametrize("rid", [7, 'r-ü"1', None])
@pytest.mark.parametrize(
    "result",
    [
        Sent(id=41, to="bob"),
        WaitResult(
            messages=[Message(id=2, sender="a", recipient="b", body='é\n"x"', created_at=1.5)],
            todo_version=3,
        ),
        Message(id=1, sender="a", recipient="b", body="x", created_at=1.0),
        [Message(id=1, sender="a", recipient="b", body="x", created_at=1.0)],
        None,
        {"k": 1},
    ],
)
def test_encode_ok_is_the_same_frame_as_encoding_the_response(rid: object, result: object) -> None:
    """The direct encoder (the hot path) says exactly what the generic one says."""
    fast = encode_ok(rid, result)  # type: ignore[arg-type]
    slow = encode(ok_response(rid, result))  # type: ignore[arg-type]
    assert fast.endswith(b"\n") and fast.count(b"\n") == 1
    assert json.loads(fast) == json.loads(slow)
    back = decode_response(fast)
    assert back.ok and back.id == rid and back.error is None


def test_peek_id_survives_bad_frames() -> None:
    assert peek_id(b'{"id": 9, "cmd": "nope"}') == 9
    assert peek_id(b'{"id": true}') is None
    assert peek_id(b"garbage") is None


def test_message_render() -> None:
    msg = Message(id=12, sender="alice", recipient="bob", body="hi", in_reply_to=3, created_at=0)
    assert msg.render() == "[msg #12] from alice (re #3): hi"
    ping = Message(id=0, sender="system", recipient="bob", body="ping", created_at=0)
    assert ping.render() == "from system: ping"


@pytest.mark.parametrize(
    ("event", "sentence"),
    [
        (
            ApprovalResolved(agent="w", approval_id=3, approved=False, reason="too big"),
            "[approval_resolved] Your approval #3 for w was denied (too big). Change the "
            "request and ask again, or tell whoever was waiting on it.",
        ),
        (Spawned(agent="w"), "[spawned] w was spawned and is idle: send it its task."),
        (
            ContainerCrash(agent="w"),
            "[container_crash] w crashed. Read its log (get_logs), "
            "then restart it or fix its config; tell the operator if it keeps crashing.",
        ),
    ],
)
def test_events_reach_the_model_as_a_sentence_naming_the_next_step(
    event: BaseModel, sentence: str
) -> None:
    assert describe(event) == sentence


def test_a_lost_host_is_one_sentence_naming_each_agent_and_its_fate() -> None:
    lost = HostLost(
        host="h1",
        cause="lease_expired",
        agents=[
            LostAgent(agent="w1"),
            LostAgent(agent="w2"),
            LostAgent(agent="w3", outcome="replaced", host="h2"),
            LostAgent(agent="w4", outcome="stuck"),
        ],
    )
    assert describe(lost) == (
        "[host_lost] Agent host h1 is lost (its lease expired): w1, w2 wait for it to come "
        "back (on_host_loss = wait); w3 runs again on h2, fresh from its config and inbox "
        "(its notes and session stay on h1): send it what it must know; w4 start on another "
        "host once one connects. Tell whoever waits on their work; the operator sees the host."
    )
    died = HostLost(host="h9", cause="died", agents=[LostAgent(agent=f"a{i}") for i in range(25)])
    text = describe(died)
    assert text.startswith("[host_lost] Agent host h9 stopped, and with it a0, a1,")
    assert "a19 and 5 more." in text and "a20" not in text
    assert lost.key == "host_lost:h1" and Spawned(agent="w").key == "spawned:w"


def test_every_helper_event_has_a_sentence_not_json() -> None:
    adapter: TypeAdapter[BaseModel] = TypeAdapter(HelperEvent)
    for name in (
        "container_crash",
        "approval_resolved",
        "spawned",
        "rebuilt",
        "killed",
        "destroyed",
        "needs_login",
        "logged_in",
        "config_ready",
    ):
        extra = {"approval_id": 1, "approved": True} if name == "approval_resolved" else {}
        text = describe(adapter.validate_python({"event": name, "agent": "w7", **extra}))
        assert text.startswith(f"[{name}] ") and "w7" in text and "{" not in text
        assert text.endswith(".")
    with pytest.raises(TypeError, match="not a helper event"):
        describe(Message(id=1, sender="a", recipient="b", body="x", created_at=0))


def test_helper_events_and_link_commands() -> None:
    adapter: TypeAdapter[object] = TypeAdapter(HelperEvent)
    names = {
        "container_crash",
        "approval_resolved",
        "spawned",
        "rebuilt",
        "killed",
        "destroyed",
        "needs_login",
        "logged_in",
        "config_ready",
    }
    for name in names:
        extra = {"approval_id": 1, "approved": True} if name == "approval_resolved" else {}
        event = adapter.validate_python({"event": name, "agent": "a", **extra})
        assert event.event == name
    assert INBOX_EVENTS == {"container_crash", "approval_resolved", "host_lost"}
    cmd = TypeAdapter(LinkCommand).validate_python(
        {"cmd": "activate", "agent": "a", "config": {"tool_groups": ["forge"]}}
    )
    assert cmd.config.tool_groups == ["forge"]


def test_decoder_splits_joins_and_drops_oversized_frames() -> None:
    dec = FrameDecoder(max_frame=10)
    assert dec.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert dec.feed(b":2}\n") == [b'{"b":2}']
    out = dec.feed(b"x" * 11)
    assert len(out) == 1 and isinstance(out[0], FrameTooLarge)
    assert dec.pending == 0
    assert dec.feed(b"yyyy\nok\n") == [b"ok"]  # the rest of the big frame is skipped
    out = dec.feed(b"0123456789ab\nnext\n")
    assert isinstance(out[0], FrameTooLarge) and out[1:] == [b"next"]
    assert dec.feed(b"\n  \n\r\n") == []


@given(st.binary(max_size=24).filter(lambda b: b"\n" not in b))
def test_a_chunk_of_one_whole_frame_decodes_as_in_a_stream(frame: bytes) -> None:
    # One frame per chunk takes a shortcut; it must agree with the general path
    # (a frame split from its neighbours), the size cap included.
    alone = FrameDecoder(max_frame=20).feed(frame + b"\n")
    among = FrameDecoder(max_frame=20).feed(b"x\n" + frame + b"\n")[1:]
    assert [None if isinstance(x, FrameTooLarge) else x for x in alone] == [
        None if isinstance(x, FrameTooLarge) else x for x in among
    ]


@given(
    st.lists(st.binary(max_size=30).filter(lambda b: b"\n" not in b), max_size=20),
    st.lists(st.integers(min_value=1, max_value=17), min_size=1),
)
def test_decoder_is_independent_of_chunking(frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(f + b"\n" for f in frames)
    whole = FrameDecoder(max_frame=20).feed(stream)
    dec = FrameDecoder(max_frame=20)
    pieces: list[bytes | FrameTooLarge] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        pieces.extend(dec.feed(stream[pos : pos + step]))
        pos += step
        i += 1

    def norm(xs: list[bytes | FrameTooLarge]) -> list[bytes | None]:
        return [None if isinstance(x, FrameTooLarge) else x for x in xs]

    assert norm(pieces) == norm(whole)
    assert dec.pending <= 20
