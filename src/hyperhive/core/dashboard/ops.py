"""The operator's requests, made in-process: the same typed ``HostRequest``
and the same handler as ``run/host.sock``, so the dashboard can do exactly
what ``hivectl`` can and is refused exactly as it is.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from hyperhive.core.operator_api import OperatorApi
from hyperhive.protocol import HostRequest, decode_request, ok_response

if TYPE_CHECKING:
    from hyperhive.core.coordinator import Coordinator

__all__ = ["Ops"]


class Ops:
    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self._api = OperatorApi(coord)

    async def call(self, cmd: str, **fields: Any) -> Any:
        """Validate ``{cmd, **fields}`` as a ``HostRequest`` and run it; JSON-able result.

        Bad fields raise ``MalformedFrame`` with the socket's own wording.
        """
        frame = json.dumps({"cmd": cmd, **fields}).encode()
        request = decode_request(HostRequest, frame)
        result: JsonValue = ok_response(None, await self._api(request)).result
        return result

    async def agents(self) -> list[dict[str, Any]]:
        rows = await self.call("agents")
        assert isinstance(rows, list)
        return rows
