"""When a trial must wait for decisions: its result window and its decision horizon.

A trial runs ahead of its decisions by at most ``window`` unacknowledged results. With a scheduler
that declares decision horizons (``Scheduler.decision_horizon``) the window is wide, and a result
whose ``attr`` value reaches the trial's horizon is the one result that must be decided before the
next step: the scheduler may decide something other than CONTINUE there, so the trial waits for it,
exactly as with a window of one. Below the horizon the scheduler has promised CONTINUE, so the
results travel batched and the scheduler still sees each one, in order.

Pure, and shared by the worker thread (``actors/_worker/runner.py``) and the simulator's trial
(``actors/testing/sim_trial.py``), so that both block at the very same results.
"""

from __future__ import annotations

import collections
import math
from typing import Any


def reaches(result: dict[str, Any], attr: str, horizon: float | None) -> bool:
    """Whether ``result`` must be decided before the trial goes on: no horizon known, a missing or
    non-numeric ``attr`` value (the scheduler cannot have promised anything about it), or a value
    at or past the horizon."""
    if horizon is None:
        return True
    value = result.get(attr)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return True
    return value >= horizon


def clean_horizon(value: Any) -> float | None:
    """A scheduler's answer as the engine keeps it: a number, ``inf`` for never, or None (every
    result is decided). Anything else is a plugin bug, refused with the contract in the message."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError(
            f"decision_horizon() must return a number (math.inf: never) or None, got {value!r}")
    return float(value)


class ResultWindow:
    """The results the worker has reported that are not decided yet, and whether it must wait.

    ``attr`` empty: a plain window (1 = every result decided before the next step). ``attr`` set:
    ``horizon`` (updated by every acknowledgement) marks the results that must be waited for.
    The undecided rows themselves are kept (``rows``, oldest first): the controller may never have
    received them, so a checkpoint's manifest carries them (``unconfirmed``).
    """

    __slots__ = ("attr", "awaiting", "horizon", "rows", "window")

    def __init__(self, window: int, attr: str = "", horizon: float | None = None) -> None:
        self.window = max(1, window)
        self.attr = attr
        self.horizon = horizon
        self.rows: collections.deque[dict[str, Any]] = collections.deque()
        self.awaiting = False  # a result that reached the horizon is not decided yet

    @property
    def unacked(self) -> int:
        return len(self.rows)

    def reported(self, result: dict[str, Any]) -> None:
        self.rows.append(result)
        if self.attr and reaches(result, self.attr, self.horizon):
            self.awaiting = True

    def acknowledged(self, count: int, horizon: float | None = None) -> None:
        """``count`` results were decided CONTINUE; ``horizon`` is the newest the controller knows."""
        for _ in range(min(count, len(self.rows))):
            self.rows.popleft()
        if self.attr:
            self.horizon = horizon
        if not self.rows:
            self.awaiting = False

    def hold(self) -> None:
        """A pause is pending: wait until every result reported so far is decided (TrialHold)."""
        if self.rows:
            self.awaiting = True

    @property
    def full(self) -> bool:
        """``report()`` must block until an acknowledgement arrives."""
        return len(self.rows) >= self.window or (self.awaiting and bool(self.rows))

    def unconfirmed(self, after: int, upto: int) -> list[dict[str, Any]]:
        """The undecided rows with ``after < training_iteration <= upto``: those since the previous
        checkpoint, which the next checkpoint's manifest keeps for a retry to recover."""
        return [r for r in self.rows if after < int(r["training_iteration"]) <= upto]


__all__ = ["ResultWindow", "clean_horizon", "reaches"]
