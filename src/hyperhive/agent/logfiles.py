"""Reading an agent's log on its host: the last lines, and the lines after a cursor.

Pure file reading, no event loop (the host runs these on a worker thread).
A cursor is ``"<inode>:<offset>"`` in the log file as it was when handed
out. The log rotates (``agent.log`` → ``agent.log.1``, see
:mod:`hyperhive.agent.agentlog`), so a cursor whose inode is now ``.1``'s
reads the rest of ``.1`` first and then the new file from its start: a
follower loses no line to a rotation.

Everything read is bounded: a line is cut at ``MAX_LINE`` bytes, a tail
holds at most ``budget`` bytes (the oldest lines give way, and say so) and a
follow step reads a fraction of it, so no answer outgrows the link's frame.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_LINE", "Tail", "lines_after", "last_lines"]

MAX_LINE = 16 << 10


@dataclass(frozen=True, slots=True)
class Tail:
    lines: list[str]
    cursor: str
    found: bool


def _split(data: bytes) -> list[str]:
    out = []
    for raw in data.splitlines():
        if len(raw) > MAX_LINE:
            cut = raw[:MAX_LINE].decode("utf-8", "replace")
            out.append(f"{cut} … (line cut: {len(raw)} bytes, {MAX_LINE} shown)")
        else:
            out.append(raw.decode("utf-8", "replace"))
    return out


def _fit(lines: list[str], budget: int) -> list[str]:
    """The newest of ``lines`` that fit ``budget`` bytes, with a note of any left out."""
    total, kept = 0, 0
    for line in reversed(lines):
        total += len(line.encode()) + 4  # its JSON quotes and separator
        if total > budget:
            break
        kept += 1
    if kept == len(lines):
        return lines
    left_out = len(lines) - kept
    return [f"… ({left_out} earlier lines left out: over the link's frame budget)"] + (
        lines[len(lines) - kept :] if kept else []
    )


def last_lines(path: Path, lines: int, budget: int) -> Tail:
    """The last ``lines`` lines of ``path`` and a cursor at its end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return Tail([], "0:0", found=False)
    with os.fdopen(fd, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        block = min(size, max(4096, lines * 200))
        fh.seek(size - block)
        data = fh.read(block)
        cursor = f"{os.fstat(fd).st_ino}:{size}"
    # A partial first line (the block started mid-line) is dropped unless it is the file's.
    got = _split(data)
    if block < size and got:
        got = got[1:]
    return Tail(_fit(got[-lines:] if lines else [], budget), cursor, found=True)


def _read_from(path: Path, inode: int | None, offset: int, budget: int) -> tuple[bytes, str] | None:
    """Bytes of ``path`` from ``offset`` (complete lines only, at most ``budget`` of them),
    and the cursor after them; ``None`` if ``path`` is not the file ``inode`` names."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        ino = os.fstat(fd).st_ino
        if inode is not None and ino != inode:
            return None
        size = fh.seek(0, os.SEEK_END)
        if offset > size:  # truncated in place: start over
            offset = 0
        fh.seek(offset)
        data = fh.read(min(size - offset, budget))
    end = data.rfind(b"\n")
    if end < 0:
        # No complete line yet; a line longer than the budget is passed on cut.
        if len(data) >= budget:
            return data, f"{ino}:{offset + len(data)}"
        return b"", f"{ino}:{offset}"
    return data[: end + 1], f"{ino}:{offset + end + 1}"


def lines_after(path: Path, cursor: str, budget: int) -> Tail:
    """The complete lines written to ``path`` since ``cursor`` (see the module doc), at
    most ``budget // 8`` bytes of them (JSON may escape a byte as six): a follower asks
    again for the rest, and no line is dropped to fit."""
    budget //= 8
    inode_text, _, offset_text = cursor.partition(":")
    try:
        inode, offset = int(inode_text), int(offset_text)
    except ValueError:
        inode, offset = 0, 0
    if inode:
        # Still the same file: read on. Rotated: finish .1 first.
        same = _read_from(path, inode, offset, budget)
        if same is None:
            rotated = _read_from(path.with_name(f"{path.name}.1"), inode, offset, budget)
            if rotated is not None and rotated[0]:
                same = rotated
        if same is not None:
            data, after = same
            return Tail(_split(data), after, found=True)
    fresh = _read_from(path, None, 0, budget)
    if fresh is None:
        return Tail([], "0:0", found=False)
    data, after = fresh
    return Tail(_split(data), after, found=True)
