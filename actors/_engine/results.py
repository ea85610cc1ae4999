"""The path of a trial's results and saves, in Ray Tune's order: the stop criteria, the scheduler's
decision, logging (the searcher, the callbacks), a checkpoint a callback asked for, the decision.

Owns what waits on that path: the batches whose decision is not known yet (``unlogged``: logged when it
arrives, so the row a scheduler stops at says ``done=True``), the replies trials got from the scheduler
directly (``DecisionJoin``, joined per batch) and the decisions held for the driver's callbacks
(``ResultGate``). It is separate from the core because it is the hot path, with its own state and its own
order; it reaches the core (running effects, hook calls, ending the run) only through ``CoreOps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors._engine.clones import CloneWaits
from actors._engine.direct import DecisionJoin
from actors._engine.feed import DriverFeed
from actors._engine.gate import Held, ResultGate
from actors._engine.lifecycle import Effect, TrialRecord, TrialTable
from actors._engine.link import SchedulerLink
from actors._engine.orders import TrialOrders
from actors._engine.port import CoreOps, ExperimentPhase
from actors._engine.reducer import Decision
from actors._engine.saves import SaveHooks, save_hooks
from actors._engine.spec import ExperimentSpec
from actors._engine.suggest import TrialSource
from actors._engine.trial import TrialStatus
from actors._engine.verdicts import judge
from actors.messages import (
    ActionKind,
    CallbackAnswer,
    CheckpointRef,
    DecidedResults,
    EventType,
    HookKind,
    SaveKind,
    SchedulerAction,
    TrialResults,
    TrialSaved,
)
from actors.result import SHOULD_CHECKPOINT, TRAINING_ITERATION


@dataclass(frozen=True)
class Waiting:
    """A batch on its way to the log: the scheduler decides its first ``asked`` results; the rest were
    decided STOP without it (``hit``: a stop criterion was met; else the trainable said ``done``)."""

    batch: TrialResults
    asked: int
    hit: bool


class ResultPath:
    """A trial's batches of results and its saves, from arrival to the decision taking effect."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, link: SchedulerLink, orders: TrialOrders,
                 feed: DriverFeed, source: TrialSource, clone_waits: CloneWaits, ops: CoreOps) -> None:
        self.spec = spec
        self.table = table
        self.link = link
        self.orders = orders
        self.feed = feed
        self.source = source
        self.clone_waits = clone_waits
        self.ops = ops
        # batches waiting for their decision to be logged, per trial in send order (a batching
        # scheduler can have several of a trial's batches in flight)
        self.unlogged: dict[str, list[Waiting]] = {}
        # trials a batch of which could not be written, rows or checkpoints (the experiment is ending): a later
        # row written would leave a gap in the history, so none is; a restore takes the rows after the gap
        # from the checkpoints' manifests, as after a killed run
        self.unwritten: set[str] = set()
        # the replies of decisions trials asked for directly, waiting for their batches (actors/_engine/direct.py)
        self.joined = DecisionJoin()
        self.gate = ResultGate(spec.callback_gate and spec.forward_events)

    def on_results(self, msg: TrialResults) -> None:
        """A batch of results, in Ray Tune's order: the stop criteria, then the scheduler's decision
        (a stop marks the result ``done``), then logging, the searcher and the callbacks, then a
        checkpoint a callback asked for, and only then does the decision take effect. A result that
        meets a stop criterion or that the trainable reported ``done`` is decided STOP without the
        scheduler (Ray's ``Trial.should_stop``), after the trial's results before it."""
        if not self.table.results(msg.trial_id, msg.run_id, msg.seq, msg.results, msg.checkpoint):
            return
        verdict = judge(self.spec, msg.trial_id, msg.results)
        if verdict.problem is not None:
            self.ops.abort(verdict.problem)
            return
        entry = Waiting(msg, verdict.asked, any(verdict.hits))
        effects = self.ops.stop_every_trial() if verdict.stop_all else []
        queued = self.unlogged.get(msg.trial_id)
        if not self.link.implements(HookKind.RESULT) or (not entry.asked and not queued):
            self._settle(entry, Decision.CONTINUE, effects)  # nothing to wait for
            return
        self.unlogged.setdefault(msg.trial_id, []).append(entry)  # logged in order, once decided
        if not entry.asked:  # decided already: settled when the batches before it are
            self.ops.run(effects)
        elif self.orders.direct:  # the scheduler decided (or is deciding) each result with the trial itself
            self.ops.run(effects)
            self._join(msg.trial_id)
        else:  # logged when the decision is known: the row a scheduler stops at says done=True
            self.ops.call(HookKind.RESULT, msg.trial_id, msg.results[:entry.asked], msg.run_id, msg.seq)
            self.ops.run(effects)

    def decided_results(self, msg: DecidedResults) -> None:
        """Replies of results the scheduler decided directly: kept until their batches are here."""
        touched: list[str] = []
        for d in msg.decisions:
            rec = self.table.trials.get(d.trial_id)
            if rec is None or rec.run_id != d.run_id or rec.status is not TrialStatus.RUNNING:
                continue  # a run that has ended: its batches were logged as they were
            self.joined.add(d)
            if d.trial_id not in touched:
                touched.append(d.trial_id)
        for trial_id in touched:
            self._join(trial_id)

    def _join(self, trial_id: str) -> None:
        """Apply the replies of the trial's oldest batches, as far as every result asked about is decided."""
        while not self.ops.finished:
            queued = self.unlogged.get(trial_id)
            if not queued:
                return
            entry = queued[0]
            batch = entry.batch
            reply = self.joined.take(trial_id, batch.run_id, batch.results[:entry.asked])
            if reply is None:
                return
            self.ops.reply(HookKind.RESULT, trial_id, batch.run_id, batch.seq, reply)

    def decided(self, trial_id: str, run_id: int, batch_seq: int, decision: Decision,
                effects: list[Effect], notes: tuple[dict[str, Any] | None, ...] = ()) -> list[Effect] | None:
        """The scheduler's decision on a batch, after the requests its hook recorded (``effects``, not run
        yet): the batch waiting for it is logged (a STOP marks its last row done), those requests run, then
        the decision; then the batches behind it that were decided without the scheduler. The effects
        still to run; None once the experiment is ending (nothing more to do). ``notes``: the results as the
        hook left them, for the searcher (``SchedulerReply.notes``)."""
        queued = self.unlogged.get(trial_id) or []
        entry = queued[0] if queued else None
        if entry is None or (entry.batch.run_id, entry.batch.seq) != (run_id, batch_seq) or not entry.asked:
            return effects + self.table.decided(trial_id, run_id, batch_seq, decision)
        queued.pop(0)
        if not self._settle(entry, decision, effects, notes):
            return None
        while queued and not queued[0].asked:  # decided without the scheduler: next in line now
            if not self._settle(queued.pop(0), Decision.CONTINUE, []):
                return None
        if not queued:
            self.unlogged.pop(trial_id, None)
        return []

    def _settle(self, entry: Waiting, decision: Decision, effects: list[Effect],
                notes: tuple[dict[str, Any] | None, ...] = ()) -> bool:
        """Log a batch whose decision is known and apply it: ``decision`` is the scheduler's on the
        results it was asked about; a stop criterion met after them asks the trial to stop (a result
        the trainable said was its last needs nothing: the trainable returns). False once the
        experiment is ending."""
        batch, asked = entry.batch, entry.asked
        if decision is Decision.STOP and asked:
            self._mark_done(batch, asked - 1)
        if entry.hit:
            self._mark_done(batch, len(batch.results) - 1)
        self._log(batch, told=0 if decision is Decision.STOP else asked, notes=notes)
        if self.ops.finished or self.ops.phase is ExperimentPhase.ABORTING:
            return False
        if entry.hit:  # Ray Tune: a stop criterion decides STOP, and the scheduler never sees the result
            effects = [*self.table.request(SchedulerAction(ActionKind.STOP, batch.trial_id)), *effects]
        self.ops.run(effects)
        self._decide(batch, decision)
        return True

    def _mark_done(self, msg: TrialResults, index: int) -> None:
        """The batch's result at ``index`` is the trial's last: its row says ``done=True`` (Ray Tune); the
        table's copy only once the trial ended at it (there ``done`` means the trainable said it had finished)."""
        msg.results[index]["done"] = True
        self.table.get(msg.trial_id).stop_row = int(msg.results[index].get("training_iteration") or 0)

    def _log(self, msg: TrialResults, told: int, notes: tuple[dict[str, Any] | None, ...] = ()) -> None:
        """Write the batch, tell the searcher of its first ``told`` results (not of a stopping one, as
        Ray; each as the scheduler's hook left it, ``notes``) and the callbacks of all."""
        rec = self.table.get(msg.trial_id)
        if msg.trial_id in self.unwritten:
            return
        try:
            self._write(rec, msg, told, notes)
        except Exception:  # (storage: the core ends the experiment with it)
            self.unwritten.add(msg.trial_id)
            raise

    def _write(self, rec: TrialRecord, msg: TrialResults, told: int,
               notes: tuple[dict[str, Any] | None, ...]) -> None:
        err = self.ops.io.on_results(rec, msg.results)
        if err:
            self.unwritten.add(msg.trial_id)
            self.ops.abort(err)
            return
        if told and self.source.hears_results:
            for i, r in enumerate(msg.results[:told]):
                note = notes[i] if i < len(notes) else None
                if not self.ops.searcher("on_trial_result", msg.trial_id, r, flat=note):
                    return
        for r in msg.results:
            self.ops.event(EventType.RESULT, rec, result=r)
        for c in (*msg.earlier_checkpoints, *((msg.checkpoint,) if msg.checkpoint else ())):
            self.checkpointed(rec, c)  # batched: every checkpoint committed in the batch

    def log_unlogged(self, trial_id: str | None = None) -> None:
        """Batches whose decision never came (the run ended, the experiment is ending): logged as they are."""
        for t in [trial_id] if trial_id is not None else list(self.unlogged):
            for entry in self.unlogged.pop(t, []):
                if entry.hit:
                    self._mark_done(entry.batch, len(entry.batch.results) - 1)
                self._log(entry.batch, told=entry.asked)

    def forget(self, trial_id: str) -> None:
        """A run of the trial ended: the direct replies kept for it belong to no batch any more."""
        self.joined.forget(trial_id)

    def answers_due(self) -> bool:
        """Whether the driver has still to answer for the last result of a run that ended (the
        experiment ends after it, so that row is logged as the callbacks left it)."""
        return bool(self.gate.ended) and self.feed.driver_present

    def drop_held(self, trial_id: str) -> None:
        """A run of the trial ended: the decision held for the callbacks is needed no more."""
        self.gate.drop(trial_id)

    def _decide(self, msg: TrialResults, decision: Decision) -> None:
        """Apply a batch's decision, after the driver's callbacks if one may ask for a checkpoint."""
        if self.gate.on and self.feed.ask_answer(msg.trial_id, msg.run_id, msg.seq):
            self.gate.hold(msg, decision)  # waits for CallbackAnswer (and the save it may ask for)
            self.ops.emit(self.feed.flush())
        else:
            self.ops.run(self.table.decided(msg.trial_id, msg.run_id, msg.seq, decision))

    def on_saved(self, msg: TrialSaved) -> None:
        if msg.checkpoint is not None and msg.trial_id in self.table.trials:
            rec = self.table.get(msg.trial_id)
            hooks = save_hooks(rec.checkpoint, rec.iteration, msg.checkpoint, msg.kind)
            if hooks is SaveHooks.CHECKPOINT:  # (a checkpoint announced again is counted once by retention)
                self.checkpointed(rec, msg.checkpoint)
            elif hooks is SaveHooks.SAVED:
                self.ops.event(EventType.SAVED, rec)
        self.ops.run(self.table.saved(msg.trial_id, msg.run_id, msg.checkpoint))
        waited, cloned = self.clone_waits.landed(msg.trial_id, msg.checkpoint)  # its clones take that checkpoint
        self.ops.run(cloned)
        if waited:
            self.ops.fill()
        held = self.gate.saved(msg.trial_id)
        if held is not None:
            self._release_decision(held)

    def callback_answer(self, msg: CallbackAnswer) -> None:
        batch = self.gate.batch_for(msg)
        if msg.checkpoint and batch is not None:
            self._mark_should_checkpoint(batch)
        entry = self.gate.answer_for(msg)
        if entry is None:
            if batch is not None:  # the answer for a run that ended: the experiment may end now
                self.ops.fill()
            return
        if msg.checkpoint:
            effects = self.table.request(SchedulerAction(ActionKind.CHECKPOINT, msg.trial_id, save=SaveKind.CALLBACK))
            if effects:  # a save is on its way: the batch's decision waits until it landed
                entry.awaiting_save = True
                self.ops.run(effects)
                return
        self._release_decision(self.gate.release(msg.trial_id))

    def _mark_should_checkpoint(self, batch: TrialResults) -> None:
        """A driver callback set ``should_checkpoint`` on the batch's last result: as in Ray 2.60, whose
        loggers run after the user's callbacks, the logged row and the trial's result carry it."""
        rec = self.table.trials.get(batch.trial_id)
        if rec is None or batch.results[-1].get(SHOULD_CHECKPOINT):
            return
        result = {**batch.results[-1], SHOULD_CHECKPOINT: True}  # (the message's own dict is left as it came)
        if rec.last_result.get(TRAINING_ITERATION) == result.get(TRAINING_ITERATION):
            rec.last_result = {**rec.last_result, SHOULD_CHECKPOINT: True}
        err = self.ops.io.amend_result(rec, result)
        if err:
            self.ops.abort(err)

    def _release_decision(self, held: Held) -> None:
        """A decision the driver's callbacks held takes effect."""
        self.ops.run(self.table.decided(held.batch.trial_id, held.batch.run_id, held.batch.seq, held.decision))

    def checkpointed(self, rec: TrialRecord, ckpt: CheckpointRef) -> None:
        """A checkpoint was committed: retention and numbering count it, callbacks hear of it."""
        self.ops.io.on_checkpoint(rec, ckpt)
        self.ops.event(EventType.CHECKPOINT, rec, checkpoint=self.ops.io.checkpoint_uri(ckpt))


__all__ = ["ResultPath", "Waiting"]
