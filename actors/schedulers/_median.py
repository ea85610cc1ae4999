"""The median stopping rule (Vizier): drop trials that trail the median.

At time ``t`` (past ``grace_period``) a trial is stopped if its best score so far
is strictly worse than the median, over the other trials that have reached
``t``, of their running averages over ``[grace_period, t]``.  While fewer than
``min_samples_required`` other trials have reached ``t`` the trial cannot be
judged; it then yields its slot (PAUSE) to a waiting trial that is behind it,
at most once per ``min_time_slice``, so the population catches up and can be
compared.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, ClassVar

from actors._reducer import Decision
from actors._trial import TrialSnapshot, TrialStatus
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import MetricScheduler, check_number


@dataclass
class _History:
    """One trial's results as sorted times with prefix sums, so a running average over
    any time window costs two binary searches."""

    times: list[float] = field(default_factory=list)
    sums: list[float] = field(default_factory=lambda: [0.0])  # sums[k] = score_0 + ... + score_{k-1}
    best: float = -math.inf

    def add(self, t: float, score: float) -> None:
        while self.times and self.times[-1] >= t:  # a restarted trial redoes these: replace them
            self.times.pop()
            self.sums.pop()
        self.times.append(t)
        self.sums.append(self.sums[-1] + score)
        self.best = max(self.best, score)

    @property
    def latest(self) -> float:
        return self.times[-1] if self.times else -math.inf

    def mean(self, lo: float, hi: float) -> float | None:
        i, j = bisect.bisect_left(self.times, lo), bisect.bisect_right(self.times, hi)
        return (self.sums[j] - self.sums[i]) / (j - i) if j > i else None


class MedianStoppingRule(MetricScheduler):
    """Stop (or, with ``hard_stop=False``, pause) trials whose best result trails the median.

    Args:
        time_attr: monotonically increasing result key that measures progress.
        metric, mode: objective; may be left ``None`` and taken from ``TuneConfig``.
        grace_period: no trial is judged before it; averages start from it.
        min_samples_required: other trials needed at a time point to judge a trial.
        min_time_slice: least progress (in ``time_attr`` units) between two yields.
        hard_stop: stop bad trials; if False they are paused, never judged again,
            and resumed first-in-first-out once nothing better is waiting.
    """

    _PARAMS: ClassVar[tuple[str, ...]] = (
        "time_attr", "grace_period", "min_samples_required", "min_time_slice", "hard_stop",
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
    ) -> None:
        super().__init__(metric, mode)
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
        self._results: dict[str, _History] = {}
        self._stopped: set[str] = set()
        self._last_pause: dict[str, float] = {}

    def on_trial_add(self, controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._results.setdefault(trial.trial_id, _History())

    def _latest_time(self, trial_id: str) -> float:
        h = self._results.get(trial_id)
        return h.latest if h is not None else -math.inf

    def running_average(self, trial_id: str, t: float) -> float | None:
        """Mean score of ``trial_id`` over results with ``grace_period <= time <= t`` (None if none)."""
        h = self._results.get(trial_id)
        return h.mean(self.grace_period, t) if h is not None else None

    def on_trial_result(
        self, controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        tid = trial.trial_id
        if tid in self._stopped:
            return Decision.STOP if self.hard_stop else Decision.CONTINUE
        t = self._time(result, self.time_attr)
        score = self._score(result)
        history = self._results.setdefault(tid, _History())
        history.add(t, score)
        if t < self.grace_period:
            return Decision.CONTINUE
        averages = [
            avg
            for other, h in self._results.items()
            if other != tid and h.latest >= t and (avg := h.mean(self.grace_period, t)) is not None
        ]
        # A trial whose result says done ends now: pausing it would resume it past its end.
        done = bool(result.get("done"))
        if len(averages) < self.min_samples_required:
            return Decision.CONTINUE if done else self._yield_if_useful(controller, tid, t)
        median = statistics.median(averages)
        if history.best < median:
            self._stopped.add(tid)
            if self.hard_stop:
                return Decision.STOP
            return Decision.CONTINUE if done else Decision.PAUSE
        return Decision.CONTINUE

    def _yield_if_useful(self, controller: SchedulerController, tid: str, t: float) -> Decision:
        """PAUSE so a trial that is behind can catch up and become a sample, but at most
        once per ``min_time_slice`` and only when such a trial is waiting."""
        if t - self._last_pause.get(tid, -math.inf) <= self.min_time_slice:
            return Decision.CONTINUE
        behind = any(
            o.trial_id != tid and o.trial_id not in self._stopped
            and (o.status is TrialStatus.PENDING
                 or (o.status is TrialStatus.PAUSED and self._latest_time(o.trial_id) < t))
            for o in controller.get_trials()
        )
        if not behind:
            return Decision.CONTINUE
        self._last_pause[tid] = t
        return Decision.PAUSE

    def choose_trial_to_run(self, controller: SchedulerController) -> TrialSnapshot | None:
        """Pending trials first, then paused ones that are still judged (least progress
        first), then trials paused by the rule itself (FIFO)."""
        trials = controller.get_trials()
        for t in trials:
            if t.status is TrialStatus.PENDING:
                return t
        paused = [t for t in trials if t.status is TrialStatus.PAUSED]
        judged = [t for t in paused if t.trial_id not in self._stopped]
        if judged:
            return min(judged, key=lambda t: self._latest_time(t.trial_id))
        return paused[0] if paused else None

    def debug_string(self) -> str:
        return f"{type(self).__name__}: {len(self._stopped)} of {len(self._results)} trials stopped"


__all__ = ["MedianStoppingRule"]
