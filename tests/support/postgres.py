"""A throwaway PostgreSQL cluster from Debian's packages, for tests and benchmarks.

``initdb`` + ``pg_ctl`` in a fresh temp dir; the server listens on a unix
socket in a 0700 directory of its own (outside anything an agent sandbox
binds) and, when asked, on a free loopback TCP port with ``scram-sha-256``
password auth: agents share the host's loopback, so TCP is never ``trust``.
As root the server runs as the ``postgres`` system user (postgres refuses
root). Each test gets a database of its own (``CREATE DATABASE`` is cheap).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import psycopg
import pytest

from tests.support.strays import OWNER_ENV, OWNER_FILE, PG_ROOT_PREFIX, owner_tag

__all__ = [
    "PgCluster",
    "pg_bindir",
    "pg_cluster",
    "pg_private_cluster",
    "pg_url",
    "postgres_available",
    "start_cluster",
]

# Bounded waits: pg_ctl gives up (and says so) rather than hanging a session.
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def pg_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<major>/bin`` holding ``initdb``, if any."""
    found = glob.glob("/usr/lib/postgresql/*/bin/initdb")
    if not found:
        return None
    return Path(max(found, key=lambda p: int(Path(p).parent.parent.name))).parent


def postgres_available() -> bool:
    return pg_bindir() is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgCluster:
    """One running cluster. ``superuser`` connects over the socket (reachable by its owner
    and root only); ``password`` is that role's TCP password."""

    bindir: Path
    root: Path
    port: int
    tcp: bool
    fsync: bool = True
    superuser: str = "postgres"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    _owner: pwd.struct_passwd | None = None
    _dbs: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    # One admin connection for CREATE/DROP DATABASE: a connection per call (a backend
    # forked each time) was most of a fresh database's cost on a loaded machine.
    _admin: psycopg.Connection[tuple[object, ...]] | None = None

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def sockdir(self) -> Path:
        return self.root / "sock"

    @property
    def logfile(self) -> Path:
        return self.root / "server.log"

    def url(self, dbname: str = "postgres", *, tcp: bool = False) -> str:
        """A libpq URL: over the socket (no password), or TCP with the password."""
        if tcp:
            if not self.tcp:
                raise ValueError("this cluster was started without TCP")
            pw = quote(self.password, safe="")
            return f"postgresql://{self.superuser}:{pw}@127.0.0.1:{self.port}/{dbname}"
        return f"postgresql://{self.superuser}@/{dbname}?host={self.sockdir}&port={self.port}"

    def over_tcp(self, url: str) -> str:
        """The database of ``url`` (one of this cluster's), over TCP with the password: for
        a process run as another user, who cannot reach the root-only socket directory."""
        return self.url(urlsplit(url).path.lstrip("/"), tcp=True)

    def _run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self._owner is not None:
            kwargs = {"user": self._owner.pw_uid, "group": self._owner.pw_gid, "extra_groups": []}
        done: subprocess.CompletedProcess[str] = subprocess.run(
            argv,
            cwd=self.root,
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "LC_ALL": "C.UTF-8",
                # The postmaster inherits it: a later session reaps it if this one is killed.
                OWNER_ENV: owner_tag(),
            },
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S + 10,
            check=check,
            **kwargs,  # type: ignore[call-overload]
        )
        return done

    def start(self) -> None:
        cmd = [str(self.bindir / "pg_ctl"), "start", "-w", "-t", str(START_TIMEOUT_S)]
        proc = self._run(*cmd, "-D", str(self.datadir), "-l", str(self.logfile), check=False)
        if proc.returncode != 0:
            raise RuntimeError(
                f"pg_ctl start failed ({proc.returncode}): {proc.stderr.strip()}\n"
                f"server log:\n{self.log_tail()}"
            )

    def stop(self, mode: str = "fast") -> None:
        cmd = [str(self.bindir / "pg_ctl"), "stop", "-w", "-t", str(STOP_TIMEOUT_S), "-m", mode]
        self._run(*cmd, "-D", str(self.datadir), check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        status = [str(self.bindir / "pg_ctl"), "status", "-D", str(self.datadir)]
        return self._run(*status, check=False).returncode == 0

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def _admin_execute(self, sql: str) -> None:
        """Run ``sql`` on the kept admin connection, reconnecting once if the server
        restarted under it."""
        for attempt in (1, 2):
            if self._admin is None or self._admin.closed:
                self._admin = psycopg.connect(self.url(), autocommit=True)
            try:
                self._admin.execute(sql)
                return
            except psycopg.OperationalError:
                self._admin.close()
                self._admin = None
                if attempt == 2:
                    raise

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its name."""
        name = f"{prefix}_{os.getpid()}_{next(self._dbs)}"
        # Without fsync, copying the template's files (and the two checkpoints that takes)
        # beats PostgreSQL 15's default of writing the template (~4 MB) through the WAL:
        # half the time of a test's fresh database on a loaded machine, 784 bytes of WAL.
        strategy = "" if self.fsync else " STRATEGY FILE_COPY"
        self._admin_execute(f'CREATE DATABASE "{name}"{strategy}')
        return name

    def drop_database(self, name: str) -> None:
        self._admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def destroy(self) -> None:
        if self._admin is not None:
            self._admin.close()
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster(
    *, tcp: bool = False, fsync: bool = True, listen: str = "127.0.0.1", allow: Sequence[str] = ()
) -> PgCluster:
    """initdb + start a cluster in a fresh temp dir. ``fsync=False`` is for tests that
    never crash the machine; a ``kill -9`` of postgres itself still loses nothing.
    ``listen`` (with ``tcp``): the addresses it listens on, e.g. ``*`` for containers on
    a bridge whose address may not exist yet; ``allow``: the networks (CIDR) besides
    loopback whose clients may log in with the password."""
    bindir = pg_bindir()
    if bindir is None:
        raise RuntimeError("no /usr/lib/postgresql/*/bin/initdb: run scripts/bootstrap --dev")
    owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    # /tmp rather than pytest's tmp dir: root's pytest dirs are 0700, unreachable to postgres.
    root = Path(tempfile.mkdtemp(prefix=PG_ROOT_PREFIX))
    # Who made it: a later session removes it, and stops its server, once this process is gone.
    (root / OWNER_FILE).write_text(owner_tag() + "\n")
    cluster = PgCluster(
        bindir=bindir, root=root, port=_free_port(), tcp=tcp, fsync=fsync, _owner=owner
    )
    if owner is None:
        cluster.superuser = pwd.getpwuid(os.geteuid()).pw_name
    cluster.sockdir.mkdir(mode=0o700)
    pwfile = root / "pwfile"
    pwfile.write_text(cluster.password + "\n")
    pwfile.chmod(0o600)
    if owner is not None:
        for path in (root, cluster.sockdir, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    root.chmod(0o700)
    try:
        cluster._run(
            str(bindir / "initdb"),
            "-D",
            str(cluster.datadir),
            "-U",
            cluster.superuser,
            "--pwfile",
            str(pwfile),
            # The socket dir is 0700 (its owner and root only); TCP needs the password.
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--no-instructions",
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {exc.stderr.strip()}") from exc
    pwfile.unlink()
    settings = {
        "port": str(cluster.port),
        "unix_socket_directories": f"'{cluster.sockdir}'",
        "listen_addresses": f"'{listen}'" if tcp else "''",
        "password_encryption": "'scram-sha-256'",
        "max_connections": "200",
        "shared_buffers": "'32MB'",
        "fsync": "on" if fsync else "off",
        "synchronous_commit": "on" if fsync else "off",
        "full_page_writes": "on" if fsync else "off",
    }
    with (cluster.datadir / "postgresql.conf").open("a") as conf:
        conf.write("\n# hyperhive test cluster\n")
        conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
    with (cluster.datadir / "pg_hba.conf").open("a") as hba:
        hba.writelines(f"host all all {network} scram-sha-256\n" for network in allow)
    try:
        cluster.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return cluster


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One cluster per test session (TCP with a password as well as the socket)."""
    if not postgres_available():
        pytest.fail("PostgreSQL is not installed: run scripts/bootstrap --dev")
    cluster = start_cluster(tcp=True, fsync=False)
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_private_cluster() -> Iterator[PgCluster]:
    """A cluster of the test's own, for tests that stop or restart the server."""
    if not postgres_available():
        pytest.fail("PostgreSQL is not installed: run scripts/bootstrap --dev")
    cluster = start_cluster(tcp=False, fsync=False)
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> Iterator[str]:
    """A fresh database of the session's cluster, as a socket URL; dropped afterwards."""
    name = pg_cluster.create_database()
    try:
        yield pg_cluster.url(name)
    finally:
        with contextlib.suppress(psycopg.Error):
            pg_cluster.drop_database(name)
