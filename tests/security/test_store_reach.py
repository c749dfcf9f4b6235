"""From inside an agent's bubblewrap sandbox, the hive's PostgreSQL database is out of reach.

Agents share the host's loopback (``--share-net``), so the database's defence is
its own: its unix socket lives in a 0700 directory no sandbox binds, TCP asks
for a password (``scram-sha-256``, never ``trust``), and the URL holding that
password is in a 0600 file only the coordinator can read. A real cluster
(``tests/support/postgres.py``) and a real sandbox, as the agent's own user.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperhive.agent.spec import AgentSpec
from hyperhive.config import AgentConfig, HiveConfig, HivePaths
from tests.support.postgres import PgCluster
from tests.support.sandboxed import SYSUSER_MARKS, enclosed, run_sandboxed, traversable_home

pytestmark = [
    *SYSUSER_MARKS,  # makes system users
    pytest.mark.anyio,
    pytest.mark.timeout(120),
]

AGENT = "pgthief"

# Debian's python, no third-party modules: the probe speaks the wire protocol itself.
PROBE = r"""
import json, os, socket, struct, sys
spec = json.loads(sys.argv[1])
out = {"uid": os.getuid(), "unix": {}, "files": {}}
for path in spec["unix"]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path); out["unix"][path] = "reached"
    except OSError as exc:
        out["unix"][path] = type(exc).__name__
    finally:
        s.close()
for path in spec["files"]:
    try:
        out["files"][path] = ["read", open(path).read()]
    except OSError as exc:
        out["files"][path] = type(exc).__name__
# A StartupMessage as the superuser with no password: what does the server ask for?
s = socket.create_connection(("127.0.0.1", spec["port"]), timeout=10)
params = b"user\0" + spec["user"].encode() + b"\0database\0" + spec["db"].encode() + b"\0\0"
s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
kind = s.recv(1)
length = struct.unpack("!i", s.recv(4))[0]
body = s.recv(length - 4)
code = struct.unpack("!i", body[:4])[0] if kind == b"R" else body.decode(errors="replace")
out["tcp"] = [kind.decode(), code]
s.close()
print(json.dumps(out))
"""

SASL = 10  # AuthenticationSASL: the server wants a SCRAM exchange (a password)


@pytest.fixture
def home() -> Iterator[Path]:
    with traversable_home("hh-sec-pg-", (AGENT,)) as path:
        yield path


async def test_an_agent_cannot_reach_the_hive_database(home: Path, pg_cluster: PgCluster) -> None:
    db = pg_cluster.create_database()
    url_file = home / "store.url"
    url_file.write_text(pg_cluster.url(db, tcp=True) + "\n")
    url_file.chmod(0o600)
    rt = enclosed(
        AgentSpec(
            name=AGENT,
            config=AgentConfig(),
            paths=HivePaths(home),
            hive=HiveConfig(runtime="bwrap"),
        )
    )
    assert rt.enclosure.isolation is not None and rt.enclosure.isolation.uid is not None
    socket_path = pg_cluster.sockdir / f".s.PGSQL.{pg_cluster.port}"
    assert socket_path.exists()
    spec = {
        "unix": [str(socket_path), f"/var/run/postgresql/.s.PGSQL.{pg_cluster.port}"],
        "files": [str(url_file)],
        "port": pg_cluster.port,
        "user": pg_cluster.superuser,
        "db": db,
    }
    argv = ["/usr/bin/python3", "-c", PROBE, json.dumps(spec)]
    code, raw = await run_sandboxed(rt, argv, agent_socket=False)
    assert code == 0, raw
    out = json.loads(raw.strip().splitlines()[-1])

    assert out["uid"] == rt.enclosure.isolation.uid  # the probe really ran as the agent's user
    for path, result in out["unix"].items():
        assert result in ("FileNotFoundError", "PermissionError"), (path, result)
    assert out["files"][str(url_file)] in ("FileNotFoundError", "PermissionError")
    # Loopback reaches the port (agents share the network), but only with a password.
    assert out["tcp"] == ["R", SASL], out["tcp"]
