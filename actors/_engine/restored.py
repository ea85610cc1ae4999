"""Settling a restored experiment (``Tuner.restore``) once the scheduler is ready: telling the restored
searcher and scheduler what the restore did, which their saved state never saw.

It runs once per experiment, between the scheduler's ``SchedulerReady`` and the first trial started, and
reads what the store's restore noted (``ExperimentStore.take_restored``). Separate from the core because it
is its own story (a trial the restore ended, the rows a trial committed after the saved state); it reaches
the core (hooks, the searcher, ending trials) only through ``CoreOps``.
"""

from __future__ import annotations

from actors._engine.lifecycle import TrialTable
from actors._engine.port import CoreOps
from actors._engine.spec import ExperimentSpec
from actors._engine.trial import TrialStatus
from actors._engine.verdicts import judge
from actors.messages import HookKind


class RestoreSettling:
    """What the restore did, told to the searcher and the scheduler restored with the experiment."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, ops: CoreOps) -> None:
        self.spec = spec
        self.table = table
        self.ops = ops

    def settle(self) -> None:
        """Tell the restored searcher and scheduler what the restore did. A trial it ended
        (``resume_unfinished=False``) completes, or their saved state waits for it (a generator's
        ``max_concurrent``, a HyperBand bracket). A trial resuming from a checkpoint committed after
        the saved state: the stop criteria and the searcher see the rows that state never saw, as
        they did in the run that wrote them; a trial stopped at one of them (or that said done) ends
        there instead of running past its end. The scheduler first hears of its next result."""
        notes = self.ops.io.take_restored()
        for trial_id in notes.ended:
            last = dict(self.table.get(trial_id).last_result)
            self.ops.call(HookKind.COMPLETE, trial_id, (last,))
            if self.spec.searcher is not None and not self.ops.searcher("on_trial_complete", trial_id, last, False):
                return
        for trial_id, rows in notes.unseen.items():
            found = self.table.trials.get(trial_id)
            if found is None or found.status is not TrialStatus.PENDING or self.ops.finished:
                continue
            rec = found
            verdict = judge(self.spec, trial_id, tuple(rows))
            if verdict.problem is not None:
                self.ops.abort(verdict.problem)
                return
            ends = verdict.asked if verdict.asked < len(rows) else None  # the first hit or done row
            for r in rows[:verdict.asked]:
                if self.spec.searcher is not None and not self.ops.searcher("on_trial_result", trial_id, r):
                    return
            if ends is not None:
                self.ops.io.end_restored(rec)
                self.ops.run(self.table.end_restored(trial_id,
                                                     stopped=verdict.hits[ends] and not rows[ends].get("done")))
                self.ops.io.dirty = True
                if self.spec.searcher is not None and not self.ops.searcher(
                        "on_trial_complete", trial_id, dict(rec.last_result), False):
                    return
            if verdict.stop_all:
                self.ops.run(self.ops.stop_every_trial())


__all__ = ["RestoreSettling"]
