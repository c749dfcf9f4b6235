"""From inside its bubblewrap sandbox, as its own user, the attacker reaches for the hive.

A real coordinator (with its dashboard) and agent host run on a home under
/tmp with ``runtime = "bwrap"``; only the attacker and one benign agent are
active. The attacker's process — started through the very sandbox its claude
turns and bash tasks get — probes the filesystem (other agents' state and
runtime dirs, hive.db, the meta repo, the host's token file, the operator's
and other agents' sockets), its own socket (the in-agent socket), and
loopback HTTP (other agents' MCP endpoints and API).
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperhive.config import HivePaths
from hyperhive.permissions import ToolGroup
from tests.security.hostile import (
    ACTIVE,
    ATTACKER,
    MALLORY_GROUPS,
    TOPOLOGY,
    assert_unchanged,
    live_hive,
    snapshot,
)
from tests.support.hive import op_call, operator
from tests.support.model_server import ModelServer, always, text
from tests.support.sandboxed import SYSUSER_MARKS, Sandboxed, run_sandboxed, traversable_home
from tests.support.surfaces import mcp_client, result_text, until

pytestmark = [
    *SYSUSER_MARKS,  # makes system users
    pytest.mark.anyio,
    pytest.mark.e2e,
    pytest.mark.timeout(120),
]


@pytest.fixture
def home() -> Iterator[Path]:
    with traversable_home("hh-sec-", TOPOLOGY) as path:
        yield path


async def run_in(rt: Sandboxed, script: str, *args: str) -> Any:
    """Run a Python probe in the agent's sandbox; it prints one JSON line."""
    code, out = await run_sandboxed(rt, ["/usr/bin/python3", "-c", script, *args])
    assert code == 0, out
    return json.loads(out.strip().splitlines()[-1])


PROBE = r"""
import json, os, socket, sys, urllib.request, urllib.error
spec = json.loads(sys.argv[1])
out = {"uid": os.getuid(), "fs": {}, "sock": {}, "http": {}, "own": []}
for name, (path, how) in spec["fs"].items():
    try:
        # (A path outside the binds may still "exist" in the sandbox's own tmpfs skeleton:
        # the test judges a result against the real file, not by the call succeeding.)
        if how == "read":
            out["fs"][name] = ["read", open(path, "rb").read(64).hex()]
        elif how == "list":
            out["fs"][name] = ["listed", sorted(os.listdir(path))]
        elif how == "write":
            with open(path, "ab") as fh: fh.write(b"pwned")
            out["fs"][name] = ["wrote"]
        elif how == "create":
            with open(path, "xb") as fh: fh.write(b"pwned")
            out["fs"][name] = ["created"]
    except OSError as exc:
        out["fs"][name] = type(exc).__name__
for name, path in spec["sock"].items():
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path); out["sock"][name] = "reached"
    except OSError as exc:
        out["sock"][name] = type(exc).__name__
    finally:
        s.close()
for name, (method, url, headers, body) in spec["http"].items():
    req = urllib.request.Request(url, data=body.encode() if body else None, method=method,
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            out["http"][name] = [resp.status, resp.read(300).decode(errors="replace")]
    except urllib.error.HTTPError as exc:
        out["http"][name] = [exc.code, exc.read(300).decode(errors="replace")]
    except OSError as exc:
        out["http"][name] = [0, type(exc).__name__]
s = socket.socket(socket.AF_UNIX)
s.connect(spec["own_socket"])
reader = s.makefile("rb")
for frame in spec["own"]:
    s.sendall(json.dumps(frame).encode() + b"\n")
    out["own"].append(json.loads(reader.readline()))
print(json.dumps(out))
"""

INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "mallory", "version": "0"},
        },
    }
)
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


# Entries a listing may show: the skeleton bubblewrap builds for the attacker's own binds.
SKELETON = frozenset({ATTACKER, "minion", "agents", "agent-runtime", "config"})


def _leaked(real: Path, how: str, result: Any) -> bool:
    """Whether a probe's result reached the real file or directory (not a tmpfs stand-in)."""
    if isinstance(result, str):
        return result not in ("FileNotFoundError", "PermissionError")
    if how == "read":
        return real.is_file() and real.read_bytes()[:64].hex() == result[1]
    if how == "list":
        return bool(set(result[1]) & (set(os.listdir(real)) - SKELETON))
    if how == "write":
        return real.is_file() and real.read_bytes().endswith(b"pwned")
    return real.exists()  # create


def _refused(body: str) -> bool:
    """A 401 that says why: the unauthorized code and a message naming the token."""
    error = json.loads(body)["error"]
    return bool(error["code"] == "unauthorized" and "token" in error["message"])


def _flip(token: str) -> str:
    return ("A" if token[0] != "A" else "B") + token[1:]


async def test_the_sandbox_keeps_the_attacker_out_of_everything_not_its_own(
    home: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    model_server.set_script(always(text("ok")))
    async with live_hive(home, claude_bin, model_server, MALLORY_GROUPS, "bwrap") as (c, host):
        p = c.paths
        mallory, benign = host.agents[ATTACKER], host.agents["benign"]
        assert (
            mallory.enclosure.isolation is not None and mallory.enclosure.isolation.uid is not None
        )
        before = snapshot(p, files_of=[a for a in TOPOLOGY if a not in ACTIVE])
        victim_state = p.agent_state("victim")
        fs = {
            "victim notes": (str(victim_state / "notes.md"), "read"),
            "victim notes (write)": (str(victim_state / "notes.md"), "write"),
            "victim state dir": (str(victim_state), "list"),
            "victim home": (str(p.agent_home("victim")), "list"),
            "victim applied config": (str(p.applied_config("victim")), "read"),
            "agents dir": (str(p.agent_dir("victim").parent), "list"),
            "benign runtime dir": (str(benign.spec.runtime_dir), "list"),
            "benign mcp config": (str(benign.spec.runtime_dir / "mcp-config.json"), "read"),
            "hive.db": (str(p.db), "read"),
            "hive.db-wal": (str(p.db) + "-wal", "read"),
            "hive.db (write)": (str(p.db), "write"),
            "meta topology": (str(p.topology), "read"),
            "meta topology (write)": (str(p.topology), "write"),
            "meta HEAD": (str(p.meta / ".git" / "HEAD"), "read"),
            "meta dir": (str(p.meta), "list"),
            "host operator token": (str(p.run / "agent-host.json"), "read"),
            "dashboard url": (str(p.run / "dashboard.json"), "read"),
            "run dir": (str(p.run), "list"),
            "new file in run": (str(p.run / "evil.sock"), "create"),
            "hive.toml": (str(home / "hive.toml"), "write"),
            "logs": (str(p.logs), "list"),
        }
        socks = {
            "operator socket": str(p.host_sock),
            "host link socket": str(p.hosts_sock),
            "victim socket": str(p.agent_sock("victim")),
            "benign socket": str(p.agent_sock("benign")),
            "parent socket": str(p.agent_sock("boss")),
        }
        base = host.base_url
        stolen = secrets.token_urlsafe(32)
        http: dict[str, tuple[str, str, dict[str, str], str]] = {}
        for label, token in {
            "no token": None,
            "own token": mallory.token,
            "stolen-looking token": stolen,
            "benign's token, one char off": _flip(benign.token),
            "operator-looking token": _flip(host.operator_token),
        }.items():
            auth = {"authorization": f"Bearer {token}"} if token else {}
            http[f"benign hyperhive MCP, {label}"] = (
                "POST",
                f"{base}/agents/benign/mcp/hyperhive",
                {**MCP_HEADERS, **auth},
                INIT,
            )
            http[f"benign bash MCP, {label}"] = (
                "POST",
                f"{base}/agents/benign/mcp/bash",
                {**MCP_HEADERS, **auth},
                INIT,
            )
            http[f"benign state, {label}"] = ("GET", f"{base}/api/agents/benign/state", auth, "")
            http[f"benign events, {label}"] = ("GET", f"{base}/api/agents/benign/events", auth, "")
        own_auth = {"authorization": f"Bearer {mallory.token}"}
        http["own subagent_control with own token"] = (
            "POST",
            f"{base}/agents/{ATTACKER}/mcp/subagent_control",
            {**MCP_HEADERS, **own_auth},
            INIT,
        )
        http["victim (inactive) MCP with own token"] = (
            "POST",
            f"{base}/agents/victim/mcp/hyperhive",
            {**MCP_HEADERS, **own_auth},
            INIT,
        )
        http["basic auth with benign's name"] = (
            "GET",
            f"{base}/api/agents/benign/state",
            {"authorization": "Basic YmVuaWduOg=="},
            "",
        )
        own = [
            {"id": 1, "cmd": "get_agent_meta"},
            {"id": 2, "cmd": "send", "to": "victim", "body": "x", "from": "boss"},
            {"id": 3, "cmd": "wake", "from": "victim", "body": "x"},
            {"id": 4, "cmd": "set_parent", "child": ATTACKER, "new_parent": None},
            {"id": 5, "cmd": "kill", "agent": "boss"},
            {"id": 6, "cmd": "cancel_loose_end", "kind": "reminder", "row_id": 1},
        ]
        spec = {
            "fs": fs,
            "sock": socks,
            "http": http,
            "own_socket": str(p.agent_sock(ATTACKER)),
            "own": own,
        }
        seen = await run_in(mallory, PROBE, json.dumps(spec))

        assert seen["uid"] == mallory.enclosure.isolation.uid
        leaks = {k: v for k, v in seen["fs"].items() if _leaked(Path(fs[k][0]), fs[k][1], v)}
        assert not leaks, leaks
        reached = {
            k: v
            for k, v in seen["sock"].items()
            if v not in ("FileNotFoundError", "PermissionError")
        }
        assert not reached, reached
        opened = {k: v for k, v in seen["http"].items() if v[0] != 401 or not _refused(v[1])}
        assert not opened, opened

        replies = {r["id"]: r for r in seen["own"]}
        assert replies[1]["ok"] and replies[1]["result"]["name"] == ATTACKER
        expected = {
            2: ("malformed_frame", "identity comes from the socket"),
            3: ("permission_denied", "never someone else"),
            4: ("unknown_command", "unknown cmd 'set_parent'"),
            5: ("permission_denied", "not a descendant"),
            6: ("permission_denied", "belongs to victim"),
        }
        for rid, (code, fragment) in expected.items():
            err = replies[rid]["error"]
            assert err["code"] == code and fragment in err["message"], (rid, err)
        assert_unchanged(before, snapshot(p, files_of=[a for a in TOPOLOGY if a not in ACTIVE]))
        assert (victim_state / "notes.md").read_text() == "victim's private notes\n"


async def test_the_operator_dashboard_is_not_the_attackers(
    home: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    model_server.set_script(always(text("ok")))
    async with live_hive(home, claude_bin, model_server, MALLORY_GROUPS, "bwrap") as (c, host):
        before = snapshot(c.paths, files_of=[a for a in TOPOLOGY if a not in ACTIVE])
        url = json.loads((c.paths.run / "dashboard.json").read_text())["url"]
        form = {"content-type": "application/x-www-form-urlencoded"}
        spec = {
            "fs": {},
            "sock": {},
            "own": [],
            "own_socket": str(c.paths.agent_sock(ATTACKER)),
            "http": {
                "reparent itself to a root": (
                    "POST",
                    f"{url}/api/topology/set-parent",
                    form,
                    f"child={ATTACKER}&new_parent=",
                ),
            },
        }
        seen = await run_in(host.agents[ATTACKER], PROBE, json.dumps(spec))
        status, body = seen["http"]["reparent itself to a root"]
        after = snapshot(c.paths, files_of=[a for a in TOPOLOGY if a not in ACTIVE])
    assert status in (401, 403), (status, body)
    assert_unchanged(before, after)


def _exploit_ids(home: Path) -> tuple[Path, Path]:
    paths = HivePaths(home)
    return paths.agent_state(ATTACKER), paths.agent_state("victim") / "notes.md"


async def test_a_bash_task_cannot_write_through_a_planted_symlink(
    home: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    model_server.set_script(always(text("ok")))
    groups = (*MALLORY_GROUPS, ToolGroup.EXECUTION)
    async with live_hive(home, claude_bin, model_server, groups, "bwrap") as (c, host):
        own_state, notes = _exploit_ids(home)
        tasks = own_state / "harness" / "bash-tasks"
        # The tasks dir is the host's; the attacker owns its parent, so it swaps in its own.
        setup = (
            f"mv {own_state / 'harness'} {own_state / 'harness-old'} && mkdir -p {tasks} && "
            f"ln -s {notes} {tasks / 'pwn.out'} && echo planted"
        )
        url = f"{host.base_url}/agents/{ATTACKER}/mcp/bash"
        async with mcp_client(url, host.agents[ATTACKER].token) as bash:
            first = await bash.call_tool("run", {"cmd": setup, "name": "setup", "wait_seconds": 20})
            assert not first.is_error, result_text(first)
            await bash.call_tool(
                "run", {"cmd": "echo PWNED-BY-MALLORY", "name": "pwn", "wait_seconds": 20}
            )
    assert notes.read_text() == "victim's private notes\n", "victim's notes were overwritten"


async def test_git_in_a_childs_repo_never_runs_what_the_parent_planted(
    home: Path, claude_bin: Path, model_server: ModelServer
) -> None:
    """An ancestor may edit its descendant's proposed config repo (spec 004), .git
    included; the coordinator's own git there must never run a hook or filter."""
    model_server.set_script(always(text("ok")))
    async with live_hive(home, claude_bin, model_server, MALLORY_GROUPS, "bwrap") as (c, host):
        repo = c.paths.agent_config_repo("minion")
        # The host seeds the repo when it registers (#14), after it started mallory: the
        # repo is in mallory's sandbox from then on.

        def bound() -> bool:
            iso = host.agents[ATTACKER].enclosure.isolation
            return iso is not None and repo in iso.rw

        await until(bound, 60)
        # World-writable, outside every sandbox: a planted command run as anyone would land.
        marker = Path(tempfile.gettempdir()) / f"hh-git-marker-{secrets.token_hex(6)}"
        script = f"""
import json, os
repo = {str(repo)!r}
evil = "touch {marker}"
with open(os.path.join(repo, ".git", "config"), "a") as fh:
    fh.write("[filter \\"x\\"]\\n\\tclean = " + evil + "\\n\\tsmudge = " + evil + "\\n")
    fh.write("[core]\\n\\tfsmonitor = " + evil + "\\n")
with open(os.path.join(repo, ".gitattributes"), "w") as fh:
    fh.write("* filter=x\\n")
for hook in ("pre-commit", "post-commit", "reference-transaction", "post-index-change"):
    path = os.path.join(repo, ".git", "hooks", hook)
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\\n" + evil + "\\n")
    os.chmod(path, 0o755)
print(json.dumps("planted"))
"""
        await run_in(host.agents[ATTACKER], script)
        assert (repo / ".gitattributes").exists()
        # The operator proposes and applies a change to minion: commit, read, apply.
        async with operator(c.paths) as op:
            proposal = await op_call(op, "perms_set", agent="minion", tool_groups=["messaging"])
            await op_call(op, "approve", approval_id=proposal["approval_id"])
        asked = await c.approvals.request_apply_commit(ATTACKER, "minion", "HEAD")
        await c.approvals.resolve(asked.approval_id, True)
        assert c.registry.config("minion").tool_groups == [ToolGroup.MESSAGING]
        assert not marker.exists(), "the coordinator ran a hook or filter planted in the repo"
