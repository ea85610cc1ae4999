"""A trial's runs: what the table's effects do to them (a run started on a member, an actor freed, the
message a trial's actor is told, a finished trial's events and hooks) and how a run ends: its unlogged
batches logged, a failure recorded and retried (the scheduler hears ``on_trial_error`` then
``on_trial_add``, as Ray Tune's ``_requeue_trial``), what a failed or lost run committed but never sent
recovered, the searcher told of a finished trial.

Whatever ended a run (its own ``TrialEnded``, its actor or process gone, a kill, its member lost), the same
``ended`` runs, so hooks and events come in the same order for all. Separate from the core because it is
the trials' story, not the experiment's: the phase changes it can lead to (a state snapshot due,
``fail_fast`` draining or aborting) and the hook calls it makes it asks of the core through ``CoreOps``.
"""

from __future__ import annotations

from actors._engine.clones import CloneWaits
from actors._engine.cluster import RunLost
from actors._engine.halt import Halts
from actors._engine.lifecycle import Effect, EffectKind, TrialRecord, TrialTable
from actors._engine.members import Membership
from actors._engine.orders import TrialOrders
from actors._engine.pool import ActorPool
from actors._engine.port import CoreOps, ExperimentPhase
from actors._engine.results import ResultPath
from actors._engine.signals import ActorGone, Undeliverable
from actors._engine.spec import ExperimentSpec
from actors._engine.suggest import TrialSource
from actors._engine.trial import TrialStatus
from actors._engine.watch import Watchdog, death_message
from actors.messages import CheckpointRef, EndReason, EventType, HookKind, TrialEnded


class TrialRuns:
    """Trials' runs started, ordered and ended."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, pool: ActorPool, halts: Halts,
                 clone_waits: CloneWaits, results: ResultPath, source: TrialSource, orders: TrialOrders,
                 members: Membership, watch: Watchdog, ops: CoreOps) -> None:
        self.spec = spec
        self.table = table
        self.pool = pool
        self.halts = halts
        self.clone_waits = clone_waits
        self.results = results
        self.source = source  # names a trial's directory at its first start
        self.orders = orders
        self.members = members
        self.watch = watch
        self.ops = ops
        # trials a run of which ended without its own end notice (a death, a kill, a lost member) since their
        # checkpoints were last looked for: it may have committed some the controller never heard of (all a
        # run sends comes before its end notice)
        self.unseen: set[str] = set()

    def run(self, effects: list[Effect]) -> None:
        """Carry out the table's effects in order: start a run, free an actor, end a trial (events, hooks,
        the searcher), or tell a trial's actor (the ``TrialOrders`` message)."""
        for e in effects:
            kind = e.kind
            if kind is EffectKind.START:
                self.start_trial(self.table.get(e.trial_id))
            elif kind is EffectKind.RELEASE:
                self.ops.emit(self.orders.release(e.trial_id, e.flag))
            elif kind is EffectKind.CLONED:  # what its runs committed unseen is of the lineage it leaves
                if e.trial_id in self.unseen:
                    self.unseen.discard(e.trial_id)
                    self.ops.io.abandon_unseen(self.table.get(e.trial_id))
            elif kind is EffectKind.COMPLETE or kind is EffectKind.ERROR or kind is EffectKind.REMOVE:
                self.unseen.discard(e.trial_id)  # (it is never cloned now)
                rec = self.table.get(e.trial_id)
                self.orders.declare_horizon(e.trial_id, None)
                self.ops.io.on_finished(rec)  # the controller's loggers close its files, halted or not
                if not self.halts.told(e.trial_id):  # stopped from outside: TERMINATED, no hook (Ray)
                    self.ops.event(EventType.HALT, rec)
                else:
                    self.ops.event(EventType.ERROR if kind is EffectKind.ERROR else EventType.COMPLETE, rec)
                    self.ops.call(_HOOK_OF[kind], e.trial_id, (dict(rec.last_result),))
                    if kind is EffectKind.REMOVE and self.spec.searcher is not None:  # Ray's stop_trial of a
                        # PENDING/PAUSED trial: no result (a capped generator otherwise counts it live for good)
                        self.ops.searcher("on_trial_complete", e.trial_id, None, False)
                self.table.forget_run(rec)  # (after the event and the hook call: their snapshots hold it)
            else:  # PROCEED, HOLD, SAVE, STOP: a message to the trial's actor
                order = self.orders.order(e, self.ops.now)
                if order is not None:
                    self.ops.put(order)

    def start_trial(self, rec: TrialRecord) -> None:
        """Start the trial's run on a member with room (an idle actor there, or a new one)."""
        member = self.members.choose(self.members.need_of(rec.resources))
        if member is None or rec.trial_id in self.clone_waits:
            # the room it was chosen for is gone (a member was lost meanwhile), or it is a clone whose
            # source's checkpoint is still being saved: it starts when that landed
            self.table.unstart(rec.trial_id)
            return
        if not rec.opened:  # its first start: Ray names its directory now (with the date) and writes
            problem = self.source.first_start(rec, self.ops.now)  # params.json, an empty result.json
            if problem is not None:
                self.table.unstart(rec.trial_id)
                self.ops.abort(problem)
                return
            self.ops.io.on_first_start(rec)
            rec.opened = True
        self.ops.io.on_start(rec)
        spawn, handle = self.orders.place(rec, member)
        if spawn is not None:
            self.ops.put(spawn)
        self.ops.event(EventType.START, rec)
        self.ops.send(handle, self.orders.run_trial(rec, member, self.ops.io.next_checkpoint_index(rec)))
        self.watch.started(rec.trial_id, rec.run_id, self.ops.now, rec.time_total_s)

    def on_ended(self, m: TrialEnded) -> None:
        """The run's own end notice (its output is the core's to forward first)."""
        if m.setup_failed or m.started:  # taken once built; never came up: Ray's has the id alone
            self.table.process_started(m.trial_id, m.run_id, m.started)
        self.ended(m.trial_id, m.run_id, m.reason, m.checkpoint, m.error, m.traceback, notice=True)
        if m.storage_failure and not self.ops.finished:
            # retrying cannot help (the storage package already retried transient errors), and
            # every other trial would hit the same wall: stop, keeping what was written
            self.ops.abort(f"trial {m.trial_id} could not write its checkpoint to storage: {m.storage_failure}")

    def actor_gone(self, msg: ActorGone) -> None:
        """A trial's actor exited (its process died): its running run failed."""
        trial_id = self.pool.gone(msg.handle)
        if trial_id is None:
            return
        rec = self.table.get(trial_id)
        if rec.status is TrialStatus.RUNNING:
            self.ended(trial_id, rec.run_id, EndReason.FAILED, None, death_message(msg.code),
                       "ChildActorExited: the process running this trial is gone\n")

    def undeliverable(self, msg: Undeliverable) -> bool:
        """A trial's actor could not handle a message: its run failed. False if no trial runs on that actor."""
        trial_id = self.pool.trial_of.get(msg.handle)
        if trial_id is None:
            return False
        rec = self.table.get(trial_id)
        self.ended(trial_id, rec.run_id, EndReason.FAILED, None,
                   f"the trial actor could not handle {msg.message_type}", "")
        return True

    def ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: CheckpointRef | None = None,
              error: str | None = None, tb: str | None = None, notice: bool = False) -> None:
        """The run ended: by its own end notice (``notice``), or found dead, killed or lost."""
        rec = self.table.trials.get(trial_id)
        if rec is None:
            return
        self.results.log_unlogged(trial_id)
        self.results.forget(trial_id)
        known = rec.checkpoint.path if rec.checkpoint is not None else None
        failures = rec.num_failures
        if not notice and rec.run_id == run_id and rec.status is TrialStatus.RUNNING:  # (before a clone's effect)
            self.unseen.add(trial_id)  # (kept through later runs' clean ends, until they are looked for)
        effects = self.table.ended(trial_id, run_id, reason, ckpt, error, tb)
        if effects:
            self.pool.close_inbox(trial_id)  # this run is over: no more messages are expected from it
            self.watch.run_over(trial_id, run_id)
            self.results.drop_held(trial_id)
            if ckpt is not None and ckpt.path != known:  # saved at the end: the next run must not reuse its index
                self.results.checkpointed(rec, ckpt)
        # a failure counted (not a run failing while its PBT exploit's pause is pending: that ends as the
        # pause, the clone's checkpoint kept, and what the run did after the exploit dropped, as in Ray)
        if effects and rec.num_failures > failures:
            self.ops.io.on_error(rec, error or "", tb or "")
            self._recover(rec)
            if rec.status is not TrialStatus.ERROR:  # retried: before its next run starts, as Ray tells it
                self._requeue(rec)
                self.ops.event(EventType.RECOVER, rec)
        if effects:
            # a clone source's end: the clones waiting for its save take its checkpoint
            effects += self.clone_waits.landed(trial_id, ckpt if ckpt is not None else rec.checkpoint)[1]
        self.ops.run(effects)
        # the searcher hears of the end before a state is written: a state holding the trial finished beside
        # a searcher that still counts it running restored into a search that suggested nothing more (seen:
        # max_concurrent_trials, the trial's end written and the run aborted before the next state)
        if rec.status.is_finished and self.spec.searcher is not None and self.halts.told(trial_id) and not \
                self.ops.searcher("on_trial_complete", trial_id, dict(rec.last_result),
                                  rec.status is TrialStatus.ERROR):
            return
        if effects:  # paused, finished, failed or retried: write it down soon, not only every state_interval_s
            self.ops.io.dirty = True
            if self.ops.phase in (ExperimentPhase.RUNNING, ExperimentPhase.DRAINING) and self.ops.io.state_due():
                self.ops.save_state()
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
        self.unseen.discard(rec.trial_id)  # (all it committed is taken, or deleted: nothing unseen is left)
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


_HOOK_OF = {EffectKind.COMPLETE: HookKind.COMPLETE, EffectKind.ERROR: HookKind.ERROR,
            EffectKind.REMOVE: HookKind.REMOVE}

__all__ = ["TrialRuns"]
