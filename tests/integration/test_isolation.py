"""Isolation for real: processes of two agents under bubblewrap as their own users."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from hyperhive.config import AgentConfig, ResourceLimits
from hyperhive.core.coordinator import Coordinator
from hyperhive.permissions import Capability
from hyperhive.sysusers import agent_user
from tests.support.hive import coordinator, op_call, operator, running_hive, seed_home
from tests.support.sandboxed import (
    SYSUSER_MARKS,
    Sandboxed,
    agent_enclosed,
    run_sandboxed,
    traversable_home,
)
from tests.support.surfaces import until

pytestmark = [
    *SYSUSER_MARKS,  # makes system users
    pytest.mark.anyio,
]


@pytest.fixture
def home() -> Iterator[Path]:
    with traversable_home("hh-iso-", ("alpha", "beta", "gamma", "lim")) as path:
        yield path


@asynccontextmanager
async def hive(home: Path, **agents: AgentConfig) -> AsyncIterator[Coordinator]:
    seed_home(home, agents, hive_toml='runtime = "bwrap"\n')
    async with coordinator(home) as coord:
        yield coord


async def run_in(rt: Sandboxed, script: str) -> tuple[int, str]:
    # Debian's python: reachable by any user, wherever this checkout lives.
    return await run_sandboxed(rt, ["/usr/bin/python3", "-c", script])


PROBE = """
import json, os, socket, sys
targets = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
"""


async def test_an_agent_cannot_reach_another_agent_or_the_hive(home: Path) -> None:
    async with hive(home, alpha=AgentConfig(), beta=AgentConfig()) as coord:
        alpha, beta = agent_enclosed(coord, "alpha"), agent_enclosed(coord, "beta")
        secret = beta.state_dir / "notes.md"
        secret.write_text("beta's notes")
        assert beta.enclosure.isolation is not None and beta.enclosure.isolation.uid is not None
        os.chown(secret, beta.enclosure.isolation.uid, beta.enclosure.isolation.gid or 0)
        targets = {
            "beta_state": str(secret),
            "db": str(coord.paths.db),
            "meta": str(coord.paths.topology),
            "operator_socket": str(coord.paths.host_sock),
            "beta_socket": str(coord.paths.agent_sock("beta")),
        }
        script = f"""
import os, socket
results = {{}}
for name, path in {targets!r}.items():
    try:
        if path.endswith('.sock'):
            s = socket.socket(socket.AF_UNIX); s.connect(path); results[name] = 'reached'
        else:
            open(path).read(); results[name] = 'read'
    except OSError as exc:
        results[name] = type(exc).__name__
print(os.getuid(), results)
"""
        code, out = await run_in(alpha, script)
        assert code == 0, out
        uid = pwd.getpwnam(agent_user(coord.paths, "alpha")).pw_uid
        assert out.startswith(f"{uid} ")
        for name in targets:
            assert f"'{name}': 'FileNotFoundError'" in out, out  # not even in its world


async def test_an_agent_reaches_its_own_dirs_socket_and_loopback(home: Path) -> None:
    async with hive(
        home, alpha=AgentConfig(capabilities=[Capability.READ_HOST_JOURNAL]), beta=AgentConfig()
    ) as coord:
        alpha = agent_enclosed(coord, "alpha", parent="beta")
        code, env = await run_in(alpha, "import os, json; print(json.dumps(dict(os.environ)))")
        seen = json.loads(env)
        assert seen["HIVE_AGENT"] == "alpha" and seen["HIVE_PARENT"] == "beta"
        assert seen["HIVE_TOOL_GROUPS"] == "messaging,meta,inbox,execution"
        assert seen["HIVE_CAPABILITIES"] == "read_host_journal"
        assert seen["HOME"] == str(alpha.spec.paths.agent_home("alpha"))
        assert "ANTHROPIC_API_KEY" not in seen or seen["ANTHROPIC_API_KEY"] == os.environ.get(
            "ANTHROPIC_API_KEY"
        )
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        sock = coord.paths.agent_sock("alpha")
        script = f"""
import json, os, socket
open({str(alpha.state_dir / "mine.md")!r}, 'w').write('ok')
s = socket.socket(socket.AF_UNIX); s.connect({str(sock)!r})
s.sendall(b'{{"id": 1, "cmd": "get_agent_meta"}}\\n')
reply = json.loads(s.makefile().readline())
t = socket.create_connection(('127.0.0.1', {port}))
print(reply['result']['name'], os.getcwd())
"""
        async with listener:
            code, out = await run_in(alpha, script)
        assert code == 0, out
        assert out.split() == ["alpha", str(alpha.spec.paths.agent_work("alpha"))]
        assert (alpha.state_dir / "mine.md").read_text() == "ok"


async def test_an_agent_reads_its_applied_config_and_cannot_change_it(home: Path) -> None:
    async with hive(home, alpha=AgentConfig(model="sonnet")) as coord:
        alpha = agent_enclosed(coord, "alpha")
        applied = alpha.spec.applied_config_file
        text = coord.registry.text("alpha")
        assert applied.read_text() == text and 'model = "sonnet"' in text
        # The same attempts on its own notes succeed: the probe tells a refusal from a slip.
        probe = f"""
import os
def attempt(name, fn):
    try:
        fn(); return name + "=done"
    except OSError as exc:
        return name + "=" + type(exc).__name__
def write(path):
    with open(path, "a") as fh: fh.write("model = 'opus'\\n")
def create(path):
    with open(path, "x") as fh: fh.write("model = 'opus'\\n")
results = []
for where in ({str(applied)!r}, {str(alpha.state_dir / "agent.toml")!r}):
    if not where.startswith({str(alpha.state_dir)!r}):
        results.append("read=" + str(open(where).read() == {text!r}))
    else:
        open(where, "w").write("mine")
    results += [
        attempt("write", lambda: write(where)),
        attempt("chmod", lambda: os.chmod(where, 0o666)),
        attempt("create", lambda: create(where + ".new")),
        attempt("rename", lambda: os.rename(where + ".new" if os.path.exists(where + ".new")
                                            else where, where + ".old")),
        attempt("unlink", lambda: os.unlink(where)),
    ]
print(" ".join(results))
"""
        code, out = await run_in(alpha, probe)
        assert code == 0, out
        theirs, mine = out.split()[:6], out.split()[6:]
        assert theirs[0] == "read=True", out
        for result in theirs[1:]:
            assert result.split("=")[1] in ("PermissionError", "OSError"), out
        assert all(r.endswith("=done") for r in mine), out
        assert applied.read_text() == text
        assert applied.stat().st_uid == os.geteuid()  # the host's, not the agent's
        assert not applied.with_name("agent.toml.new").exists()


async def test_resource_limits_hold(home: Path) -> None:
    limited = AgentConfig(limits=ResourceLimits(pids=16))
    async with hive(home, lim=limited) as coord:
        rt = agent_enclosed(coord, "lim")
        if rt.enclosure.isolation is None or not rt.enclosure.isolation.cgroups:
            pytest.fail(f"pids cgroup unavailable here: {rt.enclosure.notes}")
        script = """
import os, time
kids = 0
try:
    for _ in range(64):
        pid = os.fork()
        if pid == 0:
            time.sleep(3); os._exit(0)
        kids += 1
except OSError as exc:
    print('refused after', kids, type(exc).__name__)
"""
        code, out = await run_in(rt, script)
        assert "refused after" in out, out
        assert int(out.split()[2]) < 16


async def test_an_agent_and_its_ancestors_edit_its_proposed_config(
    home: Path, claude_bin: Path
) -> None:
    seed_home(
        home,
        {"alpha": AgentConfig(), "beta": AgentConfig()},
        {"alpha": None, "beta": "alpha"},
        hive_toml='runtime = "bwrap"\n',
    )
    # A real host (#14): it seeds the repos when it registers, after it started the
    # agents, and their sandboxes bind them from then on. Nobody mails them: no turn.
    async with running_hive(home, claude_bin, runtime="bwrap") as (coord, host):
        repo = coord.paths.agent_config_repo("beta")

        def bound(name: str) -> bool:
            rt = host.agents.get(name)
            return (
                rt is not None
                and rt.enclosure.isolation is not None
                and repo in rt.enclosure.isolation.rw
            )

        await until(lambda: bound("alpha") and bound("beta"), 60)
        alpha, beta = host.agents["alpha"], host.agents["beta"]

        def commit(line: str, message: str) -> str:
            return f"""
import subprocess
with open({str(repo / "agent.toml")!r}, "a") as fh:
    fh.write({line!r} + "\\n")
r = subprocess.run(["git", "-C", {str(repo)!r}, "commit", "-qam", {message!r}],
                   capture_output=True, text=True)
print(r.returncode, r.stderr.strip())
"""

        code, out = await run_in(beta, commit('model = "sonnet"', "beta picks a model"))
        assert code == 0 and out.startswith("0"), out
        code, out = await run_in(alpha, commit('subagent_model = "haiku"', "alpha adds one"))
        assert code == 0 and out.startswith("0"), out
        asked = await coord.approvals.request_apply_commit("alpha", "beta", "HEAD")
        await coord.approvals.resolve(asked.approval_id, True)
        applied = coord.registry.config("beta")
        assert applied.model == "sonnet" and applied.subagent_model == "haiku"
        # The coordinator's git ran as beta in beta's repo, never as root.
        assert repo.stat().st_uid == pwd.getpwnam(agent_user(coord.paths, "beta")).pw_uid

        # A child spawned while alpha runs: its repo, seeded by the host after the spawn,
        # is in alpha's sandbox from then on (no restart).
        async with operator(coord.paths) as op:
            await op_call(op, "spawn", name="gamma", parent="alpha")
        repo = coord.paths.agent_config_repo("gamma")

        def seeded() -> bool:
            # The host seeds the repo (its first commit) as it binds it: until that commit
            # lands, alpha's agent.toml would be untracked and `commit -a` find nothing.
            heads = repo / ".git" / "refs" / "heads"
            return heads.is_dir() and any(heads.iterdir())

        await until(lambda: bound("alpha") and seeded(), 60)
        code, out = await run_in(alpha, commit('model = "haiku"', "alpha sets gamma's model"))
        assert code == 0 and out.startswith("0"), out
        # The operator's proposal rewrites agent.toml on the host: alpha still writes it
        # (a file written 0644 under an ACL capped alpha's entry at read).
        await coord.approvals.propose(
            "operator", "gamma", AgentConfig(model="opus"), "the operator picks opus"
        )
        assert (repo / "agent.toml").stat().st_mode & 0o060 == 0o060
        code, out = await run_in(alpha, commit('subagent_model = "haiku"', "alpha again"))
        assert code == 0 and out.startswith("0"), out
