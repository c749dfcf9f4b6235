"""The bubblewrap argv: what an agent's process can see and touch."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperhive.agent.bwrap import Isolation, isolated_argv

HOME = Path("/hive/agents/a")
STATE, AHOME, WORK = HOME / "state", HOME / "home", HOME / "work"
SOCK = Path("/hive/run/agents/a.sock")


def _iso(**kw: object) -> Isolation:
    base: dict[str, object] = {
        "agent": "a",
        "uid": 990,
        "gid": 991,
        "rw": (STATE, AHOME, WORK),
        "ro": (Path("/opt/venv"), Path("/hive/run/agent-runtime/a")),
        "sockets": (SOCK,),
    }
    base.update(kw)
    return Isolation(**base)  # type: ignore[arg-type]


def _pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == flag]


def test_drops_to_the_agent_user_then_unshares_everything_but_the_net() -> None:
    argv = isolated_argv(_iso(), ["claude", "--print"], WORK)
    assert argv[:5] == ["setpriv", "--reuid=990", "--regid=991", "--clear-groups", "--"]
    bw = argv[5:]
    assert bw[0] == "bwrap"
    for flag in ("--unshare-all", "--share-net", "--die-with-parent", "--new-session"):
        assert flag in bw
    assert bw[-3:] == ["--", "claude", "--print"]
    assert bw[bw.index("--chdir") + 1] == str(WORK)


def test_only_the_agents_own_dirs_are_writable() -> None:
    argv = isolated_argv(_iso(), ["true"], WORK)
    writable = {src for src, dst in _pairs(argv, "--bind")}
    assert writable == {str(STATE), str(AHOME), str(WORK), str(SOCK)}
    for src, dst in _pairs(argv, "--bind") + _pairs(argv, "--ro-bind"):
        assert src == dst  # same paths inside and out: nothing to translate
    readonly = {src for src, _ in _pairs(argv, "--ro-bind")}
    assert {"/usr", "/etc", "/opt/venv", "/hive/run/agent-runtime/a"} <= readonly
    assert not any(p.startswith("/hive") and "agent-runtime" not in p for p in readonly)
    assert ["--tmpfs", "/tmp"] == argv[argv.index("--tmpfs") : argv.index("--tmpfs") + 2]


def test_an_ancestor_gets_its_descendants_config_repos() -> None:
    child_repo = Path("/hive/agents/b/config")
    argv = isolated_argv(_iso(rw=(STATE, AHOME, WORK, child_repo)), ["true"], WORK)
    assert (str(child_repo), str(child_repo)) in _pairs(argv, "--bind")
    assert all("/agents/b/state" not in a for a in argv)


def test_cgroups_are_joined_before_anything_runs() -> None:
    cg = Path("/sys/fs/cgroup/pids/hh-a")
    argv = isolated_argv(_iso(cgroups=(cg,)), ["true"], WORK)
    assert argv[:2] == ["/bin/sh", "-c"]
    assert "echo $$ > /sys/fs/cgroup/pids/hh-a/cgroup.procs" in argv[2]
    assert argv[2].endswith('|| exit 97; exec "$@"')
    assert argv[4] == "setpriv"


def test_not_root_runs_bwrap_as_the_host_user() -> None:
    argv = isolated_argv(_iso(uid=None, gid=None), ["true"], WORK)
    assert argv[0] == "bwrap"


def test_refusals() -> None:
    with pytest.raises(ValueError, match="empty argv"):
        isolated_argv(_iso(), [], WORK)
    with pytest.raises(ValueError, match="not one of a's writable dirs"):
        isolated_argv(_iso(), ["true"], Path("/etc"))
    assert isolated_argv(_iso(), ["true"], WORK / "sub")[-1] == "true"


def test_system_links_follow_the_host_layout() -> None:
    merged = isolated_argv(_iso(existing=frozenset({"/usr", "/etc", "/bin", "/lib"})), ["t"], WORK)
    assert ("usr/bin", "/bin") in _pairs(merged, "--symlink")
    assert not any(dst == "/lib64" for _, dst in _pairs(merged, "--symlink"))
    assert not any(src == "/opt" for src, _ in _pairs(merged, "--ro-bind"))


def test_a_subagent_sandbox_has_no_agent_socket(tmp_path: Path) -> None:
    from hyperhive.agent.enclosure import Enclosure
    from hyperhive.agent.spec import AgentSpec
    from hyperhive.config import AgentConfig, HiveConfig, HivePaths

    spec = AgentSpec(name="a", config=AgentConfig(), paths=HivePaths(tmp_path), hive=HiveConfig())
    enclosure = Enclosure(_iso())
    with_socket = enclosure.sandbox(spec).command(["true"], WORK)
    without = enclosure.sandbox(spec, agent_socket=False).command(["true"], WORK)
    assert (str(SOCK), str(SOCK)) in _pairs(with_socket, "--bind")
    assert str(SOCK) not in without


def test_an_overlay_is_bound_read_only_over_the_system_dirs() -> None:
    own = Path("/hive/run/choom/a/claude-code")
    argv = isolated_argv(_iso(overlays=((own, Path("/etc/claude-code")),)), ["true"], WORK)
    binds = _pairs(argv, "--ro-bind")
    assert (str(own), "/etc/claude-code") in binds
    # After /etc itself, so it shows over the machine's /etc/claude-code; never writable.
    assert binds.index((str(own), "/etc/claude-code")) > binds.index(("/etc", "/etc"))
    assert (str(own), "/etc/claude-code") not in _pairs(argv, "--bind")
