"""The run-cost rule over generated session histories.

A simulated claude keeps each session's totals as claude 2.1.328 does
(measured): saved at the end of a run, and when stopped with SIGTERM; not when
killed outright; restored on resume; restarted from zero if it loses them. A
simulated hive counts each reported run with :func:`run_cost`, keeping the
previous totals only in its durable store, across coordinator restarts and
moves of the agent between hosts. An oracle that never differences anything
says what each run's own figures are: the calls claude saved since the
session's last report. USD figures are multiples of 1/1024, so every sum is
exact and the comparisons are equalities.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperhive.runcost import UNKNOWN_MODEL, Figures, run_cost, summed

MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1")

End = Literal["ok", "sigterm", "sigkill"]


@dataclass(frozen=True)
class Run:
    session: int  # an index into the sessions the history has opened so far
    calls: tuple[tuple[str, Figures], ...]
    end: End


@dataclass(frozen=True)
class NewSession:
    """Compaction failing over, a resume that failed, a session file removed."""


@dataclass(frozen=True)
class Forget:
    """claude loses a session's saved totals (e.g. a transcript from an older claude)."""

    session: int


@dataclass(frozen=True)
class Restart:
    """The coordinator restarts: only the store survives."""


@dataclass(frozen=True)
class Move:
    """The agent moves to another host: nothing host-local comes along."""


Step = Run | NewSession | Forget | Restart | Move


def _figures() -> st.SearchStrategy[Figures]:
    tokens = st.integers(0, 200_000)
    return st.builds(
        Figures,
        usd=st.integers(0, 4096).map(lambda k: k / 1024),
        input_tokens=tokens,
        output_tokens=tokens,
        cache_read_tokens=tokens,
        cache_creation_tokens=tokens,
    )


_call = st.tuples(st.sampled_from(MODELS), _figures())
_step: st.SearchStrategy[Step] = st.one_of(
    st.builds(
        Run,
        session=st.integers(0, 5),
        calls=st.lists(_call, max_size=4).map(tuple),
        end=st.sampled_from(["ok", "ok", "ok", "sigterm", "sigkill"]),
    ),
    st.just(NewSession()),
    st.builds(Forget, session=st.integers(0, 5)),
    st.just(Restart()),
    st.just(Move()),
)


@dataclass
class Claude:
    """Each session's saved totals per model, as claude keeps them in its transcript."""

    saved: dict[int, dict[str, Figures]] = field(default_factory=dict)

    def run(
        self, session: int, calls: tuple[tuple[str, Figures], ...], end: End
    ) -> dict[str, Figures] | None:
        totals = dict(self.saved.get(session, {}))
        for model, cost in calls:
            totals[model] = totals.get(model, Figures()) + cost
        if end != "sigkill":
            self.saved[session] = totals
        return totals if end == "ok" else None


@dataclass
class Hive:
    """The coordinator: its store (durable) and nothing else it needs to count."""

    store: dict[tuple[str, int], dict[str, Figures]]
    host: str = "h1"

    def count(self, agent: str, session: int, reported: dict[str, Figures] | None) -> Figures:
        previous = self.store.get((agent, session), {})
        result = run_cost(previous, reported or {})
        self.store[(agent, session)] = result.totals
        return result.own


def _went_down(before: dict[str, Figures], after: dict[str, Figures]) -> bool:
    """What shows a restart of claude's totals: a model lower, or gone."""
    return any(m not in after or after[m].below(b) for m, b in before.items() if b != Figures())


@given(st.lists(_step, max_size=40))
@settings(max_examples=400, deadline=None)
def test_each_run_counts_what_claude_saved_since_the_last_report(history: list[Step]) -> None:
    claude = Claude()
    store: dict[tuple[str, int], dict[str, Figures]] = {}
    hive = Hive(store)
    opened = [0]  # the history's session ids; the agent's runs go to one of them
    pending: dict[int, Figures] = {}  # the oracle: saved since the session's last report
    last: dict[int, dict[str, Figures]] = {}  # the oracle: the session's last report
    forgot: set[int] = set()  # sessions whose totals restarted since their last report
    counted = expected = billed = Figures()
    undetectable = False
    for step in history:
        if isinstance(step, NewSession):
            opened.append(max(opened) + 1)
        elif isinstance(step, Forget):
            sid = opened[step.session % len(opened)]
            claude.saved.pop(sid, None)
            pending[sid] = Figures()
            forgot.add(sid)
        elif isinstance(step, Restart):
            hive = Hive(store, hive.host)  # a new coordinator on the same store
        elif isinstance(step, Move):
            hive = Hive(store, "h2" if hive.host == "h1" else "h1")
        else:
            sid = opened[step.session % len(opened)]
            calls = summed(c for _, c in step.calls)
            billed = billed + calls
            reported = claude.run(sid, step.calls, step.end)
            if step.end != "sigkill":
                pending[sid] = pending.get(sid, Figures()) + calls
            own = hive.count("alice", sid, reported)
            if reported is None:
                assert own == Figures(), "a run without a result counts nothing now"
                continue
            truth = pending.pop(sid)
            if sid in forgot and not _went_down(last.get(sid, {}), reported):
                # claude restarted the totals but they grew past the last report anyway:
                # no rule can tell; the run is under-counted, never over-counted.
                undetectable = True
            forgot.discard(sid)
            last[sid] = reported
            if not undetectable:
                assert own == truth
            counted, expected = counted + own, expected + truth
    if undetectable:
        assert counted.usd <= expected.usd and counted.tokens <= expected.tokens
    else:
        assert counted == expected
    # Never more than the calls made: what is missing is what claude never reported.
    assert counted.usd <= billed.usd and counted.tokens <= billed.tokens


def test_three_resumed_runs_count_three_equal_costs() -> None:
    turn = Figures(0.152475, 50_800, 5)
    previous: dict[str, Figures] = {}
    owns = []
    for k in (1, 2, 3):
        reported = {"claude-sonnet-4-5-20250929": Figures(0.152475 * k, 50_800 * k, 5 * k)}
        result = run_cost(previous, reported)
        owns.append(result.own)
        previous = result.totals
    assert [o.input_tokens for o in owns] == [50_800] * 3
    assert [round(o.usd, 9) for o in owns] == [round(turn.usd, 9)] * 3


def test_a_second_model_counts_from_its_first_appearance() -> None:
    sonnet, haiku = Figures(1.0, 100), Figures(0.25, 300)
    first = run_cost({}, {"sonnet": sonnet})
    second = run_cost(first.totals, {"sonnet": sonnet + sonnet, "haiku": haiku})
    assert second.own == Figures(1.25, 400) and not second.restarted
    third = run_cost(second.totals, {"sonnet": sonnet + sonnet, "haiku": haiku + haiku})
    assert third.own == haiku


def test_totals_that_went_down_or_lost_a_model_count_whole() -> None:
    previous = {"sonnet": Figures(3.0, 1000), "haiku": Figures(0.5, 50)}
    lower = run_cost(previous, {"sonnet": Figures(1.0, 10), "haiku": Figures(0.5, 50)})
    assert lower.restarted and lower.own == Figures(1.5, 60)
    missing = run_cost(previous, {"sonnet": Figures(4.0, 1100)})
    assert missing.restarted and missing.own == Figures(4.0, 1100)
    assert missing.totals == {"sonnet": Figures(4.0, 1100)}


def test_a_run_without_totals_keeps_the_previous_ones() -> None:
    previous = {"sonnet": Figures(3.0, 1000)}
    result = run_cost(previous, {})
    assert result.own == Figures() and result.totals == previous


def test_a_legacy_total_counts_the_usd_past_it_and_tokens_in_proportion() -> None:
    legacy = {UNKNOWN_MODEL: Figures(3.0)}
    result = run_cost(legacy, {"sonnet": Figures(4.0, 4000, 40), "haiku": Figures(0.0, 0, 0)})
    assert result.own == Figures(1.0, 1000, 10) and not result.restarted
    assert UNKNOWN_MODEL not in result.totals
    # Lower than the legacy total: a new count, whole.
    restarted = run_cost(legacy, {"sonnet": Figures(0.5, 100)})
    assert restarted.restarted and restarted.own == Figures(0.5, 100)


def test_a_usd_only_report_is_compared_by_its_sum() -> None:
    previous = {"sonnet": Figures(2.0, 100), "haiku": Figures(1.0, 50)}
    result = run_cost(previous, {UNKNOWN_MODEL: Figures(3.5)})
    assert result.own == Figures(0.5) and not result.restarted
