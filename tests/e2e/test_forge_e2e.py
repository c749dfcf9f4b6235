"""The forge end to end: a real claude turn creates a repository and pushes a branch to it.

Coordinator, agent host, the real claude CLI against the scripted model, and
the scripted Forgejo (API + ``git http-backend``). The model calls
``create_repo``, then a bash task clones, commits and pushes a branch over
HTTP — the credential helper answering from the agent's token file. Then a
forge notification wakes the agent exactly once, also across a host restart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig
from hyperhive.forge.identity import TOKEN_FILE, read_token
from hyperhive.permissions import ToolGroup
from tests.e2e.test_bash_mcp import coordinator_and_host, start_host
from tests.support.forgejo_server import FakeForgejo
from tests.support.hive import agent_env, op_call, operator, seed_home
from tests.support.model_server import ModelServer, always, text, tool_call
from tests.support.surfaces import surface_client, until

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.timeout(180)]

AGENT = "fgx-ana"


@pytest.fixture
def forgejo() -> Iterator[FakeForgejo]:
    with FakeForgejo() as server:
        server.add_org("agents")
        yield server
        assert server.rejected == []  # the hive only sent requests the API contract allows


def _seed(home: Path, model: ModelServer, forgejo: FakeForgejo) -> str:
    """Seed the agent; the [forge] section for hive.toml."""
    token_file = home / "forge-admin-token"
    home.mkdir(parents=True, exist_ok=True)
    token_file.write_text(forgejo.admin_token)
    token_file.chmod(0o600)
    config = AgentConfig(
        tool_groups=[*ToolGroup.AGENT_DEFAULT, ToolGroup.FORGE], env=agent_env(model.url)
    )
    seed_home(home, {AGENT: config})
    return (
        f'[forge]\nurl = "{forgejo.url}"\nadmin_token_file = "{token_file}"\n'
        "poll_seconds = 0.2\npoll_backoff_max = 1\n"
    )


async def _forge_messages(home: Path) -> list[dict[str, Any]]:
    from hyperhive.config import HivePaths

    async with operator(HivePaths(home)) as op:
        views = await op_call(op, "messages", agent=AGENT)
    assert isinstance(views, dict)
    return [m for m in views["inbox"] if m["from"] == "forge"]


def _tool_results(model: ModelServer) -> list[str]:
    out: list[str] = []
    for request in model.main_requests:
        last = request.messages[-1] if request.messages else {}
        content = last.get("content") if isinstance(last, dict) else None
        blocks = content if isinstance(content, list) else []
        out.extend(
            str(b.get("content"))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_result"
        )
    return out


async def test_create_repo_then_push_a_branch_from_a_bash_task_and_get_woken_by_a_review(
    tmp_path: Path, model_server: ModelServer, forgejo: FakeForgejo, claude_bin: Path
) -> None:
    clone_url = f"{forgejo.url}/agents/demo.git"
    push = (
        f"set -e; git clone -q {clone_url} demo; cd demo; git checkout -q -b feature; "
        "echo hello > hello.txt; git add hello.txt; git commit -qm 'say hello'; "
        "git push -q origin feature; echo pushed"
    )
    model_server.set_script(
        [
            tool_call("mcp__hyperhive__create_repo", {"name": "demo", "description": "e2e"}),
            tool_call("mcp__bash__run", {"cmd": push, "wait_seconds": 60}),
            text("done"),
        ]
    )
    forge_toml = _seed(tmp_path, model_server, forgejo)
    async with coordinator_and_host(tmp_path, claude_bin, forge_toml) as (host, scope, tg):
        await until(lambda: AGENT in host.agents)
        # Provisioned at activation: the user exists and its token is in its state.
        state = host.agents[AGENT].state_dir
        await until(lambda: (state / TOKEN_FILE).exists())
        token = read_token(state)
        assert token and forgejo.tokens_of(AGENT)[0].sha1 == token
        async with surface_client(host, AGENT, "hyperhive") as hh:
            listed = {t.name for t in (await hh.list_tools()).tools}
        assert "create_repo" in listed

        async with operator(host.paths) as op:
            await op_call(op, "send", to=AGENT, body="make a repo and push a branch")
        await anyio.to_thread.run_sync(
            lambda: model_server.wait_for(lambda reqs: sum(r.main for r in reqs) >= 3, 90)
        )
        results = _tool_results(model_server)
        assert any(f"clone: {clone_url}" in r for r in results), results
        assert any("pushed" in r and "exit_code 0" in r for r in results), results
        assert forgejo.repos["agents/demo"].collaborators == {AGENT: "write"}
        assert "feature" in forgejo.branches("agents/demo")
        # The push was the agent's, authenticated by its token through the helper.
        pushes = [r for r in forgejo.recorded if r.path.endswith("git-receive-pack")]
        assert pushes and {r.user for r in pushes} == {AGENT}
        # The token reached git only through the helper: no file but its own holds it.
        leaks = [
            p
            for p in tmp_path.rglob("*")
            if p.is_file() and p.name != TOKEN_FILE and token.encode() in p.read_bytes()
        ]
        assert leaks == []

        # A review on the forge wakes the agent: one message from forge, with the link.
        model_server.set_script(always(text("noted")))
        forgejo.notify(AGENT, "agents/demo", "Review: rename hello.txt")
        woken = await _wait_forge_messages(tmp_path, 1)
        assert "Review: rename hello.txt" in woken[0]["body"]
        assert f"{forgejo.url}/agents/demo/pulls/" in woken[0]["body"]
        await until(lambda: forgejo.unread(AGENT) == [])

        # The host dies after delivering but before marking read (the thread is unread
        # again); the next host marks it read without a second wake.
        scope.cancel()
        forgejo.threads[0].unread = True
        second, second_scope = await start_host(tg, tmp_path, "second-host")
        try:
            await until(lambda: AGENT in second.agents, within=30)
            await until(lambda: forgejo.unread(AGENT) == [], within=30)
            assert len(await _forge_messages(tmp_path)) == 1
        finally:
            with anyio.move_on_after(10):
                await second.stop_all(graceful=False)
            second_scope.cancel()


async def _wait_forge_messages(home: Path, count: int) -> list[dict[str, Any]]:
    with anyio.fail_after(30):
        while True:
            rows = await _forge_messages(home)
            if len(rows) >= count:
                return rows
            await anyio.sleep(0.05)
