"""Synchronous HyperBand: successive halving in brackets of fixed size.

Bracket ``s`` (``s = s_max, ..., 0`` with ``s_max = floor(log_rf(max_t))``, the
most aggressive bracket first, then the cycle repeats) holds
``ceil((s_max + 1) * rf**s / (s + 1))`` trials, whose first milestone is
``max_t / rf**s``.  A trial that reaches its bracket's milestone is paused
there (with a checkpoint).  When every live trial of the bracket waits at the
milestone, the best ``max(1, n // rf)`` of the ``n`` waiting trials are resumed
towards the next milestone (``rf`` times further) and the rest are stopped; at
``max_t`` trials are stopped if ``stop_last_trials``.

No bracket can wait forever: trials that end early leave their bracket (and
may complete the wait), and a bracket that is not full is closed and halved as
soon as the engine asks for a trial to run and nothing else is runnable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from actors._reducer import Decision
from actors._trial import TrialSnapshot, TrialStatus
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import MetricScheduler, check_number


@dataclass
class _Bracket:
    """One bracket: who is in it, which milestone it is at, who already waits there."""

    s: int
    capacity: int
    milestones: list[float]
    rung: int = 0
    trials: list[str] = field(default_factory=list)  # every trial ever assigned, in add order
    live: list[str] = field(default_factory=list)  # still competing (not ended, not cut)
    waiting: dict[str, float] = field(default_factory=dict)  # paused at the milestone -> score
    closed: bool = False  # takes no new trials (full, or halved before it filled)

    @property
    def milestone(self) -> float:
        """The milestone the bracket's live trials are heading for."""
        return self.milestones[min(self.rung, len(self.milestones) - 1)]

    def ready(self) -> bool:
        """Every live trial waits at the milestone (and there is at least one)."""
        return bool(self.live) and all(t in self.waiting for t in self.live)


class HyperBandScheduler(MetricScheduler):
    """Synchronous HyperBand with pause-at-milestone and promote-or-stop.

    Args:
        time_attr: monotonically increasing result key that measures progress.
        metric, mode: objective; may be left ``None`` and taken from ``TuneConfig``.
        max_t: the largest budget a trial gets (last milestone of every bracket).
        reduction_factor: an integer >= 2; each halving keeps ``1/reduction_factor``.
        stop_last_trials: stop trials at ``max_t`` (else they run until they end).
    """

    _PARAMS: ClassVar[tuple[str, ...]] = ("time_attr", "max_t", "reduction_factor", "stop_last_trials")
    _STATE: ClassVar[tuple[str, ...]] = ("_brackets", "_trial_bracket", "_next_s", "_promoted", "_stopped")

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(metric, mode)
        name = type(self).__name__
        if not isinstance(time_attr, str) or not time_attr:
            raise ValueError(f"{name}: time_attr must be a non-empty result key, got {time_attr!r}")
        self.time_attr = time_attr
        self.max_t = check_number(name, "max_t", max_t, minimum=0, strict=True)
        self.reduction_factor = check_number(
            name, "reduction_factor", reduction_factor, minimum=2, integer=True
        )
        self.stop_last_trials = bool(stop_last_trials)
        s_max = 0
        while self.reduction_factor ** (s_max + 1) <= self.max_t:
            s_max += 1
        self.s_max = s_max
        self._brackets: list[_Bracket] = []
        self._trial_bracket: dict[str, int] = {}
        self._next_s = s_max
        self._promoted: set[str] = set()  # resumed after a halving, not yet reporting again
        self._stopped: set[str] = set()  # cut at a milestone or stopped at max_t

    # ------------------------------------------------------------------ bracket shapes

    def bracket_capacity(self, s: int) -> int:
        """Trials in bracket ``s``: ``ceil((s_max + 1) * rf**s / (s + 1))``."""
        return -(-(self.s_max + 1) * self.reduction_factor**s // (s + 1))

    def bracket_milestones(self, s: int) -> list[float]:
        """Milestones of bracket ``s``: ``max_t / rf**(s - i)`` for ``i = 0..s`` (whole numbers
        when ``max_t`` is an int)."""
        if isinstance(self.max_t, int):
            return [max(1, self.max_t // self.reduction_factor ** (s - i)) for i in range(s + 1)]
        return [self.max_t / self.reduction_factor ** (s - i) for i in range(s + 1)]

    def band(self) -> list[tuple[int, list[float]]]:
        """``(capacity, milestones)`` of each bracket of one band, in the order they are filled."""
        return [(self.bracket_capacity(s), self.bracket_milestones(s)) for s in range(self.s_max, -1, -1)]

    def bracket_info(self) -> list[dict[str, Any]]:
        """A read-only summary of every bracket created so far (for progress output and tests)."""
        return [
            {
                "s": b.s, "capacity": b.capacity, "milestone": b.milestone,
                "rung": b.rung, "trials": list(b.trials), "live": list(b.live), "waiting": dict(b.waiting),
                "closed": b.closed,
            }
            for b in self._brackets
        ]

    # ------------------------------------------------------------------ hooks

    def _assign(self, trial_id: str) -> _Bracket:
        if trial_id in self._trial_bracket:
            return self._brackets[self._trial_bracket[trial_id]]
        cur = self._brackets[-1] if self._brackets else None
        if cur is None or cur.closed:
            s = self._next_s
            self._next_s = s - 1 if s > 0 else self.s_max
            cur = _Bracket(s, self.bracket_capacity(s), self.bracket_milestones(s))
            self._brackets.append(cur)
        cur.trials.append(trial_id)
        cur.live.append(trial_id)
        if len(cur.trials) >= cur.capacity:
            cur.closed = True
        self._trial_bracket[trial_id] = len(self._brackets) - 1
        return cur

    def on_trial_add(self, controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._assign(trial.trial_id)

    def on_trial_result(
        self, controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        tid = trial.trial_id
        if tid in self._stopped:
            return Decision.STOP
        b = self._assign(tid)
        t = self._time(result, self.time_attr)
        score = self._score(result)
        if tid in b.waiting:
            return Decision.PAUSE  # a result that raced its pause: keep it parked
        self._promoted.discard(tid)
        if tid not in b.live:
            return Decision.CONTINUE  # past the last milestone with stop_last_trials=False
        if t < b.milestone:
            return Decision.CONTINUE
        if b.rung == len(b.milestones) - 1:
            b.live.remove(tid)
            if self.stop_last_trials:
                self._stopped.add(tid)
                return Decision.STOP
            return Decision.CONTINUE
        if result.get("done"):
            # It ends on its own now, so it cannot be promoted; let the others go on without it.
            self._leave(controller, tid)
            return Decision.CONTINUE
        b.waiting[tid] = score
        if b.closed and b.ready():
            winners = self._halve(controller, b, exempt=tid)
            return Decision.CONTINUE if tid in winners else Decision.STOP
        return Decision.PAUSE

    def _leave(self, controller: SchedulerController, tid: str) -> None:
        """``tid`` ended: drop it from its bracket and halve the bracket if it was the last one awaited."""
        self._promoted.discard(tid)
        idx = self._trial_bracket.get(tid)
        if idx is None:
            return
        b = self._brackets[idx]
        if tid in b.live:
            b.live.remove(tid)
        b.waiting.pop(tid, None)
        if b.closed and b.ready():
            self._halve(controller, b, exempt=None)

    def on_trial_complete(
        self, controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> None:
        self._leave(controller, trial.trial_id)

    def on_trial_error(self, controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._leave(controller, trial.trial_id)

    def on_trial_remove(self, controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._leave(controller, trial.trial_id)

    def _halve(
        self, controller: SchedulerController, b: _Bracket, exempt: str | None, hold_first: bool = False
    ) -> list[str]:
        """Promote the best waiting trials of ``b`` and stop the others.

        ``exempt`` (the trial whose hook is running) gets no controller call: the
        caller turns the outcome into its return value.  With ``hold_first`` the
        best paused winner is not resumed either, because the caller will choose it.
        """
        ranked = sorted(b.waiting, key=lambda t: -b.waiting[t])  # stable: ties keep arrival order
        keep = max(1, len(ranked) // self.reduction_factor)
        winners, losers = ranked[:keep], ranked[keep:]
        b.rung += 1
        b.waiting = {}
        b.closed = True
        b.live = [t for t in b.live if t in winners]
        snaps = {t.trial_id: t for t in controller.get_trials()}
        held = False
        for tid in winners:
            self._promoted.add(tid)
            if tid == exempt:
                continue
            snap = snaps.get(tid) or TrialSnapshot(tid, {}, TrialStatus.PAUSED)
            if hold_first and not held and snap.status is TrialStatus.PAUSED:
                held = True
                continue
            controller.resume_trial(snap)
        for tid in losers:
            self._stopped.add(tid)
            if tid != exempt:
                controller.stop_trial(snaps.get(tid) or TrialSnapshot(tid, {}, TrialStatus.PAUSED))
        return winners

    def _parked(self, tid: str) -> bool:
        idx = self._trial_bracket.get(tid)
        return idx is not None and tid in self._brackets[idx].waiting

    def choose_trial_to_run(self, controller: SchedulerController) -> TrialSnapshot | None:
        """Pending trials first, then promoted paused ones, then any other paused trial
        that is not parked at a milestone; failing all that, halve a bracket that is not
        full but has every live trial parked, and run its best trial."""
        trials = [t for t in controller.get_trials() if t.trial_id not in self._stopped]
        for t in trials:
            if t.status is TrialStatus.PENDING:
                return t
        paused = [t for t in trials if t.status is TrialStatus.PAUSED]
        for t in paused:
            if t.trial_id in self._promoted:
                return t
        for t in paused:
            if not self._parked(t.trial_id):
                return t
        for b in self._brackets:
            if b.ready():
                winners = self._halve(controller, b, exempt=None, hold_first=True)
                by_id = {t.trial_id: t for t in paused}
                for tid in winners:
                    if tid in by_id:
                        return by_id[tid]
                return None
        return None

    def debug_string(self) -> str:
        rows = [
            f"s={b.s} n={len(b.trials)}/{b.capacity} milestone={b.milestone} "
            f"live={len(b.live)} waiting={len(b.waiting)}"
            for b in self._brackets
        ]
        return f"{type(self).__name__}: " + "; ".join(rows)


__all__ = ["HyperBandScheduler"]
