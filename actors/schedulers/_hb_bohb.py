"""HyperBand for BOHB, decision for decision as Ray Tune 2.60's ``HyperBandForBOHB``.

Ray's HyperBand with three changes: a band fills its largest bracket first (``s = s_max`` down to 0); a
trial at its milestone pauses unless its bracket is full and every other live trial of it is paused, so
that ``TuneBOHB`` may start new trials meanwhile; and when nothing runs, ``choose_trial_to_run`` halves
a bracket whose trials all wait. Each result it decides on carries ``hyperband_info`` to the search
algorithm (``{"budget": milestone}`` at a milestone, which is how ``TuneBOHB`` learns its budgets), and it
tells the search algorithm of each pause and resume (``on_pause``/``on_unpause``, through
``tune_controller.search_alg.searcher`` as Ray's does, so it needs ``TuneBOHB``).
"""

from __future__ import annotations

from typing import Any

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.schedulers._base import SchedulerController
from actors.schedulers._common import Mode
from actors.schedulers._hyperband import HyperBandScheduler


class HyperBandForBOHB(HyperBandScheduler):
    """HyperBand without pipelining, for ``TuneBOHB`` (Ray's arguments: see :class:`HyperBandScheduler`)."""

    def horizon_attr(self) -> str | None:
        """None: every result waits for this hook, which hands the search algorithm each result's
        ``hyperband_info`` before it hears of the result (TuneBOHB warns of a result without it)."""
        return None

    def _next_s(self, brackets: int) -> int:
        return self.s_max - brackets  # the largest bracket first

    def _unpause_trial(self, tune_controller: SchedulerController, tid: str) -> None:
        tune_controller.search_alg.searcher.on_unpause(tid)

    def _on_result(self, tune_controller: SchedulerController, trial: TrialSnapshot,
                   result: dict[str, Any]) -> Decision:
        info: dict[str, Any] = {}
        result["hyperband_info"] = info  # (the search algorithm is handed this dict, as in Ray)
        tid = trial.trial_id
        if tid in self._stopped:
            return Decision.STOP
        b = self._trial_bracket.get(tid)
        if b is None or tid not in b.live:
            return Decision.CONTINUE  # it left its bracket (a result that raced its end)
        score = self._score(result, keep_nan=True)
        b.update(tid, self._time(result, self.time_attr), score if self._objective()[1] is Mode.MAX else -score)
        if b.continue_trial(tid):
            return Decision.CONTINUE
        info["budget"] = b.r
        status = {s.trial_id: s.status for s in tune_controller.get_trials()}
        if not b.filled() or any(status.get(t) is not TrialStatus.PAUSED for t in b.live if t != tid):
            tune_controller.search_alg.searcher.on_pause(tid)
            return Decision.PAUSE
        action = self._process(tune_controller, b, current=tid)
        if action is Decision.PAUSE:
            tune_controller.search_alg.searcher.on_pause(tid)
        return action

    def choose_trial_to_run(self, tune_controller: SchedulerController) -> TrialSnapshot | None:
        """Band by band, bracket by bracket in their order: a pending trial or a promoted paused one; when
        nothing runs, a bracket whose live trials all wait is halved first (Ray's)."""
        snaps = self._current_snapshots(tune_controller)
        pick = self._pick(snaps)
        if pick is not None or any(s.status is TrialStatus.RUNNING for s in snaps.values()):
            return pick
        for band in self._bands:
            for b in band:
                if b is None or not any(snaps[t].status is TrialStatus.PAUSED for t in b.live if t in snaps):
                    continue
                self._process(tune_controller, b, current=None)
                if any(self._runnable(b, t, snaps) for t in b.live if t in snaps):
                    return self._pick(snaps)
        return None

    def _pick(self, snaps: dict[str, TrialSnapshot]) -> TrialSnapshot | None:
        for band in self._bands:
            for b in band:
                if b is None:
                    continue
                for tid in b.live:
                    if tid in snaps and self._runnable(b, tid, snaps):
                        return snaps[tid]
        return None


__all__ = ["HyperBandForBOHB"]
