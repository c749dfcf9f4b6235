"""The real claude CLI, offline, against the scripted model server.

Each run gets its own HOME and cwd. The argv comes from ``launch`` (so these
tests pin the flags we really pass) with an empty MCP config, which makes the
``tools`` array the model receives exactly the built-ins claude resolved.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from hyperhive.agent.launch import (
    LaunchSpec,
    SubagentSpec,
    claude_env,
    harness_argv,
    subagent_argv,
)
from hyperhive.agent.steering import user_line
from hyperhive.agent.stream import (
    AssistantEvent,
    InitEvent,
    ResultEvent,
    StreamEvent,
    UserEvent,
    parse_line,
)
from hyperhive.agent.turnreport import TurnReport, classify_outcome, summarize_turn
from hyperhive.config import AgentConfig, HiveConfig
from hyperhive.permissions import ToolGroup, builtin_tools_for
from tests.support.model_server import (
    ApiError,
    ModelServer,
    Reply,
    Stall,
    Text,
    ToolUse,
    Usage,
    always,
    text,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

RUN_TIMEOUT = 45


@dataclass
class Run:
    events: list[StreamEvent]
    returncode: int
    stderr: str

    def report(self, window: int = 200_000) -> TurnReport:
        return summarize_turn(self.events, self.returncode, window)

    @property
    def init(self) -> InitEvent:
        return next(e for e in self.events if isinstance(e, InitEvent))

    @property
    def result(self) -> ResultEvent:
        return next(e for e in self.events if isinstance(e, ResultEvent))


@dataclass
class Agent:
    """One agent's directories and the way we launch claude for it."""

    claude_bin: Path
    server: ModelServer
    root: Path
    groups: tuple[ToolGroup, ...] = ToolGroup.AGENT_DEFAULT

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def work(self) -> Path:
        return self.root / "work"

    def setup(self) -> Agent:
        for d in (self.home, self.work, self.root / "run"):
            d.mkdir(parents=True, exist_ok=True)
        # Empty on purpose: the tools array is then claude's built-ins alone.
        (self.root / "run" / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
        (self.root / "run" / "system.md").write_text("HIVE-SYSTEM-PROMPT-MARKER\n")
        return self

    def env(self, *, sandboxed: bool = False) -> dict[str, str]:
        base = {
            "PATH": os.environ.get("PATH", ""),
            "ANTHROPIC_BASE_URL": self.server.url,
            "ANTHROPIC_API_KEY": "sk-test",
            "SECRET_OF_THE_HOST": "must not leak",
        }
        # No retries: an error script would otherwise back off for minutes.
        return claude_env(
            base,
            self.home,
            HiveConfig().env_passthrough,
            {"CLAUDE_CODE_MAX_RETRIES": "0"},
            sandboxed=sandboxed,
        )

    def harness_argv(self, session_id: str | None = None) -> list[str]:
        spec = LaunchSpec(
            agent="alice",
            claude_bin=str(self.claude_bin),
            groups=self.groups,
            capabilities=(),
            config=AgentConfig(),
            base_url="http://127.0.0.1:9",
            token="tok",
            mcp_config_file=self.root / "run" / "mcp.json",
            system_prompt_file=self.root / "run" / "system.md",
            session_id=session_id,
        )
        return harness_argv(spec)

    def subagent_argv(self) -> list[str]:
        spec = SubagentSpec(
            claude_bin=str(self.claude_bin),
            groups=self.groups,
            config=AgentConfig(),
            control_url="http://127.0.0.1:9/unused",
            mcp_config_file=self.root / "run" / "mcp.json",
        )
        return subagent_argv(spec)

    def popen(self, argv: Sequence[str], *, sandboxed: bool = False) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            cwd=self.work,
            env=self.env(sandboxed=sandboxed),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def run(self, prompt: str, argv: Sequence[str] | None = None, **kw: bool) -> Run:
        argv = argv if argv is not None else self.harness_argv()
        proc = self.popen(argv, **kw)
        # A harness turn reads stream-json user lines; a subagent, plain text.
        data = user_line(prompt) if "--input-format" in argv else prompt.encode()
        try:
            out, err = proc.communicate(data, timeout=RUN_TIMEOUT)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        events = [e for e in map(parse_line, out.splitlines()) if e is not None]
        return Run(events, proc.returncode, err.decode(errors="replace"))


@pytest.fixture
def agent(claude_bin: Path, model_server: ModelServer, tmp_path: Path) -> Agent:
    return Agent(claude_bin, model_server, tmp_path).setup()


def test_scripted_text_reply_is_an_ok_turn_with_usage(agent: Agent) -> None:
    agent.server.set_script([text("hello from the script", Usage(1200, 34, 500, 300))])
    run = agent.run("say hello")

    assert run.returncode == 0, run.stderr
    report = run.report(window=10_000)
    assert report.outcome == "ok"
    assert report.result_text == "hello from the script"
    assert any(
        isinstance(e, AssistantEvent) and e.text == "hello from the script" for e in run.events
    )
    assert report.session_id == run.init.session_id
    assert report.usage.input_tokens == 1200 and report.usage.output_tokens == 34
    assert report.usage.cache_read_input_tokens == 500
    assert report.usage.cache_creation_input_tokens == 300
    assert report.context_tokens == 2000
    assert report.context_usage == pytest.approx(0.2)
    # The session's totals so far, per model: a first run's are its own.
    [totals] = report.session_totals.values()
    assert (totals.input_tokens, totals.output_tokens) == (1200, 34)
    assert (totals.cache_read_tokens, totals.cache_creation_tokens) == (500, 300)
    assert totals.usd > 0  # priced by claude

    # Nothing but the one conversation request reached the server.
    [request] = agent.server.requests
    assert request.path == "/v1/messages" and request.query == {"beta": "true"}
    assert request.main and request.body["stream"] is True
    assert request.headers["x-api-key"] == "sk-test"
    assert request.messages[0]["content"] == "say hello"
    assert "HIVE-SYSTEM-PROMPT-MARKER" in json.dumps(request.body["system"])
    assert "must not leak" not in json.dumps(request.body)


@pytest.mark.parametrize(
    "groups",
    [ToolGroup.AGENT_DEFAULT, (*ToolGroup.AGENT_DEFAULT, ToolGroup.WEB_TOOLS)],
    ids=["agent_default", "agent_default+web_tools"],
)
@pytest.mark.parametrize("kind", ["harness", "subagent"])
def test_model_sees_exactly_the_resolved_builtins(
    agent: Agent, groups: tuple[ToolGroup, ...], kind: str
) -> None:
    agent.groups = groups
    agent.server.set_script([text("ok")])
    if kind == "harness":
        run = agent.run("hi")
    else:
        # As uid 0 (CI containers) claude refuses --dangerously-skip-permissions
        # unless told it is sandboxed.
        run = agent.run("hi", agent.subagent_argv(), sandboxed=True)
    assert run.returncode == 0, run.stderr

    [request] = agent.server.main_requests
    expected = sorted(builtin_tools_for(groups))
    if kind == "subagent":
        # --tools is the parent's; with --disable-slash-commands (no hive skills in a
        # subagent) claude drops Skill, having nothing for it to load.
        expected.remove("Skill")
    assert sorted(request.tool_names) == expected
    assert sorted(run.init.tools) == expected
    assert run.init.mcp_servers == []


def test_auth_failure_is_needs_login(agent: Agent) -> None:
    agent.server.set_script(always(ApiError(401, "authentication_error", "invalid x-api-key")))
    run = agent.run("hi")

    assert run.returncode == 1
    assert classify_outcome(run.events, run.returncode) == "needs_login"
    assert run.result.is_error and run.result.api_error_status == 401


def test_overloaded_is_api_error(agent: Agent) -> None:
    agent.server.set_script(always(ApiError(529, "overloaded_error", "Overloaded")))
    run = agent.run("hi")
    assert run.report().outcome == "api_error"


def test_builtin_tool_call_runs_and_its_result_reaches_the_model(agent: Agent) -> None:
    notes = agent.work / "notes.txt"
    notes.write_text("the secret is 42\n")
    agent.server.set_script(
        [
            Reply([Text("reading"), ToolUse("Read", {"file_path": str(notes)}, id="toolu_read1")]),
            text("the secret is 42", Usage(900, 10, 0, 0)),
        ]
    )
    run = agent.run("what is the secret?")

    assert run.report().outcome == "ok", run.stderr
    uses = [u for e in run.events if isinstance(e, AssistantEvent) for u in e.tool_uses]
    assert [(u.id, u.name) for u in uses] == [("toolu_read1", "Read")]
    results = [r for e in run.events if isinstance(e, UserEvent) for r in e.tool_results]
    assert [r.tool_use_id for r in results] == ["toolu_read1"]
    assert "the secret is 42" in results[0].text and not results[0].is_error

    first, second = agent.server.main_requests
    last = second.messages[-1]
    assert last["role"] == "user"
    [sent] = [b for b in last["content"] if b.get("type") == "tool_result"]
    assert sent["tool_use_id"] == "toolu_read1"
    assert "the secret is 42" in json.dumps(sent["content"])
    assert run.report().context_tokens == 900
    assert run.result.num_turns == 2


def test_resume_continues_the_conversation(agent: Agent) -> None:
    agent.server.set_script([text("first answer")])
    first = agent.run("first prompt")
    assert first.report().outcome == "ok", first.stderr
    session = first.result.session_id
    assert session

    agent.server.set_script([text("second answer")])
    second = agent.run("second prompt", agent.harness_argv(session_id=session))

    assert second.report().outcome == "ok", second.stderr
    assert second.result.session_id == session
    request = agent.server.main_requests[-1]
    history = json.dumps(request.messages)
    assert "first prompt" in history and "first answer" in history
    assert "second prompt" in json.dumps(request.messages[-1])


def test_killed_mid_turn_is_interrupted(agent: Agent) -> None:
    agent.server.set_script([Stall()])
    proc = agent.popen(agent.harness_argv())
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(user_line("hi"))
    proc.stdin.close()
    agent.server.wait_for(lambda reqs: any(r.main for r in reqs), timeout=RUN_TIMEOUT)

    os.killpg(proc.pid, signal.SIGKILL)
    out = proc.stdout.read()
    proc.wait(timeout=RUN_TIMEOUT)
    assert proc.stderr is not None
    proc.stderr.close()
    proc.stdout.close()
    events = [e for e in map(parse_line, out.splitlines()) if e is not None]
    assert classify_outcome(events, proc.returncode) == "interrupted"
