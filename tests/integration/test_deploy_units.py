"""deploy/Containerfile and deploy/systemd read offline (quick, in every pytest run).

The image is built and run for real by tests/image (scripts/image, Podman), and the
units started under systemd there; these checks read the files: each target's command
is a hivectl call hivectl accepts, the host target puts claude where the host's
hive.toml says, and the units pass ``systemd-analyze verify`` with ExecStart pointed at
this checkout's installed entry point.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hyperhive.config import HiveConfig
from tests.support.deploy import DEPLOY, REPO, assert_hivectl_accepts, expand

CONTAINERFILE = DEPLOY / "Containerfile"
UNITS = DEPLOY / "systemd"
INSTALLED_HIVECTL = "/opt/hyperhive/bin/hivectl"

Instruction = tuple[str, str]


def instructions(text: str) -> list[Instruction]:
    """(KEYWORD, arguments) per instruction: continuations joined, comments dropped."""
    out: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, rest = full.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "the file ends inside a continued line"
    return out


def stages(text: str) -> dict[str, list[Instruction]]:
    found: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    args: set[str] = set()  # ARGs declared before the first FROM may name a base
    for keyword, rest in instructions(text):
        if keyword == "ARG" and current is None:
            args.add(rest.split("=", 1)[0])
            continue
        if keyword == "FROM":
            image, _, name = rest.partition(" AS ")
            assert name, f"FROM {rest}: every stage is named (a build target)"
            base = image.strip()
            from_arg = base.startswith("${") and base[2:-1] in args
            assert "/" in base or base in found or from_arg, f"FROM {base}: not a stage or image"
            current = found[name.strip()] = [("FROM", base)]
        else:
            assert current is not None, f"{keyword} before the first FROM"
            current.append((keyword, rest))
    return found


def inherited(all_stages: dict[str, list[Instruction]], name: str) -> list[Instruction]:
    """A stage's instructions after those of the stages it is built FROM."""
    own = all_stages[name]
    base = own[0][1]
    return [*(inherited(all_stages, base) if base in all_stages else []), *own[1:]]


def last(steps: list[Instruction], keyword: str) -> str:
    values = [rest for k, rest in steps if k == keyword]
    assert values, f"no {keyword}"
    return values[-1]


@pytest.fixture(scope="module")
def image() -> dict[str, list[Instruction]]:
    return stages(CONTAINERFILE.read_text())


def test_both_targets_run_hivectl_subcommands(image: dict[str, list[Instruction]]) -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    for target, subcommand in (("coordinator", "serve"), ("host", "host")):
        steps = inherited(image, target)
        entrypoint = json.loads(last(steps, "ENTRYPOINT"))
        command = json.loads(last(steps, "CMD"))
        venv = Path(entrypoint[-1]).parents[1]
        assert Path(entrypoint[-1]).name in scripts  # hivectl, this package's script
        assert any(k == "RUN" and f"python3 -m venv {venv}" in r for k, r in steps)
        assert command[0] == subcommand
        assert_hivectl_accepts(command)
    # The coordinator drops root; the host keeps it (useradd, setpriv) and has bwrap.
    assert last(inherited(image, "coordinator"), "USER").split(":")[0] not in ("0", "root")
    host = inherited(image, "host")
    assert all(k != "USER" for k, _ in host)
    assert any(k == "RUN" and "bubblewrap" in r for k, r in host)


def test_the_host_image_puts_claude_where_the_host_config_says(
    image: dict[str, list[Instruction]],
) -> None:
    pinned = json.loads((REPO / "package.json").read_text())["dependencies"]
    assert "@anthropic-ai/claude-code" in pinned
    # scripts/image stages the npm install of package.json's pin as claude/node_modules.
    copies = [r for k, r in image["host"] if k == "COPY" and "node_modules" in r]
    (copy,) = copies
    target = Path(copy.split()[-1])
    for config in (DEPLOY / "k8s" / "host" / "host-hive.toml",):
        claude_bin = Path(tomllib.loads(config.read_text())["claude_bin"])
        assert claude_bin.is_relative_to(target) and claude_bin.parts[-2:] == (".bin", "claude")


# --- systemd ---


def unit_values(path: Path, key: str) -> list[str]:
    text = path.read_text().replace("\\\n", " ")
    return [
        line.split("=", 1)[1].strip() for line in text.splitlines() if line.startswith(f"{key}=")
    ]


def exec_start(path: Path, instance: str) -> list[str]:
    (line,) = unit_values(path, "ExecStart")
    values = {
        "HIVE_COORDINATOR": "wss://coordinator.example:7443",
        "CREDENTIALS_DIRECTORY": f"/run/credentials/{path.name.replace('@', '@' + instance)}",
        "RUNTIME_DIRECTORY": "/run/hyperhive-host",
    }
    return [expand(w.replace("%i", instance), values) for w in shlex.split(line)]


@pytest.mark.parametrize("unit", ["hyperhive-coordinator.service", "hyperhive-host@.service"])
def test_unit_execstart_is_a_real_hivectl_call(unit: str) -> None:
    argv = exec_start(UNITS / unit, "rack2")
    assert argv[0] == INSTALLED_HIVECTL
    assert_hivectl_accepts(argv[1:])
    if "host" in unit:
        assert argv[argv.index("--name") + 1] == "rack2"
        # The credential is the one systemd loaded for this instance.
        (load,) = unit_values(UNITS / unit, "LoadCredential")
        ident, source = load.split(":", 1)
        assert argv[argv.index("--credential-file") + 1].endswith("/" + ident)
        assert "%i" in source


def test_the_example_hive_toml_files_name_the_units_credentials() -> None:
    unit = UNITS / "hyperhive-coordinator.service"
    loaded = dict(v.split(":", 1) for v in unit_values(unit, "LoadCredential"))
    where = Path("/run/credentials") / unit.name
    coordinator = HiveConfig.model_validate(
        tomllib.loads((UNITS / "coordinator.hive.toml").read_text())
    )
    assert coordinator.hostlink is not None and coordinator.hostlink.problem() is None
    for path in (coordinator.store_url_file, coordinator.hostlink.tls_key):
        assert path is not None and path.parent == where and path.name in loaded
    host = HiveConfig.model_validate(tomllib.loads((UNITS / "host.hive.toml").read_text()))
    assert host.runtime == "bwrap" and host.store is None and host.store_url_file is None


@pytest.mark.parametrize(
    "unit",
    ["hyperhive-coordinator.service", "hyperhive-host@.service", "hyperhive-host@rack2.service"],
)
def test_systemd_analyze_verify(unit: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    entry_point = Path(sys.prefix) / "bin" / "hivectl"
    assert entry_point.exists(), "the package is not installed in this venv"
    for source in UNITS.glob("*.service"):
        text = source.read_text().replace(INSTALLED_HIVECTL, str(entry_point))
        (tmp_path / source.name).write_text(text)
    out = subprocess.run(
        [analyze, "verify", str(tmp_path / unit)], capture_output=True, text=True, timeout=120
    )
    # Unknown or misspelt keys are only warnings (exit 0): any output fails.
    assert out.returncode == 0 and not out.stderr.strip() and not out.stdout.strip(), (
        out.stdout + out.stderr
    )
