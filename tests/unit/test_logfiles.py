"""Reading an agent's log on its host: tails, cursors across rotation, bounded answers."""

from __future__ import annotations

import json
from pathlib import Path

from hyperhive.agent.agentlog import AgentLog
from hyperhive.agent.logfiles import MAX_LINE, last_lines, lines_after


def test_a_tail_and_then_exactly_the_lines_written_after_it(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    tail = last_lines(log, 3, 1 << 20)
    assert tail.found and tail.lines == ["line 47", "line 48", "line 49"]
    assert lines_after(log, tail.cursor, 1 << 20).lines == []
    with log.open("a") as fh:
        fh.write("new one\nhalf a li")  # an unfinished line waits for its newline
    step = lines_after(log, tail.cursor, 1 << 20)
    assert step.lines == ["new one"]
    with log.open("a") as fh:
        fh.write("ne\n")
    assert lines_after(log, step.cursor, 1 << 20).lines == ["half a line"]


def test_a_follower_loses_no_line_to_a_rotation(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    log = AgentLog(path, max_bytes=200, keep=2)
    log.line("before")
    cursor = last_lines(path, 10, 1 << 20).cursor
    log.line("x" * 200)  # the file is now over its cap: the next write rotates it
    log.line("after the rotation")
    assert path.with_name("a.log.1").exists()
    first = lines_after(path, cursor, 1 << 20)
    assert [ln.split("hyperhive: ")[1] for ln in first.lines] == ["x" * 200]
    second = lines_after(path, first.cursor, 1 << 20)
    assert [ln.split("hyperhive: ")[1] for ln in second.lines] == ["after the rotation"]
    assert lines_after(path, second.cursor, 1 << 20).lines == []


def test_no_log_yet_and_a_garbled_cursor(tmp_path: Path) -> None:
    path = tmp_path / "none.log"
    assert not last_lines(path, 5, 1000).found
    assert not lines_after(path, "0:0", 1000).found
    path.write_text("one\ntwo\n")
    assert lines_after(path, "not a cursor", 1 << 20).lines == ["one", "two"]


def test_answers_stay_inside_the_frame_budget(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    with path.open("w") as fh:
        fh.write("\x01" * (MAX_LINE * 4) + "\n")  # one huge line of bytes JSON escapes 6x
        fh.writelines(f"{i:05d} " + "y" * 994 + "\n" for i in range(3000))
    budget = 256 << 10
    tail = last_lines(path, 5000, budget)
    assert len(json.dumps(tail.lines)) <= budget
    assert tail.lines[0].startswith("… (") and "earlier lines left out" in tail.lines[0]
    assert tail.lines[-1].startswith("02999 ")
    # Following from the start walks the whole file in bounded steps, every line once.
    seen: list[str] = []
    cursor = "0:0"
    for _ in range(1000):
        step = lines_after(path, cursor, budget)
        assert len(json.dumps(step.lines)) <= budget
        if not step.lines:
            break
        seen += step.lines
        cursor = step.cursor
    # The huge line comes in pieces of one step each, every piece cut and saying so.
    first = next(i for i, ln in enumerate(seen) if ln.startswith("00000 "))
    assert first >= 1 and all("(line cut: " in ln or not ln for ln in seen[:first])
    assert [ln[:5] for ln in seen[first:]] == [f"{i:05d}" for i in range(3000)]
