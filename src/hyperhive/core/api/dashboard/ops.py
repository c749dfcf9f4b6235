"""The operator's requests, made in-process: the same typed ``HostRequest``
and the same handler as ``run/host.sock``, so the dashboard can do exactly
what ``hivectl`` can and is refused exactly as it is.
"""

from __future__ import annotations

import typing
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from hyperhive.core.api.operator_api import OperatorApi
from hyperhive.errors import MalformedFrame
from hyperhive.protocol import AgentView, OpAgentsReq, Req, summarise_validation

__all__ = ["Ops"]

R = TypeVar("R")


class Ops:
    def __init__(self, api: OperatorApi) -> None:
        self._api = api

    async def request(self, req_type: type[Req[R]], /, **fields: Any) -> R:
        """Build ``req_type`` from ``fields`` and answer it with its response model.

        ``cmd`` defaults to the request's only command. Bad fields raise
        ``MalformedFrame`` with the socket's own wording, never a 500.
        """
        if "cmd" not in fields:
            fields["cmd"] = typing.get_args(req_type.model_fields["cmd"].annotation)[0]
        try:
            request = req_type.model_validate(fields)
        except ValidationError as exc:
            why = summarise_validation(exc, tagged=False)
            raise MalformedFrame(f"bad {fields['cmd']!r} request: {why}") from exc
        result: R = await self._api(request)
        return result

    async def view(self, req_type: type[Req[Any]], /, **fields: Any) -> Any:
        """:meth:`request`, as JSON by wire alias (what templates and the JSON API show)."""
        return to_jsonable_python(await self.request(req_type, **fields), by_alias=True)

    async def agents(self) -> list[dict[str, Any]]:
        """The agents view as dicts by alias (the templates' and JSON API's shape)."""
        rows: list[AgentView] = await self.request(OpAgentsReq)
        return [r.model_dump(mode="json", by_alias=True) for r in rows]
