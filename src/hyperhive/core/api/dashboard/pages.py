"""Server-rendered pages (Jinja) and the fragments the live script swaps in."""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from hyperhive.budgets import HIVE_SCOPE, WARN_AT
from hyperhive.core.api.agent_api import COMPACT_THRESHOLD
from hyperhive.core.api.dashboard.api import operator_threads
from hyperhive.core.api.dashboard.pictures.gauges import NARROW, budget_bars, context_gauge
from hyperhive.core.api.dashboard.security import AUTH_COOKIE, safe_next
from hyperhive.core.api.dashboard.state import Dashboard, dashboard
from hyperhive.core.api.dashboard.views import budget_row, compact_rule, tree_rows
from hyperhive.errors import HiveError, NotFound
from hyperhive.permissions import Capability, ToolGroup, capability_tools, group_tools
from hyperhive.protocol import (
    ApprovalView,
    BudgetView,
    OpAgentForgeReq,
    OpApprovalShowReq,
    OpApprovalsReq,
    OpBudgetReq,
    OpConfigReq,
    OpHostsListReq,
    OpInboxReq,
    OpLogsReq,
    OpLooseEndsReq,
    OpMessagesReq,
    OpQuestionsReq,
    Question,
)

__all__ = ["router", "waiting_count"]

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False, default_response_class=HTMLResponse)
Dash = Annotated[Dashboard, Depends(dashboard)]


def _render(d: Dashboard, request: Request, name: str, **context: Any) -> Response:
    return d.templates.TemplateResponse(request, name, context)


async def waiting_count(d: Dashboard) -> dict[str, int]:
    """What waits for the operator: pending approvals and open questions."""
    pending: list[ApprovalView] = await d.ops.request(OpApprovalsReq, pending_only=True)
    open_questions: list[Question] = await d.ops.request(OpQuestionsReq, open_only=True)
    approvals, questions = len(pending), len(open_questions)
    return {"approvals": approvals, "questions": questions, "total": approvals + questions}


async def _page(d: Dashboard, request: Request, name: str, **context: Any) -> Response:
    """A whole page: its nav carries the waiting count (the fragments do not)."""
    return _render(d, request, name, waiting=await waiting_count(d), **context)


@router.get("/fragments/waiting")
async def waiting_fragment(request: Request, d: Dash) -> Response:
    return _render(d, request, "_waiting.html", waiting=await waiting_count(d))


@router.get("/tree")
async def tree_page(request: Request, d: Dash) -> Response:
    return await _page(d, request, "index.html", nav="tree", rows=tree_rows(await d.agents()))


@router.get("/fragments/tree")
async def tree_fragment(request: Request, d: Dash) -> Response:
    return _render(d, request, "_tree.html", rows=tree_rows(await d.agents()))


async def _agent(d: Dashboard, name: str) -> dict[str, Any]:
    for row in await d.agents():
        if row["name"] == name:
            return row
    raise NotFound(f"no agent named {name!r}")


@router.get("/agents/{name}")
async def agent_page(request: Request, d: Dash, name: str) -> Response:
    a = await _agent(d, name)
    return await _page(
        d,
        request,
        "agent.html",
        nav="tree",
        tab="overview",
        a=a,
        box=await d.ops.view(OpMessagesReq, agent=name, limit=20),
        loose=await d.ops.view(OpLooseEndsReq, agent=name),
        log=await _log(d, name),
        forge=await d.ops.view(OpAgentForgeReq, agent=name),
        matrix=await _matrix(d, name),
        **await _gauges(d, a),
    )


async def _gauges(d: Dashboard, a: dict[str, Any]) -> dict[str, Any]:
    """Its context usage against the compaction lines (the agent's own compact tool's
    threshold, the hive's configured watermark); its spend against its budget, and the
    hive's when the hive has a limit (it holds every agent too)."""
    view: BudgetView = await d.ops.request(OpBudgetReq)
    scopes = {s.scope: s for s in view.scopes}
    hive = scopes[HIVE_SCOPE]
    rows = [budget_row(scopes[a["name"]], hive)] if a["name"] in scopes else []
    if any(v is not None for v in hive.effective.values()):
        rows.append(budget_row(hive, hive))
    usage = a.get("last_context_usage")
    return {
        "gauge": context_gauge(usage, COMPACT_THRESHOLD, d.parts.config.compact_watermark),
        "compact_rule": compact_rule(usage, COMPACT_THRESHOLD),
        "bars": budget_bars(rows, WARN_AT, NARROW),
        "budget_day": view.day,
    }


@router.get("/fragments/agents/{name}/gauges")
async def agent_gauges_fragment(request: Request, d: Dash, name: str) -> Response:
    a = await _agent(d, name)
    return _render(d, request, "_agent_gauges.html", a=a, **await _gauges(d, a))


async def _log(d: Dashboard, name: str) -> list[str]:
    """The tail of the agent's log from its host; the reason instead, if no host has it
    to give (the page must not fail for that)."""
    try:
        return (await d.ops.request(OpLogsReq, agent=name, lines=60)).lines
    except HiveError as exc:
        return [f"(the log cannot be read now: {exc.message})"]


async def _matrix(d: Dashboard, name: str) -> dict[str, Any] | None:
    """The agent's Matrix account and pending invitations, as its host sees them (None: no
    account, or its host is not answering; the page must not fail for that)."""
    try:
        state = await d.proxy.state(name)
    except HiveError:
        return None
    view = state.get("matrix")
    return view if isinstance(view, dict) else None


@router.get("/fragments/agents/{name}/head")
async def agent_head_fragment(
    request: Request, d: Dash, name: str, tab: str = "overview"
) -> Response:
    return _render(d, request, "_agent_head.html", a=await _agent(d, name), tab=tab)


@router.get("/agents/{name}/permissions")
async def permissions_page(request: Request, d: Dash, name: str) -> Response:
    a = await _agent(d, name)
    return await _page(
        d,
        request,
        "permissions.html",
        nav="tree",
        tab="perms",
        a=a,
        cfg=await d.ops.view(OpConfigReq, agent=name),
        groups=list(ToolGroup.ALL),
        caps=list(Capability),
        # What each toggle grants, from the tools' declarations (docs/tools.md has the rest).
        grants={
            **{
                g.value: [t.name for t in group_tools(g)] + list(g.builtin_tools())
                for g in ToolGroup.ALL
            },
            **{c.value: [t.name for t in capability_tools(c)] for c in Capability},
        },
    )


async def _approvals_context(d: Dashboard) -> dict[str, Any]:
    rows = await d.ops.request(OpApprovalsReq, pending_only=False)
    pending = [
        await d.ops.view(OpApprovalShowReq, approval_id=r.id) for r in rows if r.state == "pending"
    ]
    resolved = [r.model_dump() for r in reversed(rows) if r.state != "pending"][:10]
    # A spawn's host select: every host a new agent may be pinned to.
    hosts = [h.name for h in await d.ops.request(OpHostsListReq) if not h.revoked]
    return {"pending": pending, "resolved": resolved, "hosts": hosts}


@router.get("/approvals")
async def approvals_page(request: Request, d: Dash) -> Response:
    return await _page(d, request, "approvals.html", nav="approvals", **await _approvals_context(d))


@router.get("/fragments/approvals")
async def approvals_fragment(request: Request, d: Dash) -> Response:
    return _render(d, request, "_approvals.html", **await _approvals_context(d))


async def _inbox_context(d: Dashboard) -> dict[str, Any]:
    inbox = await d.ops.request(OpInboxReq, limit=200)
    threads = await operator_threads(d)
    return {
        "threads": [{"messages": [(m["depth"], m) for m in t["messages"]]} for t in threads],
        "unread": sum(1 for m in inbox if not m.acked),
        "max_id": max((m.id for m in inbox), default=0),
        "questions": await d.ops.view(OpQuestionsReq),
    }


@router.get("/inbox")
async def inbox_page(request: Request, d: Dash) -> Response:
    return await _page(d, request, "inbox.html", nav="inbox", **await _inbox_context(d))


@router.get("/fragments/inbox")
async def inbox_fragment(request: Request, d: Dash) -> Response:
    return _render(d, request, "_inbox.html", **await _inbox_context(d))


# ---- login (only meaningful when a token is required) -----------------------------------


def _logged_in(request: Request, token: str, target: str) -> Response:
    response = RedirectResponse(safe_next(target), status_code=303)
    response.set_cookie(
        AUTH_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return response


def _login_form(
    d: Dashboard, request: Request, target: str, error: str | None, status: int = 200
) -> Response:
    response = _render(d, request, "login.html", next=safe_next(target), error=error)
    response.status_code = status
    # A refused link's code is still in the address bar: no Referer leaves the site with it
    # ("no-referrer" would also make the form's POST carry Origin: null, refused as CSRF).
    response.headers["referrer-policy"] = "same-origin"
    response.headers["cache-control"] = "no-store"
    return response


@router.get("/login")
async def login_page(
    request: Request, d: Dash, next: str = "/", code: str | None = None
) -> Response:
    """The token form; with ``code`` (a one-click link) the code is exchanged for the cookie.

    The answer to a good code is a redirect, so the code leaves the address bar.
    """
    if not d.security.required or d.codes is None or d.security.token is None:
        return RedirectResponse(safe_next(next), status_code=303)
    if code is None:
        return _login_form(d, request, next, None)
    refusal = d.codes.redeem(code, time.time())
    if refusal is not None:
        log.warning("a one-click log-in link was refused: %s", refusal.name.lower())
        hint = " Run `hivectl dashboard` for a fresh link, or paste the operator token below."
        return _login_form(d, request, next, refusal.value + hint, status=401)
    return _logged_in(request, d.security.token, next)


@router.post("/login")
async def login(
    request: Request,
    d: Dash,
    token: Annotated[str, Form()],
    next: Annotated[str, Form()] = "/",
) -> Response:
    if not d.security.required:
        return RedirectResponse(safe_next(next), status_code=303)
    if not d.security.valid(token.strip()):
        return _login_form(d, request, next, "That is not the operator token.", status=401)
    return _logged_in(request, token.strip(), next)


@router.post("/logout")
async def logout() -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(AUTH_COOKIE, path="/")
    return response
