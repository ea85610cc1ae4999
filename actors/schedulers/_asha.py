"""Asynchronous successive halving (ASHA), the stopping variant.

Each bracket has rungs at ``grace_period * reduction_factor**(k + s)`` (for
bracket ``s``) below ``max_t``.  When a trial first passes a rung, its metric is
recorded there and compared with every value recorded at that rung so far: the
trial goes on only if it is among the best ``ceil(n / reduction_factor)`` of the
``n`` values (its own included), so the first trial at a rung always goes on.
Nothing ever waits for other trials, which is what makes it asynchronous and
why it never pauses a trial.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from actors._reducer import Decision
from actors._trial import TrialSnapshot
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import MetricScheduler, check_number


class ASHAScheduler(MetricScheduler):
    """Early-stops trials that are not in the top ``1/reduction_factor`` at a rung.

    Args:
        time_attr: monotonically increasing result key that measures progress.
        metric, mode: objective; may be left ``None`` and taken from ``TuneConfig``.
        max_t: trials are stopped once ``time_attr`` reaches it (if ``stop_last_trials``).
        grace_period: first rung; no trial is stopped before it.
        reduction_factor: keep the top ``1/reduction_factor`` at each rung.
        brackets: number of brackets; trials are assigned round-robin in the
            order they are added, so the assignment is deterministic.
        stop_last_trials: stop trials at ``max_t`` (else they run until they end).
    """

    _PARAMS: ClassVar[tuple[str, ...]] = (
        "time_attr", "max_t", "grace_period", "reduction_factor", "brackets", "stop_last_trials",
    )
    _STATE: ClassVar[tuple[str, ...]] = ("_rungs", "_trial_bracket", "_next_bracket", "_stopped")

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(metric, mode)
        name = type(self).__name__
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(f"{name}: time_attr must be a non-empty result key, got {time_attr!r}")
        self.time_attr = time_attr
        self.max_t = check_number(name, "max_t", max_t, minimum=0, strict=True)
        self.grace_period = check_number(name, "grace_period", grace_period, minimum=0, strict=True)
        self.reduction_factor = check_number(
            name, "reduction_factor", reduction_factor, minimum=1, strict=True
        )
        self.brackets = check_number(name, "brackets", brackets, minimum=1, integer=True)
        if self.grace_period > self.max_t:
            raise ValueError(
                f"{name}: grace_period={grace_period!r} exceeds max_t={max_t!r}; "
                "lower grace_period or raise max_t"
            )
        self.stop_last_trials = bool(stop_last_trials)
        # Per bracket, rungs in ascending milestone order: [milestone, {trial_id: score}].
        self._rungs: list[list[list[Any]]] = [self._make_rungs(s) for s in range(self.brackets)]
        self._trial_bracket: dict[str, int] = {}
        self._next_bracket = 0
        self._stopped: set[str] = set()

    def _make_rungs(self, s: int) -> list[list[Any]]:
        rungs: list[list[Any]] = []
        k = 0
        while True:
            milestone = self.grace_period * self.reduction_factor ** (k + s)
            if milestone >= self.max_t:
                return rungs
            rungs.append([milestone, {}])
            k += 1

    def milestones(self, bracket: int = 0) -> list[float]:
        """The rung milestones of ``bracket``, ascending (for inspection and tests)."""
        return [m for m, _ in self._rungs[bracket]]

    def recorded(self, bracket: int = 0) -> dict[float, dict[str, float]]:
        """Scores recorded per rung of ``bracket`` (higher is better, whatever the mode)."""
        return {m: dict(r) for m, r in self._rungs[bracket]}

    def bracket_of(self, trial_id: str) -> int:
        return self._trial_bracket[trial_id]

    def _assign(self, trial_id: str) -> int:
        if trial_id not in self._trial_bracket:
            self._trial_bracket[trial_id] = self._next_bracket % self.brackets
            self._next_bracket += 1
        return self._trial_bracket[trial_id]

    def on_trial_add(self, controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._assign(trial.trial_id)

    def on_trial_result(
        self, controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        tid = trial.trial_id
        if tid in self._stopped:
            return Decision.STOP
        t = self._time(result, self.time_attr)
        score = self._score(result)
        decision = Decision.CONTINUE
        # Only the highest rung passed counts, so a coarse time_attr that jumps over
        # several rungs is judged once, at the rung closest to where it really is.
        for milestone, recorded in reversed(self._rungs[self._assign(tid)]):
            if t < milestone:
                continue
            if tid not in recorded:
                keep = math.ceil((len(recorded) + 1) / self.reduction_factor)
                better = sum(1 for v in recorded.values() if v > score)
                recorded[tid] = score
                if better >= keep:
                    decision = Decision.STOP
            break
        if self.stop_last_trials and t >= self.max_t:
            decision = Decision.STOP
        if decision is Decision.STOP:
            self._stopped.add(tid)
        return decision

    def debug_string(self) -> str:
        parts = []
        for b, rungs in enumerate(self._rungs):
            desc = ", ".join(f"{m}:{len(r)}" for m, r in rungs)
            parts.append(f"bracket {b} [{desc}]")
        return f"{type(self).__name__}: " + "; ".join(parts)


AsyncHyperBandScheduler = ASHAScheduler

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler"]
