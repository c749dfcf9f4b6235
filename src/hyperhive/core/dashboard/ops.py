"""The operator's requests, made in-process: the same typed ``HostRequest``
and the same handler as ``run/host.sock``, so the dashboard can do exactly
what ``hivectl`` can and is refused exactly as it is.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import JsonValue

from hyperhive.core.operator_api import OperatorApi
from hyperhive.protocol import AgentView, HostRequest, OpAgentsReq, Req, decode_request, ok_response

__all__ = ["Ops"]

R = TypeVar("R")


class Ops:
    def __init__(self, api: OperatorApi) -> None:
        self._api = api

    async def request(self, request: Req[R]) -> R:
        """A typed operator request, answered with its response model."""
        result: R = await self._api(request)
        return result

    async def call(self, cmd: str, **fields: Any) -> Any:
        """Validate ``{cmd, **fields}`` as a ``HostRequest`` and run it; JSON-able result.

        Bad fields raise ``MalformedFrame`` with the socket's own wording.
        """
        frame = json.dumps({"cmd": cmd, **fields}).encode()
        request = decode_request(HostRequest, frame)
        result: JsonValue = ok_response(None, await self._api(request)).result
        return result

    async def agents(self) -> list[dict[str, Any]]:
        """The agents view as dicts by alias (the templates' and JSON API's shape)."""
        rows: list[AgentView] = await self.request(OpAgentsReq(cmd="agents"))
        return [r.model_dump(mode="json", by_alias=True) for r in rows]
