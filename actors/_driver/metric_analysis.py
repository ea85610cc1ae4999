"""Ray Tune's per-trial ``metric_analysis``: every numeric result key's max, min, avg, last and last-N-avg,
updated result by result with Ray 2.60's arithmetic (``_TrainingRunMetadata.update_metric``).

Callbacks see it on their trials (``Trial.metric_analysis``, ``Trial.metric_n_steps``), as does
``ExperimentAnalysis``; ``ResultGrid``'s best-trial scopes read the same statistics.
"""

from __future__ import annotations

import numbers
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from actors._engine.flat import flatten

N_STEPS = (5, 10)  # Ray's: the last-5-avg and last-10-avg windows
UNANALYSED = frozenset({"trial_id", "experiment_id", "date", "timestamp", "pid", "hostname", "node_ip", "config"})
"""Result keys Ray 2.60 keeps out of ``metric_analysis`` (its ``DEBUG_METRICS``)."""


class MetricAnalysis:
    """The statistics of one trial's results so far. ``update`` takes each result in order (a retried
    trial's results included, as Ray's run metadata keeps counting across runs)."""

    def __init__(self) -> None:
        self.analysis: dict[str, dict[str, Any]] = {}
        self.windows: dict[str, dict[str, deque[Any]]] = {}  # Ray's metric_n_steps: per metric, per "5"/"10"

    def update(self, result: Mapping[str, Any]) -> None:
        """Take one result (nested keys as ``a/b``; numbers and bools only, as Ray's ``Number`` check)."""
        kept = {k: v for k, v in result.items() if k not in UNANALYSED}
        step = result.get("training_iteration")
        for metric, value in flatten(kept).items():
            if isinstance(value, numbers.Number):
                self.add(metric, value, step)

    def add(self, metric: str, value: Any, step: Any) -> None:
        """One value of one metric at ``step`` (its ``training_iteration``: the running average's weight)."""
        stats = self.analysis.get(metric)
        if stats is None:
            self.analysis[metric] = {"max": value, "min": value, "avg": value, "last": value,
                                     **{f"last-{n}-avg": value for n in N_STEPS}}
            self.windows[metric] = {str(n): deque([value], maxlen=n) for n in N_STEPS}
            return
        step = step or 1
        # max(value, best), in that order: a new NaN is kept, and dropped at the next number (Ray's)
        stats["max"] = max(value, stats["max"])
        stats["min"] = min(value, stats["min"])
        stats["avg"] = 1 / step * (value + (step - 1) * stats["avg"])
        stats["last"] = value
        for n in N_STEPS:
            window = self.windows[metric][str(n)]
            window.append(value)
            stats[f"last-{n}-avg"] = sum(window) / len(window)

    def copied(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, deque[Any]]]]:
        """(``metric_analysis``, ``metric_n_steps``) as they are now, for a trial snapshot."""
        return ({m: dict(s) for m, s in self.analysis.items()},
                {m: {n: deque(w, maxlen=w.maxlen) for n, w in ws.items()} for m, ws in self.windows.items()})


def analysed(rows: Iterable[Mapping[str, Any]]) -> MetricAnalysis:
    """The analysis of a history, oldest row first."""
    out = MetricAnalysis()
    for row in rows:
        out.update(row)
    return out


__all__ = ["N_STEPS", "UNANALYSED", "MetricAnalysis", "analysed"]
