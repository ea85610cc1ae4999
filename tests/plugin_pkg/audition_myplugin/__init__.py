"""An example audition scheduler plugin: stop the trials that trail the leader.

At iteration ``at`` every trial is compared with the best value any trial had
at that iteration so far; a trial worse by more than ``tolerance`` is stopped.
It is a cheap, asynchronous early-stopping rule: no trial ever waits for
another one.
"""

from __future__ import annotations

from typing import Any

from actors import TrialSnapshot
from actors.schedulers import Decision, FIFOScheduler, SchedulerController


class MyScheduler(FIFOScheduler):
    """Stop a trial whose metric at iteration ``at`` trails the best seen there by more than ``tolerance``.

    ``metric``/``mode`` may be left out: the engine fills them from ``TuneConfig``.
    Every constructor argument has a default, so the class can also be named
    by an entry point or an import path (both call it without arguments).
    """

    def __init__(self, at: int = 2, tolerance: float = 0.0,
                 metric: str | None = None, mode: str | None = None) -> None:
        if isinstance(at, bool) or not isinstance(at, int) or at < 1:
            raise ValueError(f"MyScheduler: at must be an iteration number >= 1, got {at!r}")
        if tolerance < 0:
            raise ValueError(f"MyScheduler: tolerance must be >= 0, got {tolerance!r}")
        self.at = at
        self.tolerance = float(tolerance)
        self.metric = metric
        self.mode = mode
        self.best: float | None = None  # best score at ``at`` so far; higher is better
        self.stopped: list[str] = []

    def on_trial_result(self, tune_controller: SchedulerController, trial: TrialSnapshot,
                        result: dict[str, Any]) -> Decision:
        if result.get("training_iteration") != self.at:
            return Decision.CONTINUE
        if self.metric is None or self.mode not in ("min", "max"):
            raise ValueError("MyScheduler needs metric= and mode='min'/'max' (here or in TuneConfig)")
        value = float(result[self.metric])
        score = value if self.mode == "max" else -value
        if self.best is not None and score < self.best - self.tolerance:
            self.stopped.append(trial.trial_id)
            return Decision.STOP
        self.best = score if self.best is None else max(self.best, score)
        return Decision.CONTINUE


__all__ = ["MyScheduler"]
