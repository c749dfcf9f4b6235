"""Turn records on the host: what a streamed turn leaves in its store, read back.

Real SQLite files in a temp dir, claude's events parsed from the stream-json
lines it prints (``parse_line``), the recorder driven as the harness drives it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from hyperhive.agent.stream import parse_line
from hyperhive.agent.turnrecorder import Redactor, TurnRecorder
from hyperhive.agent.turnreport import summarize_turn
from hyperhive.agent.turnstore import INDEX_CHARS, TurnStore, list_turns, search_turns, show_turn
from hyperhive.protocol import ModelSpend, WaitResult
from hyperhive.protocol.turns import agent_of_turn
from hyperhive.wirebase import Message

API_KEY = "sk-ant-api03-PLANTEDSECRETVALUE-0123456789"
HIVE_TOKEN = "hive-token-abcdefghijklmnop"


def _lines(tool_output: str) -> list[str]:
    """One tool-using turn as claude prints it: init, a text, a Bash call, its result,
    a final text, the result."""
    return [
        json.dumps({"type": "system", "subtype": "init", "session_id": "s-1", "model": "claude-x"}),
        json.dumps(
            {
                "type": "assistant",
                "message": {"id": "m1", "content": [{"type": "text", "text": "Let me look."}]},
            }
        ),
        json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "m1",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": "tu1",
                            "name": "Bash",
                            "input": {"command": "cat notes.md"},
                        }
                    ],
                },
            }
        ),  # fmt: skip
        json.dumps(
            {
                "type": "user",
                "message": {
                    "content": [
                        {"type": "tool_result", "tool_use_id": "tu1", "content": tool_output}
                    ]
                },
            }
        ),
        json.dumps(
            {
                "type": "assistant",
                "message": {"id": "m2", "content": [{"type": "text", "text": "All done."}]},
            }
        ),
        json.dumps({"type": "result", "subtype": "success", "session_id": "s-1", "num_turns": 2}),
    ]


def _woke() -> WaitResult:
    msg = Message.model_validate(
        {"id": 7, "from": "queen", "to": "bee", "body": "please read\nthe notes", "created_at": 1.0}
    )
    return WaitResult(messages=[msg], todos_changed=True)


def _recorder(root: Path, **keep: float) -> TurnRecorder:
    rec = TurnRecorder(
        root,
        "bee",
        lambda: [("ANTHROPIC_API_KEY", API_KEY), ("hive token", HIVE_TOKEN), ("short", "1")],
        keep.get("days", 30.0),
        keep.get("mb", 256.0),
    )
    rec.open()
    return rec


def _run(rec: TurnRecorder, tool_output: str, spent: float | None = None) -> str:
    events = []
    with rec.turn(_woke()) as turn_id:
        assert turn_id is not None
        rec.prompt("You were woken by mail from queen.")
        for line in _lines(tool_output):
            event = parse_line(line)
            assert event is not None
            events.append(event)
            rec.event(event)
        rec.finish([summarize_turn(events, 0, 200_000)])
    if spent is not None:
        rec.counted(ModelSpend(cost_usd=spent, input_tokens=100, output_tokens=20))
    return turn_id


def test_a_tool_using_turn_is_kept_step_by_step(tmp_path: Path) -> None:
    rec = _recorder(tmp_path / "turns")
    turn = _run(rec, "line one\nline two", spent=0.0125)
    rec.close()
    assert agent_of_turn(turn) == "bee"
    (summary,) = list_turns(tmp_path / "turns", None, 10)
    assert summary.id == turn
    assert summary.outcome == "ok"
    assert summary.cost_usd == 0.0125
    assert (summary.input_tokens, summary.output_tokens) == (100, 20)
    assert summary.tools == ["Bash"]
    assert summary.model_calls == 2
    assert summary.session_id == "s-1"
    assert summary.model == "claude-x"
    assert summary.wake_reason == "mail from queen; todos changed"
    record = show_turn(tmp_path / "turns", turn, -1, False, 1 << 20)
    assert record is not None
    assert record.prompt == "You were woken by mail from queen."
    assert record.wake["messages"] == [
        {"id": 7, "from": "queen", "in_reply_to": None, "subject": "please read"}
    ]
    assert [(s.kind, s.name, s.call_id, s.text) for s in record.steps] == [
        ("prompt", None, None, "You were woken by mail from queen."),
        ("text", None, None, "Let me look."),
        ("tool_use", "Bash", "tu1", '{"command": "cat notes.md"}'),
        ("tool_result", None, "tu1", "line one\nline two"),
        ("text", None, None, "All done."),
    ]
    assert record.next_seq is None


def test_a_long_result_is_cut_in_the_index_and_kept_whole_on_disk(tmp_path: Path) -> None:
    rec = _recorder(tmp_path / "turns")
    big = "".join(f"{i:06d}\n" for i in range(INDEX_CHARS // 7 + 500))
    turn = _run(rec, big)
    rec.close()
    cut = show_turn(tmp_path / "turns", turn, -1, False, 1 << 22)
    assert cut is not None
    result = next(s for s in cut.steps if s.kind == "tool_result")
    assert (len(result.text), result.size, result.truncated) == (INDEX_CHARS, len(big), True)
    whole = show_turn(tmp_path / "turns", turn, -1, True, 1 << 22)
    assert whole is not None
    result = next(s for s in whole.steps if s.kind == "tool_result")
    assert (result.text, result.truncated) == (big, False)


def test_a_show_pages_its_steps_within_the_budget(tmp_path: Path) -> None:
    rec = _recorder(tmp_path / "turns")
    turn = _run(rec, "x" * 3000)
    rec.close()
    seen: list[int] = []
    after = -1
    while True:
        page = show_turn(tmp_path / "turns", turn, after, False, 3100)
        assert page is not None
        seen += [s.seq for s in page.steps]
        if page.next_seq is None:
            break
        after = page.next_seq
    assert seen == [0, 1, 2, 3, 4]


def test_planted_secrets_never_reach_the_disk(tmp_path: Path) -> None:
    rec = _recorder(tmp_path / "turns")
    turn = _run(rec, f"key={API_KEY} token={HIVE_TOKEN} flag=1")
    rec.close()
    record = show_turn(tmp_path / "turns", turn, -1, True, 1 << 20)
    assert record is not None
    result = next(s for s in record.steps if s.kind == "tool_result")
    assert result.text == "key=[redacted:ANTHROPIC_API_KEY] token=[redacted:hive token] flag=1"
    for path in (tmp_path / "turns").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert API_KEY.encode() not in data, path
            assert HIVE_TOKEN.encode() not in data, path


def test_redactor_replaces_the_longest_secret_first() -> None:
    redact = Redactor([("a", "abcdefgh"), ("b", "abcdefghijkl")])
    assert redact("xx abcdefghijkl abcdefgh") == "xx [redacted:b] [redacted:a]"


def test_a_crash_mid_turn_keeps_the_steps_before_it(tmp_path: Path) -> None:
    store = TurnStore(tmp_path / "turns", "bee")
    store.begin("bee.20260101T000000Z-00000001", "turn", 100.0, {}, "mail", "go")
    store.step("bee.20260101T000000Z-00000001", 0, "text", "first step")
    # No finish, no close: the host died. The next activation opens the store again.
    again = TurnStore(tmp_path / "turns", "bee")
    again.close()
    (summary,) = list_turns(tmp_path / "turns", None, 10)
    assert summary.outcome == "unfinished"
    record = show_turn(tmp_path / "turns", summary.id, -1, False, 1 << 20)
    assert record is not None
    assert [s.text for s in record.steps] == ["first step"]
    store.close()


def test_search_finds_text_in_tool_inputs_results_and_replies(tmp_path: Path) -> None:
    rec = _recorder(tmp_path / "turns")
    first = _run(rec, "the answer is marmalade")
    second = _run(rec, "nothing to see")
    rec.close()
    hits = search_turns(tmp_path / "turns", "marmalade", 10)
    assert [(h.turn.id, h.kind) for h in hits] == [(first, "tool_result")]
    assert "[marmalade]" in hits[0].snippet
    both = search_turns(tmp_path / "turns", "notes.md", 10)
    assert [h.turn.id for h in both] == [second, first]  # newest first
    assert search_turns(tmp_path / "turns", 'a "quoted" AND', 10) == []


def test_pruning_keeps_records_within_age_and_size(tmp_path: Path) -> None:
    root = tmp_path / "turns"
    store = TurnStore(root, "bee")
    now = time.time()
    # Five finished turns a day apart (oldest first; the oldest's text on disk, the others
    # 1000 characters), and a running one older than all: age 2.5 days drops the three
    # oldest, then 1500 bytes one more; the running one stays.
    ids: list[str] = []
    for i in range(5):
        turn = f"bee.2026010{i + 1}T000000Z-0000000{i}"
        store.begin(turn, "turn", now - (5 - i) * 86400 + 1, {}, "mail", "")
        store.step(turn, 0, "text", "y" * (INDEX_CHARS + 1) if i == 0 else "y" * 1000)
        store.finish(turn, "ok", now, 1)
        ids.append(turn)
    store.begin("bee.20260109T000000Z-00000009", "turn", now - 9 * 86400, {}, "mail", "")
    rec = TurnRecorder(root, "bee", list, 2.5, 1500 / (1 << 20))
    anyio.run(rec.prune_now)
    left = [t.id for t in list_turns(root, None, 10)]
    assert left == [ids[4], "bee.20260109T000000Z-00000009"]
    assert not (root / "blobs" / ids[0]).exists()
    store.close()


@pytest.mark.parametrize("bad", ["", "x" * 501])
def test_a_search_text_out_of_bounds_is_refused(bad: str) -> None:
    from pydantic import ValidationError

    from hyperhive.protocol.turns import OpTurnsSearchReq

    with pytest.raises(ValidationError):
        OpTurnsSearchReq(cmd="turns_search", text=bad)


def test_a_move_carries_the_records_with_the_agents_directory(tmp_path: Path) -> None:
    from hyperhive.agent.moving import pack, unpack

    source = tmp_path / "source" / "bee"
    (source / "state").mkdir(parents=True)
    rec = _recorder(source / "turns")
    turn = _run(rec, "moved along", spent=0.5)
    rec.close()
    size, _sha = pack(source, tmp_path / "bee.tar")
    assert size > 0
    target = tmp_path / "target" / "bee"
    unpack(tmp_path / "bee.tar", target)
    (moved,) = list_turns(target / "turns", None, 10)
    assert (moved.id, moved.cost_usd) == (turn, 0.5)
    record = show_turn(target / "turns", turn, -1, False, 1 << 20)
    assert record is not None and record.steps[3].text == "moved along"
    TurnStore(target / "turns", "bee").close()  # the new host writes on where it left off


def test_a_subagents_steps_are_linked_to_the_call_that_ran_it(tmp_path: Path) -> None:
    rec = _recorder(tmp_path / "turns")
    lines = [
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "tool_use", "id": "task1", "name": "Task",
                     "input": {"prompt": "look around"}}
                ]
            },
        },
        {
            "type": "assistant",
            "parent_tool_use_id": "task1",
            "message": {"content": [{"type": "text", "text": "subagent looking"}]},
        },
        {
            "type": "user",
            "message": {
                "content": [{"type": "tool_result", "tool_use_id": "task1", "content": "found"}]
            },
        },
    ]  # fmt: skip
    with rec.turn(_woke()) as turn:
        for line in lines:
            event = parse_line(json.dumps(line))
            assert event is not None
            rec.event(event)
        rec.finish([])
    rec.close()
    assert turn is not None
    record = show_turn(tmp_path / "turns", turn, -1, False, 1 << 20)
    assert record is not None
    assert record.subagents == ["task1"]
    assert [(s.kind, s.parent) for s in record.steps] == [
        ("tool_use", None),
        ("text", "task1"),
        ("tool_result", None),
    ]


@pytest.mark.anyio
async def test_the_pruner_runs_after_a_turn_and_never_drops_a_running_one(tmp_path: Path) -> None:
    from tests.support.surfaces import until

    root = tmp_path / "turns"
    # A limit of 1 byte: every finished record goes, none that is running.
    rec = TurnRecorder(root, "bee", list, 30.0, 1 / (1 << 20))
    rec.open()
    async with anyio.create_task_group() as tg:
        tg.start_soon(rec.prune_forever)
        _run(rec, "one")
        await until(lambda: not list_turns(root, None, 10))  # woken by the turn's end
        tg.cancel_scope.cancel()
    with rec.turn(_woke()) as running:
        rec.prompt("still going")
        await rec.prune_now()
        assert [t.id for t in list_turns(root, None, 10)] == [running]
    rec.close()


def test_the_hive_subagents_a_turn_started_or_steered_are_named(tmp_path: Path) -> None:
    store = TurnStore(tmp_path / "turns", "bee")
    turn = "bee.20260101T000000Z-0000abcd"
    store.begin(turn, "turn", 1.0, {}, "mail", "go")
    steps = [
        ("tool_use", "c1", "mcp__subagent__start", '{"prompt": "survey the repo"}'),
        ("tool_result", "c1", None, "subagent started: id=5f3a9c1e (model haiku, …)"),
        ("tool_use", "c2", "mcp__subagent__status", '{"id": "older-one"}'),
        ("tool_result", "c2", None, "running"),
        ("tool_use", "c3", "mcp__subagent__continue", '{"id": "5f3a9c1e", "prompt": "go on"}'),
        ("tool_use", "c4", "mcp__bash__run", '{"id": "not-a-subagent"}'),
    ]
    for seq, (kind, call, name, text) in enumerate(steps):
        store.step(turn, seq, kind, text, call_id=call, name=name)
    store.close()
    record = show_turn(tmp_path / "turns", turn, -1, False, 1 << 20)
    assert record is not None and record.hive_subagents == ["5f3a9c1e", "older-one"]
