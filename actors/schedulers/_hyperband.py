"""Synchronous HyperBand, decision for decision as Ray Tune 2.60's ``HyperBandScheduler``.

A band holds ``s_max + 1`` brackets (``s_max + 1 = round(log_rf(max_t)) + 1``), filled in
the order ``s = 0, 1, ..., s_max``; bracket ``s`` takes ``ceil((s_max + 1) / (s + 1) * rf**s)``
trials and first judges them at ``r = int(max_t * rf**-s)`` (a bracket whose ``r`` would be
0 is skipped).  A trial whose ``time_attr`` reaches the bracket's milestone is paused until
every live trial of the bracket has reached it; then the bracket keeps the best
``ceil(n / rf)`` (``n`` is the bracket's size, not its live count), stops the others and
multiplies the milestone by ``rf`` (at most ``max_t``).  The best ones that are paused are
run again by ``choose_trial_to_run``, which serves the least complete bracket first.  Once
no halving is left, trials are stopped at the milestone (``stop_last_trials``).  A trial
that ends early leaves its bracket, which may complete the wait.

``tests/test_ray_scheduler_fidelity.py`` replays Ray's recorded decisions against this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import MetricScheduler, Mode, check_number

# a trial's status once the engine applied the decision on its result (as Ray's Trial shows it)
_APPLIED = {Decision.STOP: TrialStatus.TERMINATED, Decision.PAUSE: TrialStatus.PAUSED}


@dataclass
class _Bracket:
    """Ray's ``_Bracket`` bookkeeping: live trials with their last (time, value), the milestone."""

    s: int
    n: int  # the bracket's size (shrinks by rf at each halving)
    r: float
    max_t: float
    rf: int
    stop_last_trials: bool
    total_work: int
    halves: int = 0
    live: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # in add order
    trials: list[str] = field(default_factory=list)  # every trial ever added
    progress: float = 0.0
    being_processed: bool = False
    to_unpause: set[str] = field(default_factory=set)

    @property
    def milestone(self) -> float:
        return self.r

    def _time(self, tid: str) -> float:
        point = self.live[tid]
        return 0 if point is None else point[0]

    def filled(self) -> bool:
        return len(self.live) == self.n

    def cur_iter_done(self) -> bool:
        return all(self._time(t) >= self.r for t in self.live)

    def finished(self) -> bool:
        return self.stop_last_trials and self.halves == 0 and self.cur_iter_done()

    def continue_trial(self, tid: str) -> bool:
        if not self.stop_last_trials and self.halves == 0:
            return True
        return self._time(tid) < self.r

    def update(self, tid: str, t: float, value: float) -> None:
        last = self.live[tid]
        self.progress += t - (0 if last is None else last[0])
        self.live[tid] = (t, value)
        self.to_unpause.discard(tid)

    def halve(self, sign: float) -> tuple[list[str], list[str]]:
        """(good, bad): the best ``ceil(n / rf)`` by ``sign * value`` and the rest."""
        if self.halves == 0 and not self.stop_last_trials:
            return list(self.live), []
        self.halves -= 1
        self.n = math.ceil(self.n / self.rf)
        self.r = int(min(self.r * self.rf, self.max_t))
        ranked = sorted(self.live, key=lambda t: sign * self.live[t][1])  # type: ignore[index]
        return ranked[-self.n:], ranked[:-self.n]

    def completion(self) -> float:
        if self.finished():
            return 1.0
        return min(self.progress / self.total_work, 1.0)


class HyperBandScheduler(MetricScheduler):
    """Synchronous HyperBand: pause at the bracket's milestone, keep the best ``1/rf``, stop the rest.

    Args:
        time_attr: monotonically increasing result key that measures progress.
        metric, mode: objective; may be left ``None`` and taken from ``TuneConfig``.
        max_t: the largest budget a trial gets (last milestone of every bracket).
        reduction_factor: a number > 1; each halving keeps ``1/reduction_factor``.
        stop_last_trials: stop trials at ``max_t`` (else they run until they end).
    """

    _leaves_results = True  # its on_trial_result never changes the result (SchedulerHost.watch_results)

    _PARAMS: ClassVar[tuple[str, ...]] = ("time_attr", "max_t", "reduction_factor", "stop_last_trials")
    _STATE: ClassVar[tuple[str, ...]] = ("_bands", "_current", "_trial_bracket", "_stopped", "_gone", "_num_stopped",
                                         "_status")
    # (kept since 2026-12-05, for debug_string: an older state starts them anew)
    _STATE_DEFAULTS: ClassVar[dict[str, Any]] = {"_num_stopped": 0, "_status": {}}

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
        # any factor above 1, as in Ray (2.5 halves to ceil(n / 2.5) with milestones int(r * 2.5))
        self.reduction_factor = check_number(name, "reduction_factor", reduction_factor, minimum=1, strict=True)
        self.stop_last_trials = bool(stop_last_trials)
        self.s_max = round(math.log(self.max_t) / math.log(self.reduction_factor))
        self._bands: list[list[_Bracket | None]] = [[]]
        self._current: _Bracket | None = None
        self._trial_bracket: dict[str, _Bracket] = {}
        self._stopped: set[str] = set()  # stopped by this scheduler: later results get STOP
        self._gone: set[str] = set()  # already left their bracket when this scheduler stopped them
        self._num_stopped = 0  # trials a halving stopped (Ray's count)
        self._status: dict[str, TrialStatus] = {}  # each trial's status as last seen, for debug_string

    # ------------------------------------------------------------------ bracket shapes

    def bracket_capacity(self, s: int) -> int:
        """Trials in bracket ``s``: ``ceil((s_max + 1) / (s + 1) * rf**s)``."""
        return math.ceil((self.s_max + 1) / (s + 1) * self.reduction_factor**s)

    def bracket_start(self, s: int) -> int:
        """The first milestone of bracket ``s``: ``int(max_t * rf**-s)`` (0: the bracket is skipped)."""
        return int(self.max_t * self.reduction_factor ** (-s))

    def band(self) -> list[tuple[int, int]]:
        """``(capacity, first milestone)`` of each bracket of one band, in the order they are filled."""
        return [(self.bracket_capacity(s), self.bracket_start(s)) for s in range(self.s_max + 1)]

    def _total_work(self, n: float, r: float, s: int) -> int:
        work, cumulative = 0, r
        for _ in range(s + 1):
            work += int(n) * int(r)
            n = math.ceil(n / self.reduction_factor)
            r = int(min(r * self.reduction_factor, self.max_t - cumulative))
        return work

    def bracket_info(self) -> list[dict[str, Any]]:
        """A read-only summary of every bracket created so far (for progress output and tests)."""
        return [
            {"s": b.s, "size": b.n, "milestone": b.r, "trials": list(b.trials), "live": list(b.live),
             "to_unpause": sorted(b.to_unpause)}
            for band in self._bands for b in band if b is not None
        ]

    # ------------------------------------------------------------------ hooks

    def on_trial_add(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._objective()
        self._status[trial.trial_id] = trial.status
        known = self._trial_bracket.get(trial.trial_id)
        # added again after a restore: it keeps its bracket. A retried trial was taken out of its bracket
        # by on_trial_error (not stopped by this scheduler) and joins the bracket being filled, as Ray's
        # on_trial_add puts it
        if known is not None and (trial.trial_id in known.live or trial.trial_id in self._stopped):
            if trial.trial_id in self._stopped and not trial.status.is_finished:
                # stopped by a decision the saved table never applied (the experiment was aborted
                # while it was on its way): choose_trial_to_run would never pick it, so end it now
                tune_controller.stop_trial(trial)
            return
        cur = self._current
        if cur is None or cur.filled():
            while True:
                band = self._bands[-1]
                if len(band) == self.s_max + 1:
                    band = []
                    self._bands.append(band)
                s = self._next_s(len(band))
                r0 = self.bracket_start(s)
                cur = None if r0 == 0 else _Bracket(
                    s, self.bracket_capacity(s), r0, self.max_t, self.reduction_factor, self.stop_last_trials,
                    self._total_work(self.bracket_capacity(s), r0, s), halves=s)
                band.append(cur)
                if cur is not None:
                    break
            self._current = cur
        cur.live[trial.trial_id] = None
        cur.trials.append(trial.trial_id)
        self._trial_bracket[trial.trial_id] = cur

    def _next_s(self, brackets: int) -> int:
        """The ``s`` of a band's next bracket, after ``brackets`` of them: the smallest first."""
        return brackets

    def _unpause_trial(self, tune_controller: SchedulerController, tid: str) -> None:
        """A halving promoted ``tid``, paused (or pausing): Ray's hook, which does nothing here."""

    def on_trial_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        decision = self._on_result(tune_controller, trial, result)
        # as Ray's Trial objects will show it once the decision is applied (debug_string)
        self._status[trial.trial_id] = _APPLIED.get(decision, trial.status)
        return decision

    def _on_result(self, tune_controller: SchedulerController, trial: TrialSnapshot,
                   result: dict[str, Any]) -> Decision:
        tid = trial.trial_id
        if tid in self._stopped:
            return Decision.STOP
        t = self._time(result, self.time_attr)
        score = self._score(result, keep_nan=True)
        b = self._trial_bracket.get(tid)
        if b is None or tid not in b.live:
            return Decision.CONTINUE  # it left its bracket (a result that raced its end)
        b.update(tid, t, score if self._objective()[1] is Mode.MAX else -score)
        if b.continue_trial(tid):
            return Decision.CONTINUE
        return self._process(tune_controller, b, current=tid)

    def horizon_attr(self) -> str | None:
        return self.time_attr

    def decision_horizon(self, trial: TrialSnapshot) -> float | None:
        """The milestone of the trial's bracket: below it ``continue_trial`` holds (a halving only
        raises it); a trial without a bracket or stopped is decided at every result."""
        tid = trial.trial_id
        b = self._trial_bracket.get(tid)
        if tid in self._stopped or b is None or tid not in b.live:
            return None
        if not b.stop_last_trials and b.halves == 0:
            return math.inf
        return float(b.r)

    def _process(self, tune_controller: SchedulerController, b: _Bracket, current: str | None) -> Decision:
        """Ray's ``_process_bracket``: halve ``b`` once every live trial waits at its milestone.

        ``current`` (the trial whose hook runs) is decided by the return value; every other
        trial is stopped through the controller, or marked to be run again by
        ``choose_trial_to_run`` (Ray resumes the paused winners that way, not by a resume call).
        """
        action = Decision.PAUSE
        if not b.cur_iter_done():
            return action
        if b.finished():
            for tid in list(b.live):
                if tid != current:
                    self._stop_other(tune_controller, b, tid)
            if current is not None:
                self._stopped.add(current)
            return Decision.STOP
        b.being_processed = True
        sign = 1.0 if self._objective()[1] is Mode.MAX else -1.0
        good, bad = b.halve(sign)
        self._num_stopped += len(bad)

        def stop(tid: str) -> bool:
            """Stop ``tid``; True when it is the trial whose result is being decided."""
            if tid != current:
                self._stop_other(tune_controller, b, tid)
                return False
            b.live.pop(tid, None)
            self._stopped.add(tid)
            return True

        for tid in bad:
            if stop(tid):
                action = Decision.STOP
        status = {s.trial_id: s.status for s in tune_controller.get_trials()}
        for tid in good:
            if b.continue_trial(tid):
                if tid == current:
                    action = Decision.CONTINUE
                elif status.get(tid) is not TrialStatus.PENDING:
                    self._unpause_trial(tune_controller, tid)
                    b.to_unpause.add(tid)
            elif b.finished() and b.stop_last_trials and stop(tid):
                action = Decision.STOP
        stuck = bool(b.live) and b.cur_iter_done() and not any(b.continue_trial(t) for t in b.live)
        if action is Decision.PAUSE and (current is None or current in good) and stuck:
            # every live trial is already past the new milestone (a retried trial resumed from a later
            # checkpoint, placed in a new bracket as Ray places it), also when the halving came from a
            # trial leaving (``current`` None): halve again now. Ray leaves it paused with nothing to
            # resume it, and waits forever
            return self._process(tune_controller, b, current)
        return action

    def _stop_other(self, tune_controller: SchedulerController, b: _Bracket, tid: str) -> None:
        """Stop a paused (or pausing) trial; it leaves the bracket now, as Ray's nested
        ``on_trial_remove`` makes it do before the halving goes on."""
        b.live.pop(tid, None)
        self._stopped.add(tid)
        self._gone.add(tid)
        self._status[tid] = TrialStatus.TERMINATED
        snap = next((s for s in tune_controller.get_trials() if s.trial_id == tid), None)
        tune_controller.stop_trial(snap or TrialSnapshot(tid, {}, TrialStatus.PAUSED))

    def on_trial_remove(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        tid = trial.trial_id
        self._status[tid] = trial.status
        if tid in self._gone:
            return  # left its bracket when this scheduler stopped it
        b = self._trial_bracket.get(tid)
        if b is None:
            return
        b.live.pop(tid, None)
        # Ray processes the bracket here only while it is unfinished and before its first halving
        # (is_being_processed). Otherwise a trial leaving (a retry moves it to a new bracket) can leave
        # the others paused at the milestone with nothing to halve or stop them: Ray waits forever.
        # Processing also when every live trial waits decides only that case
        waiting = bool(b.live) and b.cur_iter_done()
        if waiting or (not b.finished() and not b.being_processed):
            self._process(tune_controller, b, current=None)

    def on_trial_complete(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> None:
        self.on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        self.on_trial_remove(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller: SchedulerController) -> TrialSnapshot | None:
        """Band by band, the least complete bracket first: a pending trial, or a paused one
        that a halving promoted (or that is not parked at a milestone)."""
        snaps = self._current_snapshots(tune_controller)
        for band in self._bands:
            for b in sorted((b for b in band if b is not None), key=_Bracket.completion):
                for tid in b.live:
                    if tid in snaps and self._runnable(b, tid, snaps):
                        return snaps[tid]
        return None

    def _runnable(self, b: _Bracket, tid: str, snaps: dict[str, TrialSnapshot]) -> bool:
        """Pending, or paused and promoted by a halving. A paused trial short of its milestone (paused by the
        engine, e.g. running when the driver died and restored paused) is never parked: Ray has no such trial."""
        status = snaps[tid].status
        return status is TrialStatus.PENDING or (status is TrialStatus.PAUSED and (
            tid in b.to_unpause or b.continue_trial(tid)))

    def _current_snapshots(self, tune_controller: SchedulerController) -> dict[str, TrialSnapshot]:
        """Every trial's snapshot by id, after taking out of its bracket a trial that ended while this
        scheduler's hook for it failed (the run aborted, then was restored from a state saved without that
        end): it would hold its bracket's halving forever."""
        snaps = {s.trial_id: s for s in tune_controller.get_trials()}
        self._status.update((tid, snap.status) for tid, snap in snaps.items())
        ended = [snaps[t] for band in self._bands for b in band if b is not None for t in b.live
                 if t in snaps and snaps[t].status.is_finished]
        for gone in ended:
            self.on_trial_remove(tune_controller, gone)
        return snaps

    def debug_string(self) -> str:
        """Ray's: the trials halvings stopped, then each round's brackets: size, milestone, progress and
        how many of the trials ever in it are in each status (as last seen: this scheduler sees trials
        only in its hooks)."""
        lines = [f"Using HyperBand: num_stopped={self._num_stopped} "
                 f"total_brackets={sum(len(band) for band in self._bands)}"]
        for i, band in enumerate(self._bands):
            lines.append(f"Round #{i}:")
            for b in band:
                if b is None:
                    continue
                counts: dict[str, int] = {}
                for tid in b.trials:
                    status = str(self._status.get(tid, TrialStatus.PENDING))
                    counts[status] = counts.get(status, 0) + 1
                statuses = ", ".join(sorted(f"{k}: {v}" for k, v in counts.items()))
                lines.append(f"  Bracket(Max Size (n)={b.n}, Milestone (r)={b.r}, "
                             f"completed={b.completion():.1%}): {{{statuses}}} ")
        return "\n".join(lines)


__all__ = ["HyperBandScheduler"]
