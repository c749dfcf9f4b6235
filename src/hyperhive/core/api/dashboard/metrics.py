"""``GET /metrics``: the hive in Prometheus' text format, behind the dashboard's auth.

Scrape it with the operator token as a bearer token (``Authorization: Bearer
$(cat <home>/run/dashboard-token)``), or, under ``dashboard_auth =
"loopback"``, from loopback. Store figures are read per scrape; an agent
host that does not answer leaves ``hyperhive_host_up`` at 0 and the rest
intact.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST

from hyperhive.core.api.dashboard.state import Dashboard, dashboard
from hyperhive.errors import Unavailable
from hyperhive.protocol.hostapi import HostWork
from hyperhive.telemetry.metrics import HiveSnapshot, render

__all__ = ["router", "snapshot"]

router = APIRouter()


async def snapshot(dash: Dashboard) -> HiveSnapshot:
    parts = dash.parts
    store, link = parts.store, parts.hostlink
    work: HostWork | None
    try:
        work = await dash.proxy.work()
    except Unavailable:
        work = None
    return HiveSnapshot(
        messages=await store.messages.counts(),
        approvals_pending=len(await store.approvals.list(pending_only=True)),
        questions_open=len(await store.loose_ends.questions(open_only=True)),
        hosts=link.connected_hosts(),
        turn_states={a: t.state for a, t in link.running_turns().items()},
        work=work,
        spend=list((await store.spend.totals()).values()),
    )


@router.get("/metrics", include_in_schema=False)
async def metrics(dash: Annotated[Dashboard, Depends(dashboard)]) -> Response:
    body = render(await snapshot(dash), dash.meter)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
