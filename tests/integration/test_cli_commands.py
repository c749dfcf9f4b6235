"""Every hivectl command against a real ``hivectl serve`` (and, for spawn, a real host).

``--json`` shapes are the documented ones (docs/cli-json.md); errors are one
line on stderr with a non-zero exit.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hyperhive.config import AgentConfig, HivePaths
from tests.support.hive import agent, agent_call, hivectl_env, seed_home, start_serve

HIVE_TOML = 'runtime = "unsandboxed"\ndashboard_port = 0\n'


def hivectl(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hyperhive", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=hivectl_env(home),
        input=stdin,
    )


def ok_json(home: Path, *args: str) -> Any:
    out = hivectl(home, *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def one_line_error(out: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert out.returncode != 0, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("hivectl: ") and fragment in lines[0], lines[0]


def seed(home: Path, extra_toml: str = "", store_url: str | None = None) -> None:
    seed_home(
        home,
        {"queen": AgentConfig(), "alice": AgentConfig(), "bob": AgentConfig()},
        {"queen": None, "alice": "queen", "bob": None},
        hive_toml=HIVE_TOML + extra_toml,
        store_url=store_url,
    )


@pytest.fixture
def hive(tmp_path: Path, hive_store_url: str | None) -> Iterator[Path]:
    seed(tmp_path, store_url=hive_store_url)
    proc = start_serve(tmp_path)
    try:
        yield tmp_path
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (tmp_path / "serve.log").read_text()


def from_agent(home: Path, name: str, cmd: str, **fields: Any) -> Any:
    async def go() -> Any:
        async with agent(HivePaths(home), name) as client:
            return await agent_call(client, cmd, **fields)

    return anyio.run(go)


# ---- read commands and their --json shapes ---------------------------------------------


def test_read_commands_json_shapes(hive: Path) -> None:
    status = ok_json(hive, "status")
    assert {"home", "agents", "running", "hosts", "roots", "pid"} <= set(status)
    assert status["claude_slots"] == {} and status["waiting_slot"] == []  # no host yet
    assert status["agents"] == 3 and status["roots"] == ["bob", "queen"]

    agents = ok_json(hive, "agents", "list")
    assert isinstance(agents, list) and len(agents) == 3
    for row in agents:
        assert {"name", "parent", "running", "turn_state", "status_text"} <= set(row)
        assert isinstance(row["running"], bool) and isinstance(row["status_text"], str)
    assert ok_json(hive, "agents", "tree") == agents

    from_agent(hive, "alice", "send", to="operator", body="hello operator")
    inbox = ok_json(hive, "inbox")
    assert len(inbox) == 1
    assert {"id", "from", "to", "body", "in_reply_to", "created_at"} <= set(inbox[0])
    assert inbox[0]["from"] == "alice" and inbox[0]["to"] == "operator"
    assert inbox[0]["in_reply_to"] is None and isinstance(inbox[0]["created_at"], float)
    assert ok_json(hive, "inbox", "--unread")[0]["id"] == inbox[0]["id"]

    perms = ok_json(hive, "perms", "show", "alice")
    assert {"tool_groups", "capabilities", "tools_arg", "allowed_tools_arg"} <= set(perms)
    assert "Bash" not in perms["tools_arg"].split(",")

    # An agent's log is on the disk of the host that runs it; this hive has no host.
    one_line_error(hivectl(hive, "logs", "alice", "-n", "5"), "no agent host is connected")

    tools = ok_json(hive, "tools", "--groups", "messaging,web_tools")
    assert tools["tool_groups"] == ["messaging", "web_tools"]
    assert "WebFetch" in tools["tools_arg"]
    human = hivectl(hive, "tools", "--groups", "messaging")
    assert human.returncode == 0 and human.stdout.startswith("groups:         messaging")

    assert ok_json(hive, "questions", "list") == []
    assert ok_json(hive, "approvals", "list") == []


def test_human_output_of_read_commands(hive: Path) -> None:
    listed = hivectl(hive, "agents", "list")
    assert listed.returncode == 0 and "parent=queen" in listed.stdout
    assert hivectl(hive, "inbox").stdout.strip() == "(inbox empty)"
    assert hivectl(hive, "questions", "list").stdout.strip() == "(no open questions)"
    assert hivectl(hive, "approvals", "list").stdout.strip() == "(no pending approvals)"
    status = hivectl(hive, "status")
    assert status.returncode == 0 and "agents          3" in status.stdout
    shown = hivectl(hive, "perms", "show", "alice")
    assert "--tools" in shown.stdout and "--allowedTools" in shown.stdout


# ---- messages and questions -------------------------------------------------------------


def test_send_reply_and_questions(hive: Path) -> None:
    sent = hivectl(hive, "send", "alice", "do the thing")
    assert sent.returncode == 0 and sent.stdout.strip() == "sent #1 to alice"
    from_agent(hive, "alice", "send", to="operator", body="done", in_reply_to=1)
    inbox = ok_json(hive, "inbox")
    assert inbox[0]["in_reply_to"] == 1
    replied = hivectl(hive, "reply", str(inbox[0]["id"]), "thanks")
    assert replied.returncode == 0 and "to alice" in replied.stdout
    missing = hivectl(hive, "reply", "999", "x")
    assert missing.returncode != 0 and "no message #999" in missing.stderr

    asked = from_agent(hive, "bob", "ask_operator", question="which branch?")
    questions = ok_json(hive, "questions", "list")
    assert len(questions) == 1 and questions[0]["question"] == "which branch?"
    assert {"id", "asker", "question", "state"} <= set(questions[0])
    answered = hivectl(hive, "questions", "answer", str(questions[0]["id"]), "main")
    assert answered.returncode == 0 and "sent to bob" in answered.stdout
    assert ok_json(hive, "questions", "list") == []
    assert ok_json(hive, "questions", "list", "--all")[0]["state"] != "open"
    assert asked is not None
    one_line_error(hivectl(hive, "questions", "answer", "99", "x"), "no question #99")


# ---- agents: spawn, set-parent, lifecycle, compact, perms, approvals -----------------------


# About 30 hivectl processes in one scenario: each start costs seconds on a loaded machine.
@pytest.mark.timeout(300)
def test_agent_commands_without_a_host(hive: Path) -> None:
    spawned = hivectl(hive, "agents", "spawn", "worker", "--parent", "queen")
    assert spawned.returncode == 0, spawned.stderr
    assert "starts when an agent host connects" in spawned.stdout
    one_line_error(hivectl(hive, "agents", "spawn", "worker"), "already exists")
    one_line_error(hivectl(hive, "agents", "spawn", "Bad Name"), "")

    moved = hivectl(hive, "agents", "set-parent", "worker", "--root")
    assert moved.returncode == 0 and "worker is now at the root" in moved.stdout
    one_line_error(
        hivectl(hive, "agents", "set-parent", "queen", "--parent", "alice"), "would make a cycle"
    )

    killed = hivectl(hive, "agents", "kill", "worker")
    assert killed.returncode == 0 and json.loads(killed.stdout)["stopped"] is False
    started = hivectl(hive, "agents", "start", "worker")
    if started.returncode:  # refused outright, or recorded as wanted-running: both say so
        one_line_error(started, "no agent host is connected")
    else:
        assert json.loads(started.stdout) == {"agent": "worker", "running": False}
    for verb in ("restart", "update"):
        out = hivectl(hive, "agents", verb, "worker")
        assert out.returncode == 0 and json.loads(out.stdout) == {
            "agent": "worker",
            "running": False,
        }
    one_line_error(hivectl(hive, "agents", "kill", "ghost"), "no agent named 'ghost'")

    aborted = hivectl(hive, "agents", "destroy", "worker", stdin="n\n")
    assert aborted.returncode != 0
    assert "worker" in {a["name"] for a in ok_json(hive, "agents", "list")}
    destroyed = hivectl(hive, "agents", "destroy", "worker", "--yes")
    assert destroyed.returncode == 0 and json.loads(destroyed.stdout)["destroyed"] is True
    one_line_error(hivectl(hive, "agents", "destroy", "queen", "--yes"), "still has children")

    queued = hivectl(hive, "compact", "alice")  # the operator's is ungated: no turn yet
    assert queued.returncode == 0 and json.loads(queued.stdout)["queued"] is True
    one_line_error(hivectl(hive, "logs", "ghost"), "no agent named 'ghost'")

    # A proposal is committed to the agent's config repo on its host (#14): none is here.
    one_line_error(
        hivectl(hive, "perms", "set", "alice", "--groups", "messaging,web_tools"),
        "needs an agent host",
    )


# ---- spawn waits for the agent to come up on a real host ------------------------------------


def _start_host(hive: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    """A real ``hyperhive host`` on the hive's home (a fake claude: no turn runs here)."""
    fake = tmp_path / "fake-claude"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    with (hive / "hive.toml").open("a") as fh:
        fh.write(f'claude_bin = "{fake}"\n')
    log = (hive / "host.log").open("ab")
    host = subprocess.Popen(
        [sys.executable, "-m", "hyperhive", "host"],
        env=hivectl_env(hive),
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    log.close()
    deadline = time.monotonic() + 60
    while ok_json(hive, "status")["hosts"] == []:
        assert host.poll() is None, (hive / "host.log").read_text()
        if time.monotonic() > deadline:
            host.kill()
            raise TimeoutError("the agent host did not register in 60 s")
        time.sleep(0.05)
    return host


def test_spawn_waits_for_the_agent_host(hive: Path, tmp_path: Path) -> None:
    host = _start_host(hive, tmp_path)
    try:
        out = hivectl(hive, "agents", "spawn", "worker", "--parent", "bob")
        assert out.returncode == 0, out.stderr
        assert "waiting for it to come up" in out.stderr
        assert out.stdout.strip() == "spawned worker (running)"
        row = next(a for a in ok_json(hive, "agents", "list") if a["name"] == "worker")
        assert row["running"] is True and row["parent"] == "bob"
        # hivectl host runs on uvloop, as hivectl serve does.
        assert "(event loop uvloop)" in (hive / "host.log").read_text()
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(timeout=30)


# About 20 hivectl processes (as in test_agent_commands_without_a_host): seconds each on a
# loaded machine.
@pytest.mark.timeout(300)
def test_perms_and_approvals_with_a_host(hive: Path, tmp_path: Path) -> None:
    """The operator's proposals, committed by the agent's host, then listed, shown,
    approved and denied from the CLI."""
    host = _start_host(hive, tmp_path)
    try:
        proposed = hivectl(hive, "perms", "set", "alice", "--groups", "messaging,web_tools")
        assert proposed.returncode == 0 and "approval #1 created" in proposed.stdout
        one_line_error(hivectl(hive, "perms", "set", "alice", "--groups", "nope"), "known groups")
        approvals = ok_json(hive, "approvals", "list")
        assert len(approvals) == 1
        assert {"id", "kind", "requester", "subject", "state"} <= set(approvals[0])
        assert approvals[0] | {"created_at": 0} == {
            "id": 1,
            "kind": "apply_commit",
            "requester": "operator",
            "subject": "alice",
            "state": "pending",
            "created_at": 0,
            "resolution": None,
        }
        shown = ok_json(hive, "approvals", "show", "1")
        assert "+++ proposed/alice.toml" in shown["diff"] and "web_tools" in shown["diff"]
        assert "web_tools" in hivectl(hive, "approvals", "show", "1").stdout
        one_line_error(hivectl(hive, "approvals", "deny", "1", "--reason", " "), "say why")
        approved = hivectl(hive, "approvals", "approve", "1")
        assert approved.returncode == 0 and json.loads(approved.stdout)["state"] == "approved"
        assert "web_tools" in ok_json(hive, "perms", "show", "alice")["tool_groups"]
        one_line_error(hivectl(hive, "approvals", "approve", "1"), "already approved")

        applied = hivectl(hive, "perms", "set", "bob", "--groups", "messaging", "--apply")
        assert applied.returncode == 0 and '"state": "approved"' in applied.stdout
        hivectl(hive, "perms", "set", "bob", "--groups", "meta")
        denied = hivectl(hive, "approvals", "deny", "3", "--reason", "not now")
        assert denied.returncode == 0 and json.loads(denied.stdout)["state"] == "denied"
        resolved = ok_json(hive, "approvals", "list", "--all")
        assert [a["state"] for a in resolved] == ["approved", "approved", "denied"]
        one_line_error(hivectl(hive, "approvals", "show", "42"), "no approval #42")
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(timeout=30)


# ---- choom ---------------------------------------------------------------------------------


def test_choom_runs_claude_in_the_agent_sandbox_without_tool_flags(
    hive: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "fake-claude"
    fake.write_text(
        '#!/bin/sh\necho "cwd=$PWD"\necho "home=$HOME"\necho "agent=$HIVE_AGENT"\n'
        'for a in "$@"; do echo "arg=$a"; done\n'
    )
    fake.chmod(0o755)
    with (hive / "hive.toml").open("a") as fh:
        fh.write(f'claude_bin = "{fake}"\n')
    out = hivectl(hive, "choom", "alice", "--", "--resume", "abc")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    paths = HivePaths(hive)
    assert f"cwd={os.path.realpath(paths.agent_work('alice'))}" in lines
    assert f"home={paths.agent_home('alice')}" in lines
    assert "agent=alice" in lines
    args = [line.removeprefix("arg=") for line in lines if line.startswith("arg=")]
    # Unsandboxed, there is no sandbox to bind managed settings into: the denials go in
    # --settings (the layer the session's own settings still cannot loosen), said so.
    deny = {"permissions": {"deny": ["Task", "TodoWrite"]}}
    assert args == ["--settings", json.dumps(deny), "--resume", "abc"]
    assert not {"--tools", "--allowedTools"} & set(args)
    assert "choom: alice" in out.stderr
    assert "denying Task, TodoWrite with --settings instead" in out.stderr

    one_line_error(hivectl(hive, "choom", "alice", "--", "--tools", "Read"), "never restricts")
    one_line_error(hivectl(hive, "choom", "ghost"), "no agent named 'ghost'")


def test_long_running_commands_have_help(tmp_path: Path) -> None:
    for command in ("serve", "up", "host", "choom"):
        out = hivectl(tmp_path, command, "--help")
        assert out.returncode == 0 and "Usage:" in out.stdout


def test_commands_without_a_coordinator_fail_in_one_line(tmp_path: Path) -> None:
    for args in (("status",), ("agents", "list", "--json"), ("approvals", "list"), ("choom", "x")):
        one_line_error(hivectl(tmp_path, *args), "is the coordinator running")


# ---- a stale tool group ------------------------------------------------------------------


def test_a_stale_tool_group_is_skipped_and_shown(tmp_path: Path) -> None:
    """An unknown group warns and is skipped: the agent keeps the rest (not broken)."""
    seed_home(
        tmp_path,
        {"queen": AgentConfig(), "alice": 'tool_groups = ["messaging", "telepathy"]\n'},
        {"queen": None, "alice": "queen"},
        hive_toml=HIVE_TOML,
    )
    proc = start_serve(tmp_path)
    try:
        shown = ok_json(tmp_path, "agents", "show", "alice")
        assert shown["broken"] is None
        assert len(shown["config_warnings"]) == 1 and "'telepathy'" in shown["config_warnings"][0]
        assert ok_json(tmp_path, "agents", "show", "queen")["config_warnings"] == []
        human = hivectl(tmp_path, "agents", "show", "alice")
        assert human.returncode == 0
        assert "config warning: tool_groups: unknown group(s) 'telepathy' skipped" in human.stdout
        assert ok_json(tmp_path, "perms", "show", "alice")["tool_groups"] == ["messaging"]
        # The agent still works: it can send with the group it kept.
        sent = from_agent(tmp_path, "alice", "send", to="operator", body="still here")
        assert isinstance(sent, dict) and sent["to"] == "operator"
        one_line_error(hivectl(tmp_path, "agents", "show", "ghost"), "no agent named 'ghost'")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, (tmp_path / "serve.log").read_text()
    # All of it served by the coordinator on uvloop (hivectl serve's loop).
    assert "event loop uvloop" in (tmp_path / "serve.log").read_text()
