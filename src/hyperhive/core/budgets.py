"""Spend budgets at run time: count each claude run, hold an agent at its limit, tell the operator.

Spend arrives with a turn's ``turn_end`` (turns and compactions) and with a
subagent's ``record_spend``, each keyed by the run, so a report resent after
a coordinator restart counts once. A report carries what claude said the
run's session had cost so far; the store counts the run's own share
(:mod:`hyperhive.runcost`) against the session's previous totals, which it
keeps. Limits are the configs' ``[budget]`` with the operator's run-time
overrides on top (stored, so they survive a restart). The rules are
:mod:`hyperhive.budgets`; this service does the I/O.

Holding is done in ``wait``: an agent over budget is answered "nothing yet"
(its mail stays undelivered and unacked), so its current turn finishes and
no new one starts. Raising a limit wakes every waiting agent; a new day is
seen by the next ``wait`` (the harness asks again at least once a minute).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import anyio

from hyperhive.budgets import (
    HIVE_SCOPE,
    LIMIT_KEYS,
    BudgetLimits,
    HiveBudget,
    LimitHit,
    LimitKey,
    Spent,
    check_limits,
    day_id,
    day_start,
    describe,
    effective_limits,
    operator_zone,
    week_start,
)
from hyperhive.core.activity import ActivityLog
from hyperhive.core.broker import Broker
from hyperhive.core.notify import EventBus, Notifier
from hyperhive.core.registry import AgentRegistry
from hyperhive.errors import HiveError, InvalidRequest
from hyperhive.names import OPERATOR, SYSTEM
from hyperhive.protocol import (
    BudgetScope,
    BudgetView,
    RunSpend,
    SpendFigures,
    SpendReport,
    SpendRow,
    SpendSeries,
)
from hyperhive.store import Store
from hyperhive.store.rows import SpendEntry, SpendRun, SpendTotal

__all__ = ["Budgets"]

log = logging.getLogger(__name__)


# Read only: shared by every scope without overrides, so a cache hit is an identity test.
_NO_OVERRIDES: dict[str, float | None] = {}


def _spent_sum(rows: Mapping[str, SpendTotal]) -> Spent:
    return Spent(sum(r.usd for r in rows.values()), sum(r.tokens for r in rows.values()))


@dataclass(frozen=True, slots=True)
class _Totals:
    day: str
    today: dict[str, SpendTotal]
    total: dict[str, SpendTotal]
    # Summed once per snapshot: every agent's wait asks the hive's scope too, and the
    # agents view asks it once per agent (a sum over every agent, per agent, before).
    hive: tuple[Spent, Spent] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hive", (_spent_sum(self.today), _spent_sum(self.total)))

    def spent(self, scope: str) -> tuple[Spent, Spent]:
        if scope == HIVE_SCOPE:
            return self.hive

        def of(rows: dict[str, SpendTotal]) -> Spent:
            row = rows.get(scope)
            return Spent(row.usd, row.tokens) if row else Spent()

        return of(self.today), of(self.total)


def _figures(row: SpendTotal | None) -> SpendFigures:
    return SpendFigures(usd=row.usd, tokens=row.tokens) if row else SpendFigures()


def _sum(rows: Mapping[str, SpendTotal]) -> SpendFigures:
    return SpendFigures(
        usd=sum(r.usd for r in rows.values()), tokens=sum(r.tokens for r in rows.values())
    )


def _as_dict(limits: BudgetLimits) -> dict[LimitKey, float | None]:
    return {k: limits.get(k) for k in LIMIT_KEYS}


class Budgets:
    def __init__(
        self,
        store: Store,
        registry: AgentRegistry,
        config: HiveBudget,
        broker: Broker,
        notifier: Notifier,
        bus: EventBus,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.registry = registry
        self.config = config
        self.broker = broker
        self.notifier = notifier
        self.bus = bus
        self.clock = clock
        self.activity = ActivityLog(store, bus)
        self.zone = operator_zone(config.timezone)
        # Cached reads (this coordinator is the only writer; a standby starts empty):
        # totals are kept up to date by record() and rebuilt each new day.
        self._totals: _Totals | None = None
        self._overrides: dict[str, dict[str, float | None]] | None = None
        # Effective limits by scope, kept while neither input changes: a wait checks
        # two scopes, and validating a BudgetLimits each time was most of its cost.
        self._effective: dict[str, tuple[BudgetLimits, dict[str, float | None], BudgetLimits]] = {}
        self._hive_limits = config.limits()
        # One writer or rebuilder at a time: a rebuild racing a record could miss it
        # (or count it twice) in the cache until the next day.
        self._lock = anyio.Lock()

    # ---- spend ----------------------------------------------------------------

    async def record(self, agent: str, spend: RunSpend) -> tuple[SpendEntry, bool]:
        """Count one run to ``agent`` at its own cost; tell the operator of a limit reached
        or near. ``(what it was counted at, False)`` for a run already counted."""
        run = SpendRun(
            agent=agent,
            key=f"{spend.kind}:{spend.run_id}",
            kind=spend.kind,
            at=self.clock(),
            session_id=spend.session_id,
            session_totals=spend.totals(),
        )
        async with self._lock:
            entry, new = await self.store.spend.record(run)
            if new:
                self._count(entry)
        if new:
            self.bus.emit("spend", agent=agent, run=spend.kind, cost_usd=entry.cost_usd)
            await self._review([agent, HIVE_SCOPE])
        return entry, new

    def _count(self, entry: SpendEntry) -> None:
        totals = self._totals
        if totals is None or totals.day != day_id(entry.at, self.zone):
            self._totals = None  # rebuilt from the store on the next read
            return
        for rows in (totals.today, totals.total):
            old = rows.get(entry.agent) or SpendTotal(entry.agent)
            rows[entry.agent] = SpendTotal(
                entry.agent, old.usd + entry.cost_usd, old.tokens + entry.tokens, old.runs + 1
            )
        self._totals = _Totals(totals.day, totals.today, totals.total)  # the hive's sums anew

    async def _current(self) -> _Totals:
        now = self.clock()
        day = day_id(now, self.zone)
        totals = self._totals
        if totals is None or totals.day != day:
            async with self._lock:
                totals = self._totals
                if totals is None or totals.day != day:
                    today = await self.store.spend.totals(since=day_start(now, self.zone))
                    totals = self._totals = _Totals(day, today, await self.store.spend.totals())
        return totals

    # ---- limits ---------------------------------------------------------------

    def configured(self, scope: str) -> BudgetLimits:
        if scope == HIVE_SCOPE:
            return self._hive_limits
        try:
            return self.registry.config(scope).budget
        except HiveError:  # a broken config: no limits from it (its agent cannot run anyway)
            return BudgetLimits()

    async def overrides(self) -> dict[str, dict[str, float | None]]:
        overrides = self._overrides
        if overrides is None:
            async with self._lock:
                overrides = self._overrides
                if overrides is None:
                    overrides = self._overrides = await self.store.spend.overrides()
        return overrides

    async def limits(self, scope: str) -> BudgetLimits:
        configured = self.configured(scope)
        overrides = (await self.overrides()).get(scope, _NO_OVERRIDES)
        # By identity: a new config or new overrides are new objects.
        hit = self._effective.get(scope)
        if hit is not None and hit[0] is configured and hit[1] is overrides:
            return hit[2]
        effective = effective_limits(configured, overrides)
        self._effective[scope] = (configured, overrides, effective)
        return effective

    async def _check(self, scope: str) -> tuple[list[LimitHit], list[LimitHit]]:
        today, total = (await self._current()).spent(scope)
        return check_limits(scope, await self.limits(scope), today, total)

    async def held(self, agent: str) -> LimitHit | None:
        """The limit that holds ``agent`` (its own, else the hive's), or ``None``."""
        for scope in (agent, HIVE_SCOPE):
            over, _ = await self._check(scope)
            if over:
                return over[0]
        return None

    async def set_limits(
        self, scope: str, limits: Mapping[LimitKey, float | None], reset: bool = False
    ) -> BudgetView:
        """Override limits at run time (``None`` = unlimited), persisted; wakes held agents."""
        if scope != HIVE_SCOPE:
            self.registry.require(scope)
        current: dict[str, float | None] = {}
        if not reset:
            current = dict((await self.overrides()).get(scope, {}))
        merged: dict[str, float | None] = {**current, **{str(k): v for k, v in limits.items()}}
        try:
            effective_limits(BudgetLimits(), merged)  # validates: no negative limit
        except ValueError as exc:
            raise InvalidRequest(f"budget for {scope}: {exc}") from exc
        async with self._lock:
            await self.store.spend.set_overrides(scope, merged)
            self._overrides = None
        log.info("budget of %s set: %s", scope, merged or "as configured")
        self.bus.emit("budget", agent=scope, state="changed")
        await self._review([scope] if scope == HIVE_SCOPE else [scope, HIVE_SCOPE])
        for agent in self.registry.known():  # a held agent re-checks its limit now
            self.notifier.notify(agent)
        return await self.view()

    # ---- notices --------------------------------------------------------------

    async def _review(self, scopes: list[str]) -> None:
        day = day_id(self.clock(), self.zone)
        for scope in scopes:
            over, warnings = await self._check(scope)
            if over:
                self._hold_now(scope)
            for hit in over:
                await self._notice(hit, "over", day)
            for hit in warnings:
                await self._notice(hit, "warning", day)

    def _hold_now(self, scope: str) -> None:
        """Wake the waits ``scope`` holds (every agent's, for the hive's budget): a wait
        parked in the store before the limit was reached re-checks it now, rather
        than be answered with the next mail."""
        for agent in self.registry.known() if scope == HIVE_SCOPE else [scope]:
            self.notifier.notify(agent)

    async def _notice(self, hit: LimitHit, state: str, day: str) -> None:
        if not await self.store.spend.mark_notice(hit.scope, f"{state}:{hit.marker(day)}"):
            return  # told once per period and limit
        what = describe(hit)
        if state == "over":
            who = "every agent" if hit.scope == HIVE_SCOPE else hit.scope
            flag = "--hive" if hit.scope == HIVE_SCOPE else hit.scope
            body = (
                f"Budget reached: {what}. {who} takes no new turns (mail waits, nothing is "
                f"lost) until the limit is raised (`hivectl budget set {flag} "
                f"--{hit.key.replace('_', '-')} N`, or the dashboard's spend page)"
                + (" or the day turns." if hit.daily else ".")
            )
        else:
            body = f"Budget warning: {what} ({hit.fraction:.0%})."
        log.warning("%s", body)
        await self.broker.send(SYSTEM, OPERATOR, body)
        self.bus.emit("budget", agent=hit.scope, state=state, limit=hit.key, text=what)
        await self.activity.record(
            "budget",
            hit.scope,
            body,
            detail={"state": state, "limit": hit.key, "fraction": hit.fraction},
        )

    # ---- views ----------------------------------------------------------------

    async def view(self) -> BudgetView:
        totals = await self._current()
        overrides = await self.overrides()
        scopes = []
        for scope in [HIVE_SCOPE, *self.registry.known()]:
            configured = self.configured(scope)
            effective = effective_limits(configured, overrides.get(scope, {}))
            today, total = totals.spent(scope)
            over = check_limits(scope, effective, today, total)[0]
            scopes.append(
                BudgetScope(
                    scope=scope,
                    configured=_as_dict(configured),
                    overrides=overrides.get(scope, {}),
                    effective=_as_dict(effective),
                    today=SpendFigures(usd=today.usd, tokens=today.tokens),
                    total=SpendFigures(usd=total.usd, tokens=total.tokens),
                    over=describe(over[0]) if over else None,
                )
            )
        return BudgetView(timezone=self.timezone_name(), day=totals.day, scopes=scopes)

    def timezone_name(self) -> str:
        return self.config.timezone or str(self.zone)

    async def report(self) -> SpendReport:
        now = self.clock()
        totals = await self._current()
        since_week = week_start(now, self.zone)
        week = await self.store.spend.totals(since=since_week)
        hive_over = (await self._check(HIVE_SCOPE))[0]
        names = sorted(set(self.registry.known()) | set(totals.total))
        rows = []
        for name in names:
            over = (await self._check(name))[0] or hive_over
            rows.append(
                SpendRow(
                    agent=name,
                    today=_figures(totals.today.get(name)),
                    week=_figures(week.get(name)),
                    all_time=_figures(totals.total.get(name)),
                    over_budget=describe(over[0]) if over else None,
                )
            )
        top = sorted(
            (r for r in rows if r.all_time.usd or r.all_time.tokens),
            key=lambda r: (-r.today.usd, -r.all_time.usd, -r.all_time.tokens, r.agent),
        )
        return SpendReport(
            timezone=self.timezone_name(),
            day=totals.day,
            day_start=day_start(now, self.zone),
            week_start=since_week,
            agents=rows,
            total=SpendRow(
                agent=HIVE_SCOPE,
                today=_sum(totals.today),
                week=_sum(week),
                all_time=_sum(totals.total),
                over_budget=describe(hive_over[0]) if hive_over else None,
            ),
            top_spenders=[r.agent for r in top[:5]],
        )

    async def series(self, days: int) -> SpendSeries:
        """USD per agent per operator day for the last ``days`` days (today included).

        Read in hours and summed into the operator's days here, so a day is
        midnight to midnight in the operator's zone, DST days included.
        """
        starts = [day_start(self.clock(), self.zone)]
        for _ in range(days - 1):
            starts.insert(0, day_start(starts[0] - 1, self.zone))
        labels = [day_id(t, self.zone) for t in starts]
        first = starts[0]
        index = {d: i for i, d in enumerate(labels)}
        usd: dict[str, list[float]] = {}
        for point in await self.store.spend.series(first, first, 3600.0):
            i = index.get(day_id(point.start, self.zone))
            if i is not None:
                usd.setdefault(point.agent, [0.0] * days)[i] += point.usd
        return SpendSeries(
            timezone=self.timezone_name(), days=labels, usd=dict(sorted(usd.items()))
        )
