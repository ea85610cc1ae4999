"""Plateau stoppers: a trial whose metric stopped moving, an experiment whose best results did."""

from __future__ import annotations

import logging
import math
from collections import deque
from numbers import Real
from typing import Any

from actors.schedulers._common import MissingResultKeyError, Mode, check_number, lookup, parse_mode
from actors.schedulers._numeric import np_std
from actors.stoppers._base import Stopper

log = logging.getLogger("audition")


def _metric_value(result: dict[str, Any], metric: str, owner: str) -> float:
    value = lookup(result, metric, owner)
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{owner}: metric {metric!r} must be a number, got {type(value).__name__} {value!r}")
    return float(value)


def _check_metric(owner: str, metric: Any) -> str:
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"{owner}: metric must be the name of a reported result key, got {metric!r}")
    return metric


class TrialPlateauStopper(Stopper):
    """Stops a trial once the standard deviation of its last ``num_results`` values of
    ``metric`` is below ``std`` (strictly, as in Ray; a NaN in the window stops nothing).

    No trial is stopped before ``grace_period`` results.  With ``metric_threshold``
    (which needs ``mode``) a trial is only stopped once its current value is at
    least as good as the threshold (``<=`` for ``"min"``, ``>=`` for ``"max"``).
    """

    def __init__(
        self,
        metric: str,
        std: float = 0.01,
        num_results: int = 4,
        grace_period: int = 4,
        metric_threshold: float | None = None,
        mode: str | None = None,
    ) -> None:
        name = type(self).__name__
        self.metric = _check_metric(name, metric)
        self.std = float(check_number(name, "std", std, minimum=0))
        self.num_results = check_number(name, "num_results", num_results, minimum=1, integer=True)
        self.grace_period = check_number(name, "grace_period", grace_period, minimum=0, integer=True)
        self.mode = parse_mode(mode, name)
        self.metric_threshold = None
        if metric_threshold is not None:
            self.metric_threshold = float(check_number(name, "metric_threshold", metric_threshold))
            if self.mode is None and self.metric_threshold == 0:  # Ray 2.60 (recorded) accepts it, unused
                log.warning("%s: metric_threshold=0 without mode is ignored, as in Ray Tune; pass "
                            "mode='min' or mode='max' to use it", name)
            elif self.mode is None:
                raise ValueError(
                    f"{name}: metric_threshold needs mode='min' or mode='max' "
                    "to know which side of it is good enough"
                )
        self._windows: dict[str, deque[float]] = {}
        self._counts: dict[str, int] = {}

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        # A result without the metric counts and holds its place in the window, which then stops
        # nothing (Ray 2.60, recorded: a metric reported every other result never raises)
        missing = self.metric not in result
        value = math.nan if missing else _metric_value(result, self.metric, type(self).__name__)
        window = self._windows.setdefault(trial_id, deque(maxlen=self.num_results))
        window.append(value)
        self._counts[trial_id] = count = self._counts.get(trial_id, 0) + 1
        if count < self.grace_period or len(window) < self.num_results:
            return False
        if self.metric_threshold is not None and self.mode is not None:
            if missing:  # Ray fails here too (a TypeError comparing None with the threshold)
                raise MissingResultKeyError(
                    f"{type(self).__name__}: trial {trial_id}'s result has no {self.metric!r} to compare "
                    f"with metric_threshold={self.metric_threshold} (keys present: {sorted(result)}); "
                    f"report {self.metric!r} in every result or drop metric_threshold"
                )
            if self.mode is Mode.MIN and value > self.metric_threshold:
                return False
            if self.mode is Mode.MAX and value < self.metric_threshold:
                return False
        return np_std(window) < self.std  # Ray's test: numpy's std, strictly below; NaN never stops

    def save(self) -> dict[str, Any]:
        return {"windows": {t: list(w) for t, w in self._windows.items()}, "counts": dict(self._counts)}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self._windows = {
            t: deque(v, maxlen=self.num_results) for t, v in state.get("windows", {}).items()
        }
        self._counts = dict(state.get("counts", {}))


class ExperimentPlateauStopper(Stopper):
    """Stops the experiment once the best ``top`` values of ``metric`` seen across all
    trials have a standard deviation of at most ``std`` for ``patience`` consecutive
    results (``patience=0`` or ``1``: as soon as they plateau)."""

    def __init__(
        self, metric: str, std: float = 0.001, top: int = 10, mode: str = "min", patience: int = 0
    ) -> None:
        name = type(self).__name__
        self.metric = _check_metric(name, metric)
        # as Ray 2.60 (recorded): top > 1 and std > 0, else ValueError (a single value plateaus at once)
        self.std = float(check_number(name, "std", std, minimum=0, strict=True))
        self.top = check_number(name, "top", top, minimum=1, strict=True, integer=True)
        self.patience = check_number(name, "patience", patience, minimum=0, integer=True)
        parsed = parse_mode(mode, name, allow_none=False)
        assert parsed is not None
        self.mode = parsed
        self._best: list[float] = []
        self._streak = 0

    def has_plateaued(self) -> bool:
        """The ``top`` best values are all in and their standard deviation is at most ``std``."""
        return len(self._best) == self.top and np_std(self._best) <= self.std

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        value = _metric_value(result, self.metric, type(self).__name__)
        # Ray's bookkeeping, kept exactly (a NaN is sorted as Python's sorted() places it):
        # the list stays ascending and keeps its first (min) or last (max) ``top`` values
        best = sorted([*self._best, value])
        self._best = best[:self.top] if self.mode is Mode.MIN else best[-self.top:]
        self._streak = self._streak + 1 if self.has_plateaued() else 0
        return self.stop_all()

    def stop_all(self) -> bool:
        """Plateaued for ``patience`` results in a row (recorded from Ray 2.60: ``patience=2``
        stops at the second plateaued result, ``0`` at the first)."""
        return self.has_plateaued() and self._streak >= self.patience

    def save(self) -> dict[str, Any]:
        return {"best": list(self._best), "streak": self._streak}

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        self._best = sorted(state.get("best", []))  # (saved descending for "max" before)
        self._streak = int(state.get("streak", 0))


__all__ = ["ExperimentPlateauStopper", "TrialPlateauStopper"]
