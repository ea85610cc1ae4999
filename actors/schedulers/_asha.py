"""Asynchronous successive halving (ASHA), the stopping variant.

Each bracket ``s`` has rungs at ``grace_period * reduction_factor**(k + s)`` for
``k < int(log(max_t / grace_period) / log(reduction_factor) - s + 1)`` (Ray Tune's
count, so a rung can sit at ``max_t``).  On a result, the highest rung the trial has
reached and not yet recorded is judged: the cutoff is ``numpy.nanpercentile`` of the
values the *other* trials recorded there at ``(1 - 1/reduction_factor) * 100``
(linear interpolation); the trial stops if its value is below it, and its value is
recorded.  The first trial at a rung always goes on; a NaN never loses (numpy ignores
it).  The trial's final result is recorded too (``on_trial_complete``).  These are Ray
Tune 2.60's decisions, checked against recorded streams in
``tests/test_ray_scheduler_fidelity.py``.  Nothing ever waits for other trials, which is
what makes it asynchronous and why it never pauses a trial.
"""

from __future__ import annotations

import math
import random
from typing import Any, ClassVar

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import MetricScheduler, check_number
from actors.schedulers._numeric import nanpercentile, np_sum, numpy_choice, numpy_legacy_rng


class AsyncHyperBandScheduler(MetricScheduler):
    """Early-stops trials that are not in the top ``1/reduction_factor`` at a rung.

    Args:
        time_attr: monotonically increasing result key that measures progress.
        metric, mode: objective; may be left ``None`` and taken from ``TuneConfig``.
        max_t: trials are stopped once ``time_attr`` reaches it (if ``stop_last_trials``).
        grace_period: first rung; no trial is stopped before it.
        reduction_factor: keep the top ``1/reduction_factor`` at each rung.
        brackets: number of brackets; trials are assigned round-robin in the
            order they are added (a retried trial is added again), so the assignment
            is deterministic (Ray draws a bracket at random, weighted by ``e**rungs``).
        stop_last_trials: stop trials at ``max_t`` (else they run until they end).
        random_brackets: draw each trial's bracket as Ray does (weighted by ``e**rungs``), from a
            generator that repeats ``numpy.random`` after ``numpy.random.seed(seed)``.
        seed: for ``random_brackets``; ``None`` draws one.
        skip_missing: a result without ``metric`` or ``time_attr`` is passed over (CONTINUE, not
            recorded) as Ray's scheduler does, instead of stopping the experiment with an error.
    """

    _leaves_results = True  # its on_trial_result never changes the result (SchedulerHost.watch_results)

    _FORMER_NAMES = ("ASHAScheduler",)  # the class's name before 2026-12-05: saved states say it

    _PARAMS: ClassVar[tuple[str, ...]] = (
        "time_attr", "max_t", "grace_period", "reduction_factor", "brackets", "stop_last_trials",
        "random_brackets", "skip_missing",
    )
    global_numpy_draws_on_add = 1  # Ray: np.random.choice(len(brackets), p=...) for every added trial
    _STATE: ClassVar[tuple[str, ...]] = ("_rungs", "_trial_bracket", "_next_bracket", "_stopped", "_num_stopped",
                                         "_rng")

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
        random_brackets: bool = False,
        seed: int | None = None,
        skip_missing: bool = False,
    ) -> None:
        super().__init__(metric, mode)
        self.skip_missing = bool(skip_missing)
        self.random_brackets = bool(random_brackets)
        # only random_brackets draws: without it there is no generator to build or save
        self._rng = (numpy_legacy_rng(random.SystemRandom().getrandbits(32) if seed is None else seed)
                     if self.random_brackets else None)
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
        self._num_stopped = 0  # STOPs decided in on_trial_result (Ray's count, for debug_string)

    def _state_keys(self) -> tuple[str, ...]:
        return self._STATE if self.random_brackets else tuple(k for k in self._STATE if k != "_rng")

    def _make_rungs(self, s: int) -> list[list[Any]]:
        count = int(math.log(self.max_t / self.grace_period) / math.log(self.reduction_factor) - s + 1)
        return [[self.grace_period * self.reduction_factor ** (k + s), {}] for k in range(count)]

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
            if self.random_brackets:  # Ray's draw: numpy.random.choice(brackets, p=e**rungs normalised)
                sizes = [len(r) for r in self._rungs]
                probs = [math.e ** (n - max(sizes)) for n in sizes]
                total = np_sum(probs)
                assert self._rng is not None
                self._trial_bracket[trial_id] = numpy_choice(self._rng, [x / total for x in probs])
            else:
                self._trial_bracket[trial_id] = self._next_bracket % self.brackets
                self._next_bracket += 1
        return self._trial_bracket[trial_id]

    def on_trial_add(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._assign(trial.trial_id)

    def on_trial_error(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        """A retried trial is placed in a bracket afresh by the ``on_trial_add`` that follows (the next
        one round-robin, or a new draw), as Ray 2.60 redraws it; what it recorded in its old bracket's
        rungs stays there, as in Ray (recorded: ``tests/test_sched_asha.py``)."""
        self._trial_bracket.pop(trial.trial_id, None)

    def on_trial_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        tid = trial.trial_id
        if self.skip_missing and self._missing(result):
            return Decision.CONTINUE  # Ray's check comes first, before the stopped set
        if tid in self._stopped:
            self._num_stopped += 1
            return Decision.STOP
        t = self._time(result, self.time_attr)
        score = self._score(result, keep_nan=True)
        if self.stop_last_trials and t >= self.max_t:
            decision = Decision.STOP  # before the rungs: the value at max_t is recorded on completion
        else:
            decision = self._judge(tid, t, score)
        if decision is Decision.STOP:
            self._stopped.add(tid)
            self._num_stopped += 1
        return decision

    def _judge(self, tid: str, t: float, score: float) -> Decision:
        """Judge ``score`` at the highest rung ``tid`` has reached and not yet recorded, then record it.

        A rung already recorded is skipped, so a trial whose time_attr jumped over rungs is
        judged at the lower ones on its following results (Ray Tune's order); with
        ``stop_last_trials=False`` a recorded rung ends the search instead.
        """
        for milestone, recorded in reversed(self._rungs[self._assign(tid)]):
            if t >= milestone and tid in recorded and not self.stop_last_trials:
                break
            if t < milestone or tid in recorded:
                continue
            decision = Decision.CONTINUE
            if recorded:
                cutoff = self._cutoff(recorded)
                if cutoff is not None and score < cutoff:
                    decision = Decision.STOP
            recorded[tid] = score
            return decision
        return Decision.CONTINUE

    def horizon_attr(self) -> str | None:
        return self.time_attr

    def decision_horizon(self, trial: TrialSnapshot) -> float | None:
        """The lowest rung ``trial`` has not recorded (a rung it jumped over is judged on a following
        result), or ``max_t``: nothing else ever stops a trial."""
        tid = trial.trial_id
        if tid in self._stopped:
            return None
        unrecorded = [m for m, recorded in self._rungs[self._assign(tid)] if tid not in recorded]
        if self.stop_last_trials:
            unrecorded.append(self.max_t)
        return float(min(unrecorded)) if unrecorded else math.inf

    def on_trial_complete(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> None:
        """Record the final result at its rung, as Ray Tune does (it raises later cutoffs)."""
        metric, _ = self._objective()
        if self.time_attr in result and metric in result:  # (Ray's rule, whatever skip_missing says)
            self._judge(trial.trial_id, self._time(result, self.time_attr), self._score(result, keep_nan=True))

    def debug_string(self) -> str:
        """Ray's: the STOPs decided, then per bracket each rung's milestone and current cutoff (the
        score to beat, higher is better: negated for ``mode="min"``), highest rung first."""
        lines = [f"Using AsyncHyperBand: num_stopped={self._num_stopped}"]
        for rungs in self._rungs:
            lines.append("Bracket: " + " | ".join(f"Iter {m:.3f}: {self._cutoff(recorded)}"
                                                  for m, recorded in reversed(rungs)))
        return "\n".join(lines)

    def _cutoff(self, recorded: dict[str, float]) -> float | None:
        if not recorded:
            return None
        return nanpercentile(list(recorded.values()), (1 - 1 / self.reduction_factor) * 100)

    def restore(self, state: dict[str, Any]) -> None:
        inner = state.get("state") if isinstance(state, dict) else None
        if isinstance(inner, dict) and "_num_stopped" not in inner and "_stopped" in inner:
            # saved before the count was kept (2026-12-05): each stopped trial was stopped once
            state = {**state, "state": {**inner, "_num_stopped": len(inner["_stopped"])}}
        super().restore(state)


# Ray's other name for the class, as Ray's: ``type(ASHAScheduler(...)).__name__`` is "AsyncHyperBandScheduler"
# (a scheduler pickled under the name ASHAScheduler, before 2026-12-05, still loads through it)
ASHAScheduler = AsyncHyperBandScheduler

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler"]
