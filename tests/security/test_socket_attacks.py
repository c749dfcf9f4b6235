"""The attacker's own coordinator socket: every escalation it can phrase, refused.

Each attempt must come back as a typed refusal whose message names the reason,
and afterwards nothing that is not the attacker's own has changed: hive.db
rows, topology.json, the meta repo's HEAD, the applied configs and every other
agent's files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.client import connect
from hyperhive.errors import FrameTooLarge, HiveError
from hyperhive.framing import FrameDecoder
from hyperhive.unixsock import connect_unix
from tests.security.hostile import (
    ATTACKER,
    Planted,
    assert_unchanged,
    plant,
    refusal,
    seed,
    snapshot,
)
from tests.support.hive import agent_call, coordinator, op_call, operator

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

Attempt = tuple[str, dict[str, Any], str, str]
"""(what is tried, the frame, expected error code, a fragment of its message)."""

OPERATOR_ONLY = [
    {"cmd": "set_parent", "child": ATTACKER, "new_parent": None},
    {"cmd": "set_parent", "child": ATTACKER, "new_parent": "stranger"},
    {"cmd": "set_parent", "child": "victim", "new_parent": ATTACKER},
    {"cmd": "set_parent", "child": "boss", "new_parent": "minion"},
    {"cmd": "spawn", "name": "evil", "parent": ATTACKER},
    {"cmd": "approve", "approval_id": 1},
    {"cmd": "deny", "approval_id": 1},
    {"cmd": "perms_set", "agent": ATTACKER, "tool_groups": ["execution", "web_tools"]},
    {"cmd": "agent_kill", "agent": "victim"},
    {"cmd": "agent_destroy", "agent": "boss"},
    {"cmd": "inbox"},
    {"cmd": "messages", "agent": "victim"},
    {"cmd": "answer_question", "question_id": 1, "answer": "yes"},
    {"cmd": "logs", "agent": "victim"},
    {"cmd": "agent_config", "agent": "victim"},
    {"cmd": "register", "host_id": "evil-host"},
    {"cmd": "agent_crashed", "agent": "victim", "reason": "x"},
    {"cmd": "activate", "agent": "victim", "config": {}},
    {"cmd": "create_repo", "name": "x"},
]


def attempts(p: Planted) -> list[Attempt]:
    out: list[Attempt] = [
        # ---- sending as someone else ----------------------------------------------------
        (
            "send with a from field",
            {"cmd": "send", "to": "victim", "body": "x", "from": "boss"},
            "malformed_frame",
            "identity comes from the socket",
        ),
        (
            "send with a sender field",
            {"cmd": "send", "to": "victim", "body": "x", "sender": "operator"},
            "malformed_frame",
            "identity comes from the socket",
        ),
        (
            "send to another root",
            {"cmd": "send", "to": "stranger", "body": "x"},
            "route_refused",
            "family rule",
        ),
        (
            "send to a cousin",
            {"cmd": "send", "to": "outsider", "body": "x"},
            "route_refused",
            "may not message 'outsider'",
        ),
        (
            "send to a root's sibling",
            {"cmd": "send", "to": "benign", "body": "x"},
            "route_refused",
            "may not message 'benign'",
        ),
        (
            "send to 'system'",
            {"cmd": "send", "to": "system", "body": "x"},
            "not_found",
            "unknown recipient 'system'",
        ),
        (
            "send to 'reminder'",
            {"cmd": "send", "to": "reminder", "body": "x"},
            "not_found",
            "unknown recipient",
        ),
        (
            "send to 'graceful-stop'",
            {"cmd": "send", "to": "graceful-stop", "body": "x"},
            "not_found",
            "unknown recipient",
        ),
        (
            "wake into another inbox",
            {"cmd": "wake", "from": "matrix", "body": "x", "to": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "wake labelled by field name",
            {"cmd": "wake", "sender": "victim", "body": "x"},
            "permission_denied",
            "never someone else",
        ),
        # ---- other agents' mail -----------------------------------------------------------
        (
            "recv another's inbox",
            {"cmd": "recv", "max": 5, "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "ack another's inbox",
            {"cmd": "ack_until", "up_to": 10**9, "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "wait on another's inbox",
            {"cmd": "wait", "timeout": 0, "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "turn_end as another",
            {"cmd": "turn_end", "outcome": "ok", "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "attach as another",
            {"cmd": "attach", "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "fence another",
            {"cmd": "fence", "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "compact another",
            {"cmd": "compact", "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "set another's status",
            {"cmd": "set_status", "text": "pwned", "name": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "todo into another's list",
            {"cmd": "todo_upsert", "subsystem": "s", "key": "k", "body": "b", "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        (
            "remind another",
            {"cmd": "remind", "message": "x", "delay_seconds": 1, "agent": "victim"},
            "malformed_frame",
            "unexpected field",
        ),
        # ---- other agents' loose ends -----------------------------------------------------
        (
            "cancel a sibling's reminder",
            {"cmd": "cancel_loose_end", "kind": "reminder", "row_id": p.victim_reminder},
            "permission_denied",
            "belongs to victim",
        ),
        (
            "cancel the parent's reminder",
            {"cmd": "cancel_loose_end", "kind": "reminder", "row_id": p.boss_reminder},
            "permission_denied",
            "belongs to boss",
        ),
        (
            "cancel a sibling's question",
            {"cmd": "cancel_loose_end", "kind": "question", "row_id": p.victim_question},
            "permission_denied",
            "belongs to victim",
        ),
        (
            "clear a sibling's todo",
            {"cmd": "cancel_loose_end", "kind": "todo", "row_id": p.victim_todo},
            "permission_denied",
            "belongs to victim",
        ),
        (
            "cancel the parent's approval",
            {"cmd": "cancel_loose_end", "kind": "approval", "row_id": p.boss_approval},
            "permission_denied",
            "only a root agent",
        ),
        (
            "cancel another root's approval",
            {"cmd": "cancel_loose_end", "kind": "approval", "row_id": p.stranger_approval},
            "permission_denied",
            "only a root agent",
        ),
        (
            "cancel the parent's schedule via loose ends",
            {"cmd": "cancel_loose_end", "kind": "schedule", "row_id": p.boss_schedule_on_victim},
            "permission_denied",
            "belongs to boss",
        ),
        (
            "cancel the parent's schedule on a sibling",
            {"cmd": "cancel_schedule", "schedule_id": p.boss_schedule_on_victim},
            "permission_denied",
            "not a descendant",
        ),
        (
            "cancel a row that is not there",
            {"cmd": "cancel_loose_end", "kind": "reminder", "row_id": 2**62},
            "not_found",
            "no reminder",
        ),
        (
            "schedule prompts into a sibling",
            {"cmd": "schedule_prompt", "target": "victim", "prompt": "obey", "every_seconds": 60},
            "permission_denied",
            "not a descendant",
        ),
        (
            "schedule prompts into the parent",
            {"cmd": "schedule_prompt", "target": "boss", "prompt": "obey", "every_seconds": 60},
            "permission_denied",
            "not a descendant",
        ),
        (
            "read a sibling's loose ends",
            {"cmd": "get_loose_ends", "agent": "victim"},
            "permission_denied",
            "query_agent_state",
        ),
        (
            "read the parent's loose ends",
            {"cmd": "get_loose_ends", "agent": "boss"},
            "permission_denied",
            "query_agent_state",
        ),
        (
            "read the hive's loose ends",
            {"cmd": "get_loose_ends", "agent": "*"},
            "permission_denied",
            "only for the operator",
        ),
        # ---- config and the tree ----------------------------------------------------------
        (
            "re-init a sibling",
            {"cmd": "request_init_config", "name": "victim", "config": ""},
            "permission_denied",
            "already exists under boss",
        ),
        (
            "re-init the parent",
            {"cmd": "request_init_config", "name": "boss"},
            "permission_denied",
            "already exists under no parent",
        ),
        (
            "re-init itself",
            {"cmd": "request_init_config", "name": ATTACKER},
            "permission_denied",
            "already exists under boss",
        ),
        (
            "re-init another root's child",
            {"cmd": "request_init_config", "name": "outsider"},
            "permission_denied",
            "already exists under stranger",
        ),
        (
            "init a reserved name",
            {"cmd": "request_init_config", "name": "operator"},
            "invalid_name",
            "reserved",
        ),
        (
            "init a path",
            {"cmd": "request_init_config", "name": "../boss"},
            "invalid_name",
            "lowercase letters",
        ),
        (
            "apply a sibling's config",
            {"cmd": "request_apply_commit", "agent": "victim"},
            "permission_denied",
            "not a descendant",
        ),
        (
            "apply the parent's config",
            {"cmd": "request_apply_commit", "agent": "boss"},
            "permission_denied",
            "not a descendant",
        ),
        # ---- groups and capabilities it lacks ---------------------------------------------
        # Issue #14: the coordinator issues forge and Matrix credentials on the agent's
        # socket; without the group (or [matrix]) it mints and makes nothing.
        (
            "a forge token without the forge group",
            {"cmd": "forge_token"},
            "tool_group_denied",
            "'forge' tool group",
        ),
        (
            "a forge repository without the forge group",
            {"cmd": "forge_create_repo", "name": "loot"},
            "tool_group_denied",
            "'forge' tool group",
        ),
        (
            "a Matrix account without [matrix]",
            {"cmd": "matrix_account"},
            "permission_denied",
            "[matrix] enabled = false",
        ),
        (
            "get_logs without diagnostics",
            {"cmd": "get_logs", "agent": "minion"},
            "tool_group_denied",
            "'diagnostics' tool group",
        ),
        (
            "get_logs of the parent without diagnostics",
            {"cmd": "get_logs", "agent": "boss"},
            "tool_group_denied",
            "'diagnostics' tool group",
        ),
        (
            "host journal without the capability",
            {"cmd": "get_host_journal"},
            "permission_denied",
            "read_host_journal capability",
        ),
        (
            "the parent's deployed config without the capability",
            {"cmd": "get_deployed", "agent": "boss"},
            "permission_denied",
            "meta_read capability",
        ),
        (
            "lifecycle of a name that is not there",
            {"cmd": "kill", "agent": "nobody"},
            "not_found",
            "no agent named 'nobody'",
        ),
    ]
    for verb in ("kill", "start", "restart", "update", "destroy"):
        out.extend(
            (
                f"{verb} {target}",
                {"cmd": verb, "agent": target},
                "permission_denied",
                "not a descendant",
            )
            for target in ("victim", "stranger", "outsider", "benign")
        )
        ancestor_reason = "(an ancestor)" if verb == "destroy" else "not a descendant"
        self_reason = "cannot destroy itself" if verb == "destroy" else "not a descendant"
        out.append(
            (
                f"{verb} the parent",
                {"cmd": verb, "agent": "boss"},
                "permission_denied",
                ancestor_reason,
            )
        )
        out.append(
            (f"{verb} itself", {"cmd": verb, "agent": ATTACKER}, "permission_denied", self_reason)
        )
    someone = (
        "victim",
        "boss",
        "minion",
        "stranger",
        "operator",
        "system",
        "reminder",
        "graceful-stop",
    )
    out.extend(
        (
            f"wake labelled {label!r}",
            {"cmd": "wake", "from": label, "body": "obey"},
            "permission_denied",
            "never someone else",
        )
        for label in someone
    )
    out.extend(
        (
            f"wake labelled {label!r}",
            {"cmd": "wake", "from": label, "body": "obey"},
            "invalid_request",
            "wake label",
        )
        for label in ("<parent>", "Operator", "", "victim ", "a/b", "x" * 64)
    )
    out.extend(
        (
            f"operator-only {frame['cmd']}",
            frame,
            "unknown_command",
            f"unknown cmd {frame['cmd']!r} on this socket",
        )
        for frame in OPERATOR_ONLY
    )
    return out


async def test_every_escalation_on_the_agent_socket_is_refused_with_a_reason(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    async with coordinator(tmp_path) as c:
        planted = await plant(c)
        before = snapshot(c.paths)
        problems: list[str] = []
        table = attempts(planted)
        async with connect(c.paths.agent_sock(ATTACKER)) as mallory:
            for what, frame, code, fragment in table:
                err = await refusal(mallory, frame)
                if err is None:
                    problems.append(f"{what}: ACCEPTED {frame}")
                elif err.code != code or fragment not in err.message:
                    problems.append(
                        f"{what}: {err.code} {err.message!r} (wanted {code}, {fragment!r})"
                    )
        assert not problems, "\n".join(problems)
        assert_unchanged(before, snapshot(c.paths))
        assert len(table) > 100


async def test_what_the_socket_accepts_touches_only_the_attackers_own_rows(
    tmp_path: Path,
) -> None:
    """Calls that succeed by design (they act on the caller) cannot reach anyone else."""
    seed(tmp_path)
    async with coordinator(tmp_path) as c:
        planted = await plant(c)
        before = snapshot(c.paths)
        async with connect(c.paths.agent_sock(ATTACKER)) as mallory:
            acked = await agent_call(mallory, "ack_until", up_to=2**63 - 1)
            assert acked == {"acked": 0}
            assert await agent_call(mallory, "recv", max=5) == []
            ended = await agent_call(
                mallory, "turn_end", outcome="ok", handled=list(planted.victim_mail)
            )
            assert isinstance(ended, dict)
            await agent_call(mallory, "attach")
            await agent_call(mallory, "fence")
            await agent_call(mallory, "attach")
            waited = await agent_call(mallory, "wait", timeout=0)
            assert isinstance(waited, dict) and waited["messages"] == []
            meta = await agent_call(mallory, "get_agent_meta", name="victim")
            assert isinstance(meta, dict) and set(meta) <= {
                "name",
                "hive_name",
                "hyperhive_rev",
                "running",
                "status_text",
                "status_set_at",
                "parent",
                "matrix_accounts",  # public identities (name, user ID, homeserver), no token
                "applied_config",  # a path the agent's own host fills in, for itself only
            }
            assert meta.get("applied_config") is None
            await agent_call(mallory, "set_status", text="innocent")
            await agent_call(mallory, "todo_upsert", subsystem="forge", key="pr-1", body="mine")
            await agent_call(mallory, "todo_clear", subsystem="forge", key="pr-1")
            # A wake lands in the attacker's own inbox, under a label that is nobody.
            woke = await agent_call(mallory, "wake", **{"from": "matrix", "body": "hi"})
            assert isinstance(woke, dict)
        assert_unchanged(before, snapshot(c.paths))


async def test_a_child_cannot_cancel_the_schedule_its_parent_set_on_it(tmp_path: Path) -> None:
    seed(tmp_path)
    async with coordinator(tmp_path) as c:
        planted = await plant(c)
        before = snapshot(c.paths)
        async with connect(c.paths.agent_sock(ATTACKER)) as mallory:
            frame = {"cmd": "cancel_schedule", "schedule_id": planted.boss_schedule_on_mallory}
            err = await refusal(mallory, frame)
        assert err is not None and err.code == "permission_denied", "boss's schedule cancelled"
        assert_unchanged(before, snapshot(c.paths))


# ---- overflowing frames and payloads --------------------------------------------------


async def _exchange(path: Path, frames: list[bytes], expected: int) -> list[dict[str, Any]]:
    """Write raw bytes to a socket, read ``expected`` responses."""
    stream = await connect_unix(path)
    out: list[dict[str, Any]] = []
    decoder = FrameDecoder(1 << 22)

    async def reader() -> None:
        while len(out) < expected:
            for line in decoder.feed(await stream.receive(1 << 16)):
                assert isinstance(line, bytes)
                out.append(json.loads(line))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            for f in frames:
                await stream.send(f)
    await stream.aclose()
    return out


async def test_oversized_frames_and_bodies_are_refused_and_the_stream_survives(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    async with coordinator(tmp_path) as c:
        await plant(c)
        before = snapshot(c.paths)
        cap = c.config.max_frame_bytes
        limit = c.config.max_body_bytes
        huge = json.dumps({"cmd": "send", "to": "victim", "body": "A" * (cap + 10)}).encode()
        frames = [
            huge + b"\n",  # a whole frame over the cap
            b'{"cmd": "send", "to": "victim", "body": "' + b"B" * (cap + 5),  # no newline yet…
            b"C" * 70000 + b'"}\n',  # …and it keeps going: still one refusal
            b'{"id": "after", "cmd": "get_agent_meta"}\n',  # the stream is still in sync
        ]
        got = await _exchange(c.paths.agent_sock(ATTACKER), frames, 3)
        codes = [r["error"]["code"] if not r["ok"] else "ok" for r in got]
        assert codes.count("frame_too_large") == 2, got
        assert any(r["id"] == "after" and r["ok"] for r in got), got
        assert all(f"{cap}-byte limit" in r["error"]["message"] for r in got if not r["ok"])

        body = "x" * (limit + 1)
        async with connect(c.paths.agent_sock(ATTACKER)) as mallory:
            for frame in (
                {"cmd": "send", "to": "victim", "body": body},
                {"cmd": "send", "to": ATTACKER, "body": body},
                {"cmd": "wake", "from": "matrix", "body": body},
                {"cmd": "ask_operator", "question": body},
                {"cmd": "todo_upsert", "subsystem": "s", "key": "k", "body": body},
                {"cmd": "schedule_prompt", "target": ATTACKER, "prompt": body, "every_seconds": 60},
            ):
                err = await refusal(mallory, frame)
                assert err is not None and err.code == "limit_exceeded", (frame["cmd"], err)
                assert f"the limit is {limit} bytes" in err.message
            # Multi-byte characters count as bytes, not characters.
            err = await refusal(
                mallory, {"cmd": "send", "to": "victim", "body": "é" * (limit // 2 + 1)}
            )
            assert err is not None and err.code == "limit_exceeded"
            err = await refusal(mallory, {"cmd": "set_status", "text": "s" * 201})
            assert err is not None and err.code == "limit_exceeded" and "200" in err.message
            err = await refusal(mallory, {"cmd": "recv", "max": 2**40})
            assert err is not None and err.code == "malformed_frame"
            err = await refusal(
                mallory, {"cmd": "turn_end", "outcome": "ok", "handled": list(range(10_001))}
            )
            assert err is not None and err.code == "malformed_frame"
        assert_unchanged(before, snapshot(c.paths))


async def test_an_oversized_request_through_the_client_is_refused_not_hung(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    answer: HiveError | None = None
    async with coordinator(tmp_path) as c:
        async with connect(c.paths.agent_sock(ATTACKER)) as mallory:
            body = "A" * (c.config.max_frame_bytes + 1)
            with anyio.move_on_after(3):
                answer = await refusal(mallory, {"cmd": "send", "to": "victim", "body": body})
    assert isinstance(answer, FrameTooLarge), "no answer in 3 s: the refusal never came back"


async def test_deeply_nested_json_is_a_malformed_frame(tmp_path: Path) -> None:
    seed(tmp_path)
    async with coordinator(tmp_path) as c:
        got = await _exchange(c.paths.agent_sock(ATTACKER), [b"[" * 200_000 + b"\n"], 1)
        assert got[0]["error"]["code"] == "malformed_frame", got


async def test_a_lone_surrogate_request_id_does_not_bring_the_coordinator_down(
    tmp_path: Path,
) -> None:
    seed(tmp_path)
    alive = False
    async with coordinator(tmp_path) as c:
        got = await _exchange(
            c.paths.agent_sock(ATTACKER), [b'{"id": "\\ud800", "cmd": "get_agent_meta"}\n'], 1
        )
        with anyio.move_on_after(5):
            async with operator(c.paths) as op:
                alive = isinstance(await op_call(op, "status"), dict)
    assert alive and got[0]["error"]["code"] == "malformed_frame", got


async def test_a_lone_surrogate_in_a_body_is_malformed_not_internal(tmp_path: Path) -> None:
    seed(tmp_path)
    async with coordinator(tmp_path) as c:
        got = await _exchange(
            c.paths.agent_sock(ATTACKER),
            [b'{"cmd": "send", "to": "mallory", "body": "\\ud800"}\n'],
            1,
        )
    assert got[0]["error"]["code"] in ("malformed_frame", "invalid_request"), got
