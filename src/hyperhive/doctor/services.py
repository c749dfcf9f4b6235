"""The hive's checks: its store, its agent hosts, and the forge and homeserver it uses."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing

import httpx

from hyperhive.config import HiveConfig, HivePaths
from hyperhive.doctor.model import Check, fail, ok, skip
from hyperhive.protocol import HostView

__all__ = ["check_forge", "check_hosts", "check_matrix", "check_store"]

ANSWER_WITHIN_S = 10.0


def _where(url: str) -> str:
    """A PostgreSQL URL without its password: host, port and database."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(url)
    except Exception:  # a URL psycopg cannot parse says so when connecting
        return "the configured PostgreSQL"
    host, port, db = (
        parts.get("host") or "localhost",
        parts.get("port") or 5432,
        parts.get("dbname"),
    )
    return f"PostgreSQL at {host}:{port}/{db or ''}"


def check_store(hive: HiveConfig, paths: HivePaths) -> Check:
    name = "store"
    if hive.store:
        import psycopg

        where = _where(hive.store)
        try:
            with psycopg.connect(hive.store, connect_timeout=int(ANSWER_WITHIN_S)) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            reason = " ".join(str(exc).split())[:400]
            return fail(
                name,
                f"{where} does not answer: {reason}",
                "start PostgreSQL there, or correct the URL (hive.toml's store or "
                "store_url_file, or HIVE_STORE_URL); `psql URL` tries the same connection",
            )
        return ok(name, f"{where} answers")
    db = paths.db
    if not db.exists():
        return ok(name, f"SQLite: {db} does not exist yet; the first start creates it")
    try:
        lite = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=ANSWER_WITHIN_S)
        with closing(lite):
            lite.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return fail(
            name,
            f"SQLite {db} cannot be read: {exc}",
            "see the coordinator's log; restore the file from a backup if it is corrupt",
        )
    return ok(name, f"SQLite {db} is readable")


def _host_check(host: HostView, now: float) -> Check:
    name = f"host {host.name}"
    agents = f"{len(host.agents)} agent(s)"
    if host.link == "connected":
        lease = (
            f", lease for {host.lease_expires_at - now:.0f} s more"
            if host.lease_expires_at is not None
            else ", this machine's own (no lease: its link is a local socket)"
        )
        return ok(name, f"linked (epoch {host.epoch}){lease}, {agents}")
    if host.link == "revoked":
        return skip(name, "its credential is revoked (`hivectl hosts revoke`)")
    run_it = (
        f"start it on its machine: `hivectl host --coordinator wss://COORDINATOR:PORT --name "
        f"{host.name} --credential-file FILE` (its console says why it cannot link)"
    )
    if host.link == "disconnected":
        until = host.lease_expires_at or now
        return fail(
            name,
            f"its link dropped; its lease holds its {agents} for "
            f"{max(0.0, until - now):.0f} s more",
            run_it,
        )
    if host.link == "expired":
        lost = ", ".join(host.lost_agents) or "none"
        return fail(name, f"its lease expired; agents lost with it: {lost}", run_it)
    return fail(name, "registered but never linked", run_it)


def check_hosts(hosts: list[HostView] | None) -> list[Check]:
    """One check per agent host (``None``: the hive is not running, so none to ask)."""
    if hosts is None:
        return [skip("hosts", "the hive is not running (`hivectl up`): no host link to check")]
    if not hosts:
        return [fail("hosts", "no agent host is linked", "`hivectl up` starts one on this machine")]
    now = time.time()
    return [_host_check(h, now) for h in hosts]


def _answers(name: str, url: str, what: str) -> Check:
    try:
        answer = httpx.get(url, timeout=ANSWER_WITHIN_S)
    except httpx.HTTPError as exc:
        return fail(
            name,
            f"{what} at {url} does not answer: {exc}",
            f"start it, or correct its URL in hive.toml's [{name}]",
        )
    if answer.status_code != 200:
        return fail(
            name,
            f"{what} at {url} answered {answer.status_code}",
            f"check that hive.toml's [{name}] URL is the server's base URL",
        )
    return ok(name, f"{what} at {url} answers")


def check_matrix(hive: HiveConfig) -> Check:
    if hive.matrix is None:
        return skip("matrix", "no [matrix] in hive.toml")
    base = hive.matrix.homeserver.rstrip("/")
    return _answers("matrix", f"{base}/_matrix/client/versions", "the homeserver")


def check_forge(hive: HiveConfig) -> Check:
    if hive.forge is None:
        return skip("forge", "no [forge] in hive.toml")
    return _answers("forge", f"{hive.forge.url.rstrip('/')}/api/v1/version", "the forge")
