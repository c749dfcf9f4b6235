"""What one claude run cost: the rule behind every spend figure the hive shows.

Pure module: no I/O.

**Which figure is the truth.** claude's own price, as its ``result`` event's
``modelUsage`` reports it: per model, the USD (``costUSD``) and the tokens.
Those are the *session's* totals so far, not the run's: claude saves them in
the session's transcript at the end of a run and restores them on
``--resume`` (measured on 2.1.328: a resumed run of 50,800 input tokens
reports the session's 101,600 and twice the first run's cost). So a run's own
figures are the difference between what its session reported after it and
what the session's previous counted run reported. The price table is
claude's, not one of ours: it is the table of the claude that made the calls,
so it knows every model it can call (its small fast model, a subagent's
model, models newer than this code), its cache-write tiers and long-context
rates, and its figure is the one claude's own ``/cost`` shows. The summary
``result.usage`` is not used for spend: it reports zero tokens for
``/compact`` and leaves out a background task's calls.

:func:`run_cost` applies the rule to one run, given *previous* — the totals
the session's last counted run reported, per model (the coordinator keeps
them in the store per agent and session id, so a restart of anything, or a
move of the agent to another host, changes nothing):

- a run that reported nothing (claude crashed or was killed before its
  ``result``) counts nothing, and *previous* stands. claude saves a run
  stopped with SIGTERM into the session's totals, so its calls count with
  the session's next run; calls of a run killed outright (SIGKILL, a host
  crash) never reach claude's totals and are not counted;
- otherwise each model counts ``reported − previous``; a model new to the
  session, or a session never seen (a new session: the first turn, a resume
  that failed over to a new one), counts whole;
- if a model's figure went *down*, or a model the session had is missing,
  claude restarted the session's totals (it lost its saved state): the run
  counts whole, and its totals are the new *previous*.

Summed over a session's runs the differences telescope to the session's last
reported totals: nothing claude accounted is counted twice or lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["UNKNOWN_MODEL", "USD_NOISE", "Figures", "RunCost", "run_cost", "summed"]

#: The model key of a session total known in USD only: kept from before totals were
#: kept per model (the store's repair seeds it), or reported without ``modelUsage``.
UNKNOWN_MODEL = ""
#: A USD total lower by less than this is float noise, not claude restarting its totals.
USD_NOISE = 1e-9


@dataclass(frozen=True, slots=True)
class Figures:
    """USD and tokens, of one model or summed over several: a run's, or a session's so far."""

    usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Every token a call is billed for: input, output, cache reads and writes."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_creation_tokens
        )

    def __add__(self, other: Figures) -> Figures:
        return Figures(
            self.usd + other.usd,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_creation_tokens + other.cache_creation_tokens,
        )

    def since(self, earlier: Figures) -> Figures:
        """What was added to ``earlier`` to make these totals (none of it below zero)."""
        return Figures(
            max(0.0, self.usd - earlier.usd),
            max(0, self.input_tokens - earlier.input_tokens),
            max(0, self.output_tokens - earlier.output_tokens),
            max(0, self.cache_read_tokens - earlier.cache_read_tokens),
            max(0, self.cache_creation_tokens - earlier.cache_creation_tokens),
        )

    def below(self, earlier: Figures) -> bool:
        """Whether any figure is lower than ``earlier``'s: totals cannot have grown from it."""
        return (
            self.usd < earlier.usd - USD_NOISE
            or self.input_tokens < earlier.input_tokens
            or self.output_tokens < earlier.output_tokens
            or self.cache_read_tokens < earlier.cache_read_tokens
            or self.cache_creation_tokens < earlier.cache_creation_tokens
        )


_ZERO = Figures()


def summed(figures: Iterable[Figures]) -> Figures:
    """The sum of ``figures`` (zero for none)."""
    total = _ZERO
    for f in figures:
        total = total + f
    return total


@dataclass(frozen=True, slots=True)
class RunCost:
    """One run's own figures, and the session's totals to difference its next run against."""

    own: Figures
    totals: dict[str, Figures]
    restarted: bool = False  # claude's totals went down: the run was counted whole


def run_cost(previous: Mapping[str, Figures], reported: Mapping[str, Figures]) -> RunCost:
    """The run's own figures from its session's ``previous`` and ``reported`` totals.

    Both map a model to its session totals (``reported`` is the run's
    ``modelUsage``; empty when the run reported none). See the module's rule.
    """
    if not reported:
        return RunCost(_ZERO, dict(previous))
    if UNKNOWN_MODEL in previous or UNKNOWN_MODEL in reported:
        return _after_usd_only(summed(previous.values()), reported)
    restarted = any(
        reported[model].below(before) if model in reported else before != _ZERO
        for model, before in previous.items()
    )
    if restarted:
        return RunCost(summed(reported.values()), dict(reported), restarted=True)
    own = summed(now.since(previous.get(model, _ZERO)) for model, now in reported.items())
    return RunCost(own, dict(reported))


def _after_usd_only(before: Figures, reported: Mapping[str, Figures]) -> RunCost:
    """A run where either total is known in USD only (:data:`UNKNOWN_MODEL`): compared
    as sums over the models.

    The USD is exact. The tokens behind such a total are unknown, so the run's
    tokens are estimated as the session's, in the proportion of its USD that is
    the run's own: once per session that spans the store's repair of old rows.
    """
    whole = summed(reported.values())
    if whole.usd < before.usd - USD_NOISE:
        return RunCost(whole, dict(reported), restarted=True)
    usd = max(0.0, whole.usd - before.usd)
    share = usd / whole.usd if whole.usd > 0 else 0.0
    own = Figures(
        usd,
        round(whole.input_tokens * share),
        round(whole.output_tokens * share),
        round(whole.cache_read_tokens * share),
        round(whole.cache_creation_tokens * share),
    )
    return RunCost(own, dict(reported))
