"""The median stopping rule (Vizier): drop trials that trail the median.

At time ``t`` (past ``grace_period``) a trial is stopped if its best result so far
is strictly worse than the median, over the other trials whose latest result has
reached ``t``, of their mean results over ``[grace_period, t]`` (non-finite means are
left out).  While fewer than ``min_samples_required`` such means exist the trial
cannot be judged; it then yields its slot (PAUSE) whenever another trial is pending
or paused, at most once per ``min_time_slice``.  A trial's final result is added to
its history (``on_trial_complete``), and trials are chosen first-in-first-out.

These are Ray Tune 2.60's decisions (``tests/test_ray_scheduler_fidelity.py`` replays
Ray's recorded streams), including numpy's arithmetic for the means and the median.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import MetricScheduler, Mode, check_number, choose_pending_then_paused
from actors.schedulers._numeric import np_mean, np_median


class MedianStoppingRule(MetricScheduler):
    """Stop (or, with ``hard_stop=False``, pause) trials whose best result trails the median.

    Args:
        time_attr: monotonically increasing result key that measures progress.
        metric, mode: objective; may be left ``None`` and taken from ``TuneConfig``.
        grace_period: no trial is judged before it; averages start from it.
        min_samples_required: other trials needed at a time point to judge a trial.
        min_time_slice: least progress (in ``time_attr`` units) between two yields.
        hard_stop: stop bad trials; if False they are paused, never judged again,
            and run on to their end when chosen again.
        skip_missing: a result without ``metric`` or ``time_attr`` is passed over (CONTINUE, not
            kept) as Ray's rule does, instead of stopping the experiment with an error.
    """

    _leaves_results = True  # its on_trial_result never changes the result (SchedulerHost.watch_results)

    _PARAMS: ClassVar[tuple[str, ...]] = (
        "time_attr", "grace_period", "min_samples_required", "min_time_slice", "hard_stop", "skip_missing",
    )
    _STATE: ClassVar[tuple[str, ...]] = ("_results", "_stopped", "_last_pause")

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 60.0,
        min_samples_required: int = 3,
        min_time_slice: float = 0,
        hard_stop: bool = True,
        skip_missing: bool = False,
    ) -> None:
        super().__init__(metric, mode)
        self.skip_missing = bool(skip_missing)
        name = type(self).__name__
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(f"{name}: time_attr must be a non-empty result key, got {time_attr!r}")
        self.time_attr = time_attr
        self.grace_period = check_number(name, "grace_period", grace_period, minimum=0)
        self.min_samples_required = check_number(
            name, "min_samples_required", min_samples_required, minimum=1, integer=True
        )
        self.min_time_slice = check_number(name, "min_time_slice", min_time_slice, minimum=0)
        self.hard_stop = bool(hard_stop)
        # Per trial, every (time, metric value) reported, in order, plus the final result
        # again on completion (as Ray Tune keeps them: the duplicate weighs in the means).
        self._results: dict[str, list[tuple[float, float]]] = {}
        self._stopped: set[str] = set()
        self._last_pause: dict[str, float] = {}

    def running_average(self, trial_id: str, t: float) -> float | None:
        """Mean metric value of ``trial_id`` over results with ``grace_period <= time <= t``
        (in the metric's own sign; None if there are none)."""
        scoped = [v for tt, v in self._results.get(trial_id, ()) if self.grace_period <= tt <= t]
        return np_mean(scoped) if scoped else None

    def _point(self, result: dict[str, Any]) -> tuple[float, float]:
        _, mode = self._objective()
        score = self._score(result, keep_nan=True)  # validates the value
        return self._time(result, self.time_attr), score if mode is Mode.MAX else -score

    def on_trial_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        tid = trial.trial_id
        if self.skip_missing and self._missing(result):
            return Decision.CONTINUE  # Ray: passed over, not kept
        if tid in self._stopped:
            return Decision.STOP if self.hard_stop else Decision.CONTINUE
        t, value = self._point(result)
        history = self._results.setdefault(tid, [])
        history.append((t, value))
        if t < self.grace_period:
            return Decision.CONTINUE
        means = []
        for other, h in self._results.items():
            if other != tid and h[-1][0] >= t:
                avg = self.running_average(other, t)
                if avg is not None and math.isfinite(avg):
                    means.append(avg)
        # A trial whose result says done ends now: pausing it would resume it past its end.
        done = bool(result.get("done"))
        if len(means) < self.min_samples_required:
            return Decision.CONTINUE if done else self._yield_if_useful(tune_controller, tid, t)
        median = np_median(means)
        # Ray's comparison, NaN semantics included: max(median, best) is best unless best < median.
        op = max if self._objective()[1] is Mode.MAX else min
        best = op(v for _, v in history)
        if op(median, best) != best:
            self._stopped.add(tid)
            if self.hard_stop:
                return Decision.STOP
            return Decision.CONTINUE if done else Decision.PAUSE
        return Decision.CONTINUE

    def horizon_attr(self) -> str | None:
        return self.time_attr

    def decision_horizon(self, trial: TrialSnapshot) -> float | None:
        """``grace_period``: no trial is judged before it; after it every result is (the rule compares
        with the other trials at each one). A paused loser is never judged again."""
        if trial.trial_id in self._stopped:
            return None if self.hard_stop else math.inf
        return float(self.grace_period)

    def _yield_if_useful(self, tune_controller: SchedulerController, tid: str, t: float) -> Decision:
        """PAUSE so another trial can run and become a sample, at most once per
        ``min_time_slice`` and only when some trial is pending or paused."""
        if not t - self._last_pause.get(tid, -math.inf) > self.min_time_slice:
            return Decision.CONTINUE
        if not any(o.status in (TrialStatus.PENDING, TrialStatus.PAUSED) for o in tune_controller.get_trials()):
            return Decision.CONTINUE
        self._last_pause[tid] = t
        return Decision.PAUSE

    def on_trial_complete(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> None:
        """Add the final result to the trial's history (Ray Tune does, so it counts twice)."""
        metric, _ = self._objective()
        if self.time_attr in result and metric in result:
            self._results.setdefault(trial.trial_id, []).append(self._point(result))

    def choose_trial_to_run(self, tune_controller: SchedulerController) -> TrialSnapshot | None:
        """First-in-first-out: the first pending trial, else the first paused one."""
        return choose_pending_then_paused(tune_controller)

    def debug_string(self) -> str:
        return f"Using MedianStoppingRule: num_stopped={len(self._stopped)}."  # Ray's words


__all__ = ["MedianStoppingRule"]
