"""A typed client for the forge's v1 REST API (Forgejo or Gitea): pyforgejo, plus our errors.

pyforgejo is generated from Forgejo's published OpenAPI document; its request
signatures and response models are the typed contract. This module is the one
place that talks to it: every call goes through :meth:`ForgeApi.guard`, which
turns transport failures and HTTP statuses into refusals that name the rule
(unreachable with the URL, token rejected, name taken) — callers never see
``httpx`` or ``ApiError``.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import ValidationError
from pyforgejo.core.api_error import ApiError
from pyforgejo.core.request_options import RequestOptions

from hyperhive.errors import HiveError, NotFound
from hyperhive.forge.errors import ForgeError, ForgeTokenRejected, ForgeUnreachable

if TYPE_CHECKING:
    from pyforgejo.admin.client import AsyncAdminClient
    from pyforgejo.notification.client import AsyncNotificationClient
    from pyforgejo.organization.client import AsyncOrganizationClient
    from pyforgejo.repository.client import AsyncRepositoryClient
    from pyforgejo.user.client import AsyncUserClient

__all__ = ["ForgeApi", "basic_auth"]

TIMEOUT = 15.0


def basic_auth(username: str, password: str) -> RequestOptions:
    """Request options authenticating as ``username`` with a password.

    Forgejo creates and deletes personal tokens only under basic auth (a token
    cannot mint another token), so those calls carry it instead of the token.
    """
    raw = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"additional_headers": {"Authorization": f"Basic {raw}"}}


def _message(body: Any) -> str:
    if isinstance(body, dict):
        for key in ("message", "errors"):
            if body.get(key):
                return str(body[key])
    return str(body)[:200] if body else "(no message)"


class ForgeApi:
    """One forge and one credential (the admin token, or an agent's own)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        whose: str = "admin",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.whose = whose
        # The generated clients take seconds to import: only a host with a forge pays.
        from pyforgejo.admin.client import AsyncAdminClient
        from pyforgejo.core.client_wrapper import AsyncClientWrapper
        from pyforgejo.notification.client import AsyncNotificationClient
        from pyforgejo.organization.client import AsyncOrganizationClient
        from pyforgejo.repository.client import AsyncRepositoryClient
        from pyforgejo.user.client import AsyncUserClient

        self._http = httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False, transport=transport)
        wrapper = AsyncClientWrapper(
            api_key=token, base_url=f"{self.url}/api/v1", timeout=TIMEOUT, httpx_client=self._http
        )
        self.admin: AsyncAdminClient = AsyncAdminClient(client_wrapper=wrapper)
        self.users: AsyncUserClient = AsyncUserClient(client_wrapper=wrapper)
        self.orgs: AsyncOrganizationClient = AsyncOrganizationClient(client_wrapper=wrapper)
        self.repos: AsyncRepositoryClient = AsyncRepositoryClient(client_wrapper=wrapper)
        self.notifications: AsyncNotificationClient = AsyncNotificationClient(
            client_wrapper=wrapper
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ForgeApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @asynccontextmanager
    async def guard(self, doing: str, *, missing: str | None = None) -> AsyncIterator[None]:
        """Translate what can go wrong while ``doing`` into a refusal naming the rule.

        ``missing``: the message for a 404 (``NotFound``); without it a 404 is
        a ``ForgeError`` like any other unexpected answer.
        """
        try:
            yield
        except HiveError:
            raise
        except httpx.TransportError as exc:
            raise ForgeUnreachable(
                f"the forge at {self.url} is unreachable while {doing} "
                f"({type(exc).__name__}: {exc or 'no answer'}); check [forge] url in "
                "hive.toml and that the forge is running"
            ) from exc
        except ApiError as exc:
            status = exc.status_code
            if status in (401, 403):
                raise ForgeTokenRejected(
                    f"the forge at {self.url} rejected the {self.whose} token while {doing} "
                    f"(HTTP {status}: {_message(exc.body)}); "
                    + (
                        "put a valid admin token in [forge] admin_token_file"
                        if self.whose == "admin"
                        else "the agent's host issues it a new one and retries"
                    )
                ) from exc
            if status == 404 and missing is not None:
                raise NotFound(missing) from exc
            raise ForgeError(
                f"the forge at {self.url} refused {doing}: HTTP {status}: {_message(exc.body)}"
            ) from exc
        except (ValidationError, ValueError) as exc:
            # Not JSON, or JSON that is not what the API documents: not a Forgejo/Gitea v1 API.
            raise ForgeError(
                f"the forge at {self.url} gave an answer that is not the Forgejo/Gitea v1 API "
                f"while {doing} ({type(exc).__name__}); is [forge] url the forge's base URL?"
            ) from exc
