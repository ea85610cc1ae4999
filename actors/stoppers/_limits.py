"""Budget stoppers: a number of iterations per trial, a wall-clock budget overall."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from actors.schedulers._common import check_number
from actors.stoppers._base import CombinedStopper, Stopper


class MaximumIterationStopper(Stopper):
    """Stops each trial at the ``max_iter``-th result this stopper sees of it.

    As in Ray, it counts results, not ``training_iteration``: a trial retried
    from scratch after failing at its third result is stopped by
    ``MaximumIterationStopper(5)`` at its third iteration (recorded from Ray 2.60).
    Use ``stop={"training_iteration": n}`` to stop at an iteration.
    """

    def __init__(self, max_iter: int) -> None:
        self.max_iter = check_number("MaximumIterationStopper", "max_iter", max_iter, minimum=1, integer=True)
        self._iter: dict[str, int] = {}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._iter[trial_id] = self._iter.get(trial_id, 0) + 1
        return self._iter[trial_id] >= self.max_iter

    def save(self) -> dict[str, Any]:
        return {"iter": dict(self._iter)}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self._iter = dict(state.get("iter", {}))


class TimeoutStopper(Stopper):
    """Stops the whole experiment once ``timeout`` (seconds or a ``timedelta``) has elapsed.

    The budget counts from the first time the stopper is consulted, not from
    its construction, and ``clock`` (default ``time.monotonic``) is injectable
    for tests.  A restored stopper continues with what was left of the budget.
    """

    def __init__(
        self, timeout: float | datetime.timedelta, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        self.timeout = float(
            check_number("TimeoutStopper", "timeout (seconds)", timeout, minimum=0, strict=True)
        )
        if not callable(clock):
            raise TypeError(f"TimeoutStopper: clock must be a function returning seconds, got {clock!r}")
        self.clock = clock
        self._start: float | None = None
        self._spent = 0.0  # budget used before the last restore

    def elapsed(self) -> float:
        """Seconds of the budget used so far (starts the clock on first use)."""
        now = self.clock()
        if self._start is None:
            self._start = now
        return self._spent + (now - self._start)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self.elapsed()
        return False

    def stop_all(self) -> bool:
        return self.elapsed() >= self.timeout

    def save(self) -> dict[str, Any]:
        spent = self._spent if self._start is None else self._spent + (self.clock() - self._start)
        return {"spent": spent}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self._spent = float(state.get("spent", 0.0))
        self._start = None


def with_time_budget(stopper: Stopper | None, budget: float | datetime.timedelta | None) -> Stopper | None:
    """``stop=`` and ``TuneConfig(time_budget_s)`` together, as Ray Tune combines them."""
    if budget is None:
        return stopper
    timeout = TimeoutStopper(budget)
    return timeout if stopper is None else CombinedStopper(stopper, timeout)


__all__ = ["MaximumIterationStopper", "TimeoutStopper", "with_time_budget"]
