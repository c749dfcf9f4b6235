"""The hive's side of the homeserver: agents' accounts made, signed into, and deactivated.

Accounts are made with Synapse's admin API — shared-secret registration
(``/_synapse/admin/v1/register``, an HMAC over a nonce) or, with an admin
token, ``PUT /_synapse/admin/v2/users/<id>``; Matrix client libraries do not
cover the admin API, so these few calls are plain HTTP. Signing in is the
client API, through matrix-nio.

This runs on the coordinator only (issue #14: hosts hold no hive-wide
credential); an agent's host gets the agent's own access token from it.

An agent's password is derived from the hive's credential (HMAC of the user
ID): the coordinator can sign an agent in again after its token file was lost
without keeping passwords anywhere, and a user of that name that the hive
did not make (whose password is not that) is refused, never taken over.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import quote

import httpx

from hyperhive.errors import HiveError
from hyperhive.matrix.config import MatrixConfig, read_admin_token, read_shared_secret
from hyperhive.matrix.errors import MatrixError, MatrixUnreachable
from hyperhive.matrix.identity import Account

__all__ = ["MatrixAdmin", "deactivate_agent", "password_for", "sign_out_agent"]

log = logging.getLogger(__name__)

TIMEOUT = 15.0
DEVICE_NAME = "hyperhive"


def password_for(credential: str, user_id: str) -> str:
    """The hive-derived password of ``user_id`` (only the holder of ``credential`` knows it)."""
    return hmac.new(
        credential.encode(), b"hyperhive matrix password\0" + user_id.encode(), hashlib.sha256
    ).hexdigest()


def registration_mac(secret: str, nonce: str, user: str, password: str, admin: bool) -> str:
    """Synapse's shared-secret registration MAC (HMAC-SHA1, NUL-separated fields)."""
    fields = (nonce, user, password, "admin" if admin else "notadmin")
    message = b"\x00".join(f.encode() for f in fields)
    return hmac.new(secret.encode(), message, hashlib.sha1).hexdigest()


class MatrixAdmin:
    """One homeserver, administered with the hive's shared secret or admin token."""

    def __init__(self, config: MatrixConfig, transport: httpx.AsyncBaseTransport | None = None):
        config.require_credential()
        self.config = config
        self.secret = read_shared_secret(config)
        self.admin_token = read_admin_token(config)
        self.credential = self.secret or self.admin_token or ""
        self._http = httpx.AsyncClient(
            base_url=config.homeserver, timeout=TIMEOUT, transport=transport
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    @asynccontextmanager
    async def guard(self, doing: str) -> AsyncIterator[None]:
        try:
            yield
        except HiveError:
            raise
        except httpx.TransportError as exc:
            raise MatrixUnreachable(
                f"the homeserver at {self.config.homeserver} is unreachable while {doing} "
                f"({type(exc).__name__}: {exc or 'no answer'}); check [matrix] homeserver "
                "in hive.toml and that the homeserver is running"
            ) from exc
        except ValueError as exc:
            raise MatrixError(
                f"the homeserver at {self.config.homeserver} gave an answer that is not JSON "
                f"while {doing}; is [matrix] homeserver its client API base URL?"
            ) from exc

    def _refused(self, doing: str, resp: httpx.Response) -> MatrixError:
        try:
            body = resp.json()
            why = f"{body.get('errcode', '?')}: {body.get('error', '')}"
        except ValueError:
            why = resp.text[:200]
        return MatrixError(
            f"the homeserver at {self.config.homeserver} refused {doing}: HTTP "
            f"{resp.status_code} {why}"
        )

    # ---- accounts -------------------------------------------------------------------

    async def provision(self, agent: str) -> Account:
        """``agent``'s account (made if missing) and a fresh access token for it."""
        localpart, user_id = self.config.localpart(agent), self.config.user_id(agent)
        password = password_for(self.credential, user_id)
        if self.secret is not None:
            made = await self._register(localpart, password, admin=False, display=agent)
            if made is not None:
                log.info("matrix account %s registered for agent %s", user_id, agent)
                return made
        else:
            await self._ensure_user(user_id, password, agent)
        return await self.login(user_id, password)

    async def _register(
        self, localpart: str, password: str, *, admin: bool, display: str
    ) -> Account | None:
        """Register by shared secret; None when the user already exists."""
        assert self.secret is not None
        path = "/_synapse/admin/v1/register"
        async with self.guard(f"registering {localpart}"):
            got = await self._http.get(path)
            if got.status_code != 200:
                raise self._refused("shared-secret registration (is it enabled?)", got)
            nonce = got.json()["nonce"]
            resp = await self._http.post(
                path,
                json={
                    "nonce": nonce,
                    "username": localpart,
                    "password": password,
                    "displayname": display,
                    "admin": admin,
                    "mac": registration_mac(self.secret, nonce, localpart, password, admin),
                },
            )
            body = resp.json()
        if resp.status_code == 400 and body.get("errcode") == "M_USER_IN_USE":
            return None
        if resp.status_code == 403 and "HMAC" in str(body.get("error", "")):
            raise MatrixError(
                f"the homeserver at {self.config.homeserver} rejected the shared secret; "
                "put Synapse's registration_shared_secret in [matrix] "
                "registration_shared_secret_file"
            )
        if resp.status_code != 200:
            raise self._refused(f"registering {localpart}", resp)
        return Account(
            user_id=body["user_id"],
            device_id=body["device_id"],
            access_token=body["access_token"],
            homeserver=self.config.homeserver,
        )

    async def _ensure_user(self, user_id: str, password: str, agent: str) -> None:
        """Admin-token mode: create ``user_id`` unless it exists (then login decides)."""
        path = f"/_synapse/admin/v2/users/{quote(user_id)}"
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        async with self.guard(f"looking up {user_id}"):
            got = await self._http.get(path, headers=headers)
            if got.status_code == 404:
                made = await self._http.put(
                    path, headers=headers, json={"password": password, "displayname": agent}
                )
                if made.status_code not in (200, 201):
                    raise self._refused(f"creating {user_id}", made)
                log.info("matrix account %s created for agent %s", user_id, agent)
            elif got.status_code in (401, 403):
                raise MatrixError(
                    f"the homeserver at {self.config.homeserver} rejected the admin token; "
                    "put a server admin's access token in [matrix] admin_token_file"
                )
            elif got.status_code != 200:
                raise self._refused(f"looking up {user_id}", got)

    async def login(self, user_id: str, password: str) -> Account:
        """A new device and token for ``user_id`` (the client API, through matrix-nio)."""
        from nio import AsyncClient, LoginResponse

        client = AsyncClient(self.config.homeserver, user_id)
        try:
            async with self.guard(f"signing in as {user_id}"):
                resp = await client.login(password=password, device_name=DEVICE_NAME)
        except OSError as exc:  # aiohttp's connection errors
            raise MatrixUnreachable(
                f"the homeserver at {self.config.homeserver} is unreachable while signing in "
                f"as {user_id} ({exc})"
            ) from exc
        finally:
            await client.close()
        if not isinstance(resp, LoginResponse):
            raise MatrixError(
                f"{user_id} exists on {self.config.homeserver} but the hive cannot sign in as "
                f"it ({getattr(resp, 'message', resp)}): it was not made by this hive, or is "
                "deactivated. Set [matrix] hive in hive.toml so agents' IDs are new, or "
                "remove the account on the homeserver"
            )
        return Account(resp.user_id, resp.device_id, resp.access_token, self.config.homeserver)

    async def _admin_token(self) -> tuple[str, bool]:
        """An admin access token, and whether it is a session of ours to log out after."""
        if self.admin_token is not None:
            return self.admin_token, False
        localpart = self.config.admin_localpart
        user_id = f"@{localpart}:{self.config.domain}"
        password = password_for(self.credential, user_id)
        made = await self._register(localpart, password, admin=True, display="hyperhive admin")
        account = made or await self.login(user_id, password)
        return account.access_token, True

    @asynccontextmanager
    async def _as_admin(self) -> AsyncIterator[dict[str, str]]:
        """Headers of an admin session for the block (a session of ours is logged out after)."""
        token, ours = await self._admin_token()
        headers = {"Authorization": f"Bearer {token}"}
        try:
            yield headers
        finally:
            if ours:
                try:
                    async with self.guard("logging the admin session out"):
                        await self._http.post("/_matrix/client/v3/logout", headers=headers)
                except HiveError:
                    pass

    async def deactivate(self, agent: str) -> bool:
        """Deactivate ``agent``'s account; False if it had none."""
        user_id = self.config.user_id(agent)
        async with self._as_admin() as headers:
            async with self.guard(f"deactivating {user_id}"):
                resp = await self._http.post(
                    f"/_synapse/admin/v1/deactivate/{quote(user_id)}",
                    headers=headers,
                    json={"erase": False},
                )
            if resp.status_code == 404:
                return False
            if resp.status_code != 200:
                raise self._refused(f"deactivating {user_id}", resp)
            log.info("matrix account %s deactivated (agent %s destroyed)", user_id, agent)
            return True

    async def sign_out(self, agent: str) -> int:
        """Sign ``agent``'s account out everywhere: its devices deleted, so every access
        token it had is dead. The account stays: enabling it again signs it in afresh.
        How many devices it had (0 also when there is no account)."""
        user_id = self.config.user_id(agent)
        path = f"/_synapse/admin/v2/users/{quote(user_id)}"
        async with self._as_admin() as headers:
            async with self.guard(f"listing {user_id}'s devices"):
                got = await self._http.get(f"{path}/devices", headers=headers)
            if got.status_code == 404:
                return 0
            if got.status_code != 200:
                raise self._refused(f"listing {user_id}'s devices", got)
            ids = [str(d["device_id"]) for d in got.json().get("devices", [])]
            if ids:
                async with self.guard(f"signing {user_id} out"):
                    resp = await self._http.post(
                        f"{path}/delete_devices", headers=headers, json={"devices": ids}
                    )
                if resp.status_code != 200:
                    raise self._refused(f"signing {user_id} out", resp)
            log.info("matrix account %s signed out of %d device(s)", user_id, len(ids))
            return len(ids)


async def deactivate_agent(config: MatrixConfig | None, agent: str, enabled: bool) -> str | None:
    """Destroy's half: deactivate ``agent``'s account. What went wrong, if anything.

    Never raises: a homeserver that is down must not keep an agent from
    being destroyed; the problem is returned for the log, with what to do.
    """
    if config is None or not enabled:
        return None
    return await _administer(
        config,
        lambda admin: admin.deactivate(agent),
        f"deactivate {config.user_id(agent)} on the homeserver by hand",
    )


async def sign_out_agent(config: MatrixConfig | None, agent: str) -> str | None:
    """``[matrix]`` taken away from ``agent``: its tokens revoked, its account kept. What
    went wrong, if anything (never raises, like :func:`deactivate_agent`)."""
    if config is None:
        return None
    return await _administer(
        config,
        lambda admin: admin.sign_out(agent),
        f"sign {config.user_id(agent)} out on the homeserver by hand",
    )


async def _administer(
    config: MatrixConfig, act: Callable[[MatrixAdmin], Awaitable[object]], by_hand: str
) -> str | None:
    """Run ``act`` with an admin of the homeserver; what went wrong (with ``by_hand``,
    what the operator can do instead), or ``None``. Never raises a hive error."""
    try:
        admin = MatrixAdmin(config)
    except HiveError as exc:
        return exc.message
    try:
        await act(admin)
    except HiveError as exc:
        return f"{exc.message}; {by_hand}"
    finally:
        await admin.aclose()
    return None
