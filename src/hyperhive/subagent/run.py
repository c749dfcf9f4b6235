"""One run of a subagent's claude: what it is built from, spawning it, reading its stream.

:func:`subagent_spec` is the one place a subagent's launch is derived from
its agent: ``groups`` is ``runtime.groups`` — the tuple the harness resolves
its own turns from — so ``--tools`` is the parent's own resolution.
:func:`spawn` writes the run's MCP config (0600, the agent's user's) and
starts claude in the agent's sandbox; :func:`converse` feeds the prompt on
stdin and folds the stream-json events into the subagent's record.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
from anyio.abc import Process

from hyperhive.agent import launch
from hyperhive.agent.sandbox import CLAUDE_OOM_SCORE_ADJ
from hyperhive.agent.stream import AssistantEvent, InitEvent, ResultEvent, parse_line
from hyperhive.atomic import atomic_write_text
from hyperhive.framing import FrameDecoder
from hyperhive.safefs import open_beneath
from hyperhive.subagent.host import SubagentHost
from hyperhive.subagent.records import SubagentRecord, keep_output

__all__ = ["converse", "spawn", "subagent_spec"]

MAX_STREAM_LINE = 64 << 20


def subagent_spec(rt: SubagentHost, rec: SubagentRecord, token: str) -> launch.SubagentSpec:
    """The launch of ``rec``'s next run; ``token`` is that run's control-surface token."""
    return launch.SubagentSpec(
        claude_bin=rt.hive.claude_bin or "claude",
        groups=rt.groups,  # the harness's own resolution: one per agent, nothing to drift
        config=rt.config,
        control_url=launch.agent_mcp_url(rt.base_url, rt.name, launch.SUBAGENT_CONTROL_SERVER),
        mcp_config_file=rt.runtime_dir / f"subagent-{rec.id}.json",
        token=token,
        system_prompt_file=Path(rec.prompt_file) if rec.prompt_file else None,
        session_id=rec.session_id,
        model=rec.model,
    )


async def spawn(rt: SubagentHost, rec: SubagentRecord, token: str, log_path: Path) -> Process:
    """Start the run's claude in the agent's sandbox, in ``rec.cwd``; stderr to ``log_path``."""
    spec = subagent_spec(rt, rec, token)
    argv = launch.subagent_argv(spec)  # refuses an empty --tools before anything is written
    atomic_write_text(spec.mcp_config_file, json.dumps(launch.subagent_mcp_config(spec)), 0o600)
    rt.give(spec.mcp_config_file)  # its claude runs as the agent's user
    env = launch.claude_env(
        {},
        rt.paths.agent_home(rt.name),
        (),
        # Not the agent's socket: that is the agent's identity at the coordinator.
        {**rt.config.env, **rt.hive_env(), "HIVE_SUBAGENT": rec.id, "HIVE_AGENT_SOCKET": ""},
        sandboxed=True,
    )
    # The log lives in the agent's state dir: open it without following planted links.
    log_fd = open_beneath(rt.state_dir, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    with os.fdopen(log_fd, "ab") as stderr:
        return await rt.sandbox(agent_socket=False).open_process(
            argv,
            cwd=Path(rec.cwd),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            oom_score_adj=CLAUDE_OOM_SCORE_ADJ,
        )


async def converse(process: Process, prompt: str, rec: SubagentRecord) -> ResultEvent | None:
    """Send ``prompt`` and read the stream to its end, updating ``rec`` as events arrive.

    Returns the run's ``result`` event (its session's totals: the run's spend is
    counted from them by the coordinator), if claude got that far.
    """
    assert process.stdin is not None and process.stdout is not None
    try:
        await process.stdin.send(prompt.encode())
        await process.stdin.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # claude died at once; its exit code and log tell why
    decoder = FrameDecoder(MAX_STREAM_LINE)
    last: ResultEvent | None = None
    async for chunk in process.stdout:
        for line in decoder.feed(chunk):
            if isinstance(line, Exception):
                continue  # an oversized line: dropped, the run goes on
            event = parse_line(line)
            if isinstance(event, InitEvent):
                rec.session_id = event.session_id
            elif isinstance(event, AssistantEvent) and event.text and not event.synthetic:
                rec.last_output = keep_output(event.text)
            elif isinstance(event, ResultEvent):
                last = event
                rec.session_id = event.session_id or rec.session_id
                if event.result:
                    rec.last_output = keep_output(event.result)
                if event.is_error:
                    rec.error = f"claude ended the run with {event.subtype}"
    return last
