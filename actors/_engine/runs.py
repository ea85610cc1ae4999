"""How a trial's run ends: its end noted in the table, its unlogged batches logged, a failure recorded and
retried (the scheduler hears ``on_trial_error`` then ``on_trial_add``, as Ray Tune's ``_requeue_trial``),
what a failed or lost run committed but never sent recovered, and the searcher told of a finished trial.

Whatever ended it (its own ``TrialEnded``, its actor or process gone, a kill, its member lost), the same
``ended`` runs, so the order of hooks and events is the same for all. Separate from the core because it is
the trial's story, not the experiment's: the phase changes it can lead to (a state snapshot due,
``fail_fast`` draining or aborting) it asks of the core through ``CoreOps``.
"""

from __future__ import annotations

from actors._engine.clones import CloneWaits
from actors._engine.cluster import RunLost
from actors._engine.halt import Halts
from actors._engine.lifecycle import TrialRecord, TrialTable
from actors._engine.pool import ActorPool
from actors._engine.port import CoreOps, ExperimentPhase
from actors._engine.results import ResultPath
from actors._engine.spec import ExperimentSpec
from actors._engine.trial import TrialStatus
from actors.messages import CheckpointRef, EndReason, EventType, HookKind


class TrialRuns:
    """The end of a trial's run, whatever ended it."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, pool: ActorPool, halts: Halts,
                 clone_waits: CloneWaits, results: ResultPath, ops: CoreOps) -> None:
        self.spec = spec
        self.table = table
        self.pool = pool
        self.halts = halts
        self.clone_waits = clone_waits
        self.results = results
        self.ops = ops

    def ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: CheckpointRef | None = None,
              error: str | None = None, tb: str | None = None) -> None:
        rec = self.table.trials.get(trial_id)
        if rec is None:
            return
        self.results.log_unlogged(trial_id)
        self.results.forget(trial_id)
        known = rec.checkpoint.path if rec.checkpoint is not None else None
        effects = self.table.ended(trial_id, run_id, reason, ckpt, error, tb)
        if effects:
            self.pool.close_inbox(trial_id)  # this run is over: no more messages are expected from it
            self.results.drop_held(trial_id)
            if ckpt is not None and ckpt.path != known:  # saved at the end: the next run must not reuse its index
                self.results.checkpointed(rec, ckpt)
        if effects and reason is EndReason.FAILED:
            self.ops.io.on_error(rec, error or "", tb or "")
            self._recover(rec)
            if rec.status is not TrialStatus.ERROR:  # retried: before its next run starts, as Ray tells it
                self._requeue(rec)
                self.ops.event(EventType.RECOVER, rec)
        if effects:
            # a clone source's end: the clones waiting for its save take its checkpoint
            self.clone_waits.landed(trial_id, ckpt if ckpt is not None else rec.checkpoint)
        self.ops.run(effects)
        if effects:  # paused, finished, failed or retried: write it down soon, not only every state_interval_s
            self.ops.io.dirty = True
            if self.ops.phase in (ExperimentPhase.RUNNING, ExperimentPhase.DRAINING) and self.ops.io.state_due():
                self.ops.save_state()
        if rec.status.is_finished and self.spec.searcher is not None and self.halts.told(trial_id) and not \
                self.ops.searcher("on_trial_complete", trial_id, dict(rec.last_result),
                                  rec.status is TrialStatus.ERROR):
            return
        if rec.status is TrialStatus.ERROR and self.spec.fail_fast:
            if self.spec.fail_fast_raise:  # fail_fast="raise": fit() raises this error
                self.ops.abort(f"trial {trial_id} failed and fail_fast is set: {error}")
                return
            self.ops.drain()  # fail_fast=True: stop the rest, fit() returns the results (Ray Tune)
        self.ops.fill()

    def _requeue(self, rec: TrialRecord) -> None:
        """A retried trial, as Ray Tune's ``_requeue_trial``: the scheduler hears ``on_trial_error``,
        the trial moves to the end of the trial list (it runs after the trials already waiting, and
        is listed last), then the scheduler hears ``on_trial_add`` (HyperBand and ASHA place it in a
        bracket again, PBT starts its record afresh)."""
        self.ops.call(HookKind.ERROR, rec.trial_id)
        self.table.requeue(rec.trial_id)
        self.ops.call(HookKind.ADD, rec.trial_id)

    def _recover(self, rec: TrialRecord) -> None:
        """Checkpoints the failed run committed but never sent: callbacks hear of them and of their
        results, retention counts them."""
        got = self.ops.io.recover(rec)
        for row in got.rows if got else ():
            self.ops.event(EventType.RESULT, rec, result=row)
        for c in got.usable if got else ():
            self.results.checkpointed(rec, c)

    def host_lost(self, lost: RunLost) -> None:
        """The member running the trial is unreachable: the trial fails and restarts elsewhere."""
        # what the lost run committed before now counts, even unreported; only its later commits
        # are fenced off (fencing first hid them all). A batch waiting for its decision is logged
        # first, so recovery does not log its rows a second time.
        rec = self.table.get(lost.trial_id)
        self.results.log_unlogged(lost.trial_id)
        self._recover(rec)
        self.ops.io.fence(lost.trial_id)
        self.ended(lost.trial_id, rec.run_id, EndReason.FAILED, None, lost.error, lost.traceback)


__all__ = ["TrialRuns"]
