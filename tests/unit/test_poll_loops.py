"""No hand-written poll loop in the tests: waiting on a condition uses the shared helpers.

A loop whose body sleeps (``anyio.sleep``, ``asyncio.sleep``, ``time.sleep``…) is a poll
loop unless it is one of the helpers themselves (``tests/support/surfaces.py::until`` and
``until_async``, ``tests/support/waits.py::wait_until``) or it paces work rather than
waiting for something: a heartbeat, a client retrying while its server restarts, a chaos
schedule. Such a loop says so with a ``# paced: <why>`` comment on its line or the line
above, so the exception is visible where it is made.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

HELPERS = frozenset(
    {
        ("tests/support/surfaces.py", "until"),
        ("tests/support/surfaces.py", "until_async"),
        ("tests/support/waits.py", "wait_until"),
    }
)
MARK = "# paced:"

_Loop = ast.While | ast.For | ast.AsyncFor
_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _is_sleep(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == "sleep") or (
        isinstance(func, ast.Name) and func.id == "sleep"
    )


def _sleeps(loop: _Loop) -> bool:
    """Whether the loop's own body sleeps (not a nested loop's or function's)."""
    todo: list[ast.AST] = [*loop.body, *loop.orelse]
    while todo:
        node = todo.pop()
        if _is_sleep(node):
            return True
        if not isinstance(node, _Loop | _Scope):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _marked(lines: list[str], lineno: int) -> bool:
    for line in lines[max(0, lineno - 2) : lineno]:
        if MARK in line and line.split(MARK, 1)[1].strip():
            return True
    return False


def poll_loops(source: str, path: str = "<test>") -> list[str]:
    """``path:line`` of every unmarked loop that sleeps outside the shared helpers."""
    tree = ast.parse(source)
    lines = source.splitlines()
    helpers = {name for p, name in HELPERS if p == path}
    inside_helper: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in helpers:
            inside_helper.update(id(n) for n in ast.walk(node))
    return [
        f"{path}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, _Loop)
        and id(node) not in inside_helper
        and _sleeps(node)
        and not _marked(lines, node.lineno)
    ]


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_test_polls_by_hand() -> None:
    found = [
        loop
        for path in _test_files()
        for loop in poll_loops(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == [], (
        "hand-written poll loops: wait with tests/support/surfaces.py::until (or "
        "until_async) or tests/support/waits.py::wait_until, or wait for the event itself; "
        "a loop that paces work says why with '# paced: <why>'"
    )


def test_the_helpers_are_still_where_the_check_looks() -> None:
    for path, name in HELPERS:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        defined = {
            n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        assert name in defined, f"{path} defines no {name}: update HELPERS"


@pytest.mark.parametrize(
    "loop",
    [
        "async def f():\n    while not ready():\n        await anyio.sleep(0.05)\n",
        "def f():\n    for _ in range(50):\n        if done():\n            break\n"
        "        time.sleep(0.1)\n",
        "async def f():\n    with anyio.fail_after(5):\n        while True:\n"
        "            try:\n                return await ask()\n"
        "            except OSError:\n                await asyncio.sleep(0.2)\n",
        "def f():\n    while x:  # paced:\n        sleep(1)\n",  # a mark with no reason
    ],
)
def test_the_check_catches_a_poll_loop(loop: str) -> None:
    assert len(poll_loops(loop)) == 1


@pytest.mark.parametrize(
    "loop",
    [
        "async def f():\n    while True:  # paced: a heartbeat\n        await beat()\n"
        "        await anyio.sleep(1)\n",
        "async def f():\n    # paced: the chaos schedule\n    while todo:\n"
        "        await anyio.sleep(gap())\n",
        "async def f():\n    for x in xs:\n        await send(x)\n",  # no sleep: not a poll
        "async def f():\n    for x in xs:\n        async def g():\n"
        "            await anyio.sleep(1)\n        tg.start_soon(g)\n",  # a nested function's
    ],
)
def test_the_check_lets_a_paced_or_sleepless_loop_be(loop: str) -> None:
    assert poll_loops(loop) == []


def test_the_helpers_themselves_may_poll() -> None:
    source = (ROOT / "tests/support/surfaces.py").read_text(encoding="utf-8")
    assert poll_loops(source, "tests/support/surfaces.py") == []
    assert poll_loops(source, "tests/support/elsewhere.py") != []
