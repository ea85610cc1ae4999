"""The running totals Ray Tune's ``Trainable.train()`` keeps from what each result reports.

A result that reports ``timesteps_this_iter`` or ``episodes_this_iter`` gets ``timesteps_total``
or ``episodes_total``: the sum of every increment so far, counted from the checkpoint the run was
restored from (its result's totals). A total the result reports itself is kept, but the running sum
goes on without it. ``timesteps_since_restore`` is this run's sum of ``timesteps_this_iter``, added
once it is not zero. Ray does this for class and function trainables alike (its function API runs
under the same ``train()``); this class does it for both too.
"""

from __future__ import annotations

from typing import Any

TIMESTEPS_THIS_ITER = "timesteps_this_iter"
EPISODES_THIS_ITER = "episodes_this_iter"
TIMESTEPS_TOTAL = "timesteps_total"
EPISODES_TOTAL = "episodes_total"
TIMESTEPS_SINCE_RESTORE = "timesteps_since_restore"


class RunningTotals:
    """``timesteps_total``/``episodes_total`` of one run; ``None`` until an increment is reported."""

    def __init__(self, restored_metrics: dict[str, Any] | None) -> None:
        metrics = restored_metrics or {}
        self.timesteps_total: Any = metrics.get(TIMESTEPS_TOTAL)
        self.episodes_total: Any = metrics.get(EPISODES_TOTAL)
        self.timesteps_since_restore: Any = 0

    def count(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Add this result's increments; the keys to fill in where the result has none of its own."""
        steps = metrics.get(TIMESTEPS_THIS_ITER)
        if steps is not None:
            self.timesteps_total = (self.timesteps_total or 0) + steps
            self.timesteps_since_restore += steps
        episodes = metrics.get(EPISODES_THIS_ITER)
        if episodes is not None:
            self.episodes_total = (self.episodes_total or 0) + episodes
        filled: dict[str, Any] = {}
        if self.timesteps_total is not None and TIMESTEPS_TOTAL not in metrics:
            filled[TIMESTEPS_TOTAL] = self.timesteps_total
        if self.episodes_total is not None and EPISODES_TOTAL not in metrics:
            filled[EPISODES_TOTAL] = self.episodes_total
        return filled

    def auto_filled(self) -> dict[str, Any]:
        """What is added to every result, over the result's own keys (Ray's auto-filled metrics)."""
        return {TIMESTEPS_SINCE_RESTORE: self.timesteps_since_restore} if self.timesteps_since_restore else {}


__all__ = ["RunningTotals"]
