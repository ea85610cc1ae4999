"""The controller's trial state machine, as pure code.

``TrialTable`` takes events (results, decisions, scheduler requests, saves,
ends) and returns ``Effect``s for the controller actor to carry out.  Nothing
here touches the actor runtime, so the whole machine is property-tested.

Invariants (see docs/architecture.md):
* one pending-decision slot per trial; every decision is merged into it with
  ``max``; it is reset only in :meth:`TrialTable._transition`;
* a RUNNING trial acts on its slot only at a decision point: when a result's
  decision has arrived, or when an in-flight save finished; so a save in flight
  cannot lose a decision that arrives meanwhile;
* a trial whose slot holds STOP never ends PAUSED; one holding PAUSE never
  continues past its next decision point;
* a STEPPING trial never holds a non-CONTINUE slot without a result awaiting its
  decision: a STOP, or a PAUSE requested when no decision is pending, is acted on at once.

Each trial also keeps ``marks`` (see ``actors._engine.marks``): the pauses, stops, exploits
and failures as they took effect, for ``audition plot``. They never influence a transition.
"""

from __future__ import annotations

from typing import Any

from actors._engine.effects import Effect, EffectKind, Phase
from actors._engine.ending import ends_done, run_result
from actors._engine.hook_view import pre_result
from actors._engine.marks import Mark, MarkKind, add_mark
from actors._engine.record import TrialRecord
from actors._engine.reducer import Decision, merge
from actors._engine.trial import TrialStatus
from actors.messages import ActionKind, CheckpointRef, EndReason, SaveKind, SchedulerAction


class TrialTable:
    """All trials of one experiment and the rules that move them."""

    def __init__(self, max_failures: int = 0) -> None:
        self.trials: dict[str, TrialRecord] = {}
        # status -> trials, kept by add/_transition/set_status so queries do not scan every trial
        self.by_status: dict[TrialStatus, dict[str, TrialRecord]] = {s: {} for s in TrialStatus}
        self.max_failures = max_failures
        self.changed: set[str] = set()
        self.version = 0  # bumped on every status change
        self.aborted = False  # after abort_all nothing is the scheduler's doing: no more marks
        # the order changed other than by trials added at the end (``requeue``; a restored table, which may hold
        # requeued trials): the scheduler's mirror takes it with its next call (``take_order``)
        self.reordered = True

    # ------------------------------------------------------------------ queries
    def add(self, trial_id: str, config: dict[str, Any]) -> TrialRecord:
        rec = TrialRecord(trial_id, dict(config))
        self.trials[trial_id] = rec
        self.by_status[rec.status][trial_id] = rec
        self.changed.add(trial_id)
        return rec

    def get(self, trial_id: str) -> TrialRecord:
        return self.trials[trial_id]

    def requeue(self, trial_id: str) -> None:
        """Move a trial to the end of the list (Ray requeues a retried trial there)."""
        self.trials[trial_id] = self.trials.pop(trial_id)
        self.changed.add(trial_id)
        self.reordered = True

    def take_order(self) -> tuple[str, ...]:
        """Every trial id in the table's order if that changed since last asked (else ()): the scheduler's mirror
        lists trials as the table does, as Ray's ``get_trials()``, which FIFO's choice follows."""
        if not self.reordered:
            return ()
        self.reordered = False
        return tuple(self.trials)

    def with_status(self, *statuses: TrialStatus) -> list[TrialRecord]:
        if len(statuses) == 1:
            return list(self.by_status[statuses[0]].values())
        return [t for t in self.trials.values() if t.status in statuses]  # keeps creation order

    def count(self, status: TrialStatus) -> int:
        return len(self.by_status[status])

    @property
    def running(self) -> int:
        return len(self.by_status[TrialStatus.RUNNING])

    def all_finished(self) -> bool:
        return len(self.by_status[TrialStatus.TERMINATED]) + len(self.by_status[TrialStatus.ERROR]) == len(
            self.trials)

    def set_status(self, rec: TrialRecord, status: TrialStatus) -> None:
        """Set a status without the transition's side effects (loading a saved table)."""
        self.by_status[rec.status].pop(rec.trial_id, None)
        rec.status = status
        self.by_status[status][rec.trial_id] = rec

    def mark(self, rec: TrialRecord, kind: MarkKind, source: str | None = None) -> None:
        """Record a pause, stop, exploit or failure as it took effect (none after an abort)."""
        if not self.aborted:
            add_mark(rec.marks, Mark(kind, rec.iteration, source))

    # ------------------------------------------------------------------ the one place a status changes
    def _transition(self, rec: TrialRecord, status: TrialStatus) -> None:
        self.set_status(rec, status)
        rec.phase = Phase.STEPPING if status is TrialStatus.RUNNING else Phase.IDLE
        rec.pending = Decision.CONTINUE
        rec.pause_checkpoint = False
        rec.inflight = []
        rec.saves_inflight = 0
        if status is not TrialStatus.PAUSED:
            rec.resume_requested = False
        self.changed.add(rec.trial_id)
        self.version += 1

    # ------------------------------------------------------------------ events
    def start(self, trial_id: str) -> list[Effect]:
        rec = self.trials[trial_id]
        if rec.status not in (TrialStatus.PENDING, TrialStatus.PAUSED):
            return []
        self._transition(rec, TrialStatus.RUNNING)
        rec.run_id += 1
        # restarting from the checkpoint: the iterations after it are redone (a clone's, from its source's
        # checkpoint, are appended to its history: Ray 2.60's Trainable.restore after a PBT exploit)
        rec.iteration = rec.checkpoint.iteration if rec.checkpoint else 0
        rec.time_total_s = rec.checkpoint.time_total_s if rec.checkpoint else 0.0
        rec.cloned = rec.clone is not None and not rec.clone_waiting
        if rec.cloned:
            rec.before_clone = dict(rec.last_result)
        elif int(rec.last_result.get("training_iteration", 0)) > rec.iteration:
            # the rows after the checkpoint (all, without one) are redone and dropped from the history:
            # the last result is the checkpoint's, unless that is a PBT source's (restored by the clone
            # whose rows are all dropped): then the trial's own last one before the clone (after a
            # Tuner.restore, the one the restore left, already the history's last row); so too for a
            # clone with no checkpoint at all (its rows before the clone stay, the clone's are dropped)
            ckpt = rec.checkpoint
            if ckpt is not None and ckpt.metrics.get("trial_id", rec.trial_id) != rec.trial_id:
                rec.last_result = dict(rec.before_clone or rec.last_result)
            elif ckpt is None:
                rec.last_result = dict(rec.before_clone or {})
            else:
                rec.last_result = dict(ckpt.metrics)
        rec.clone, rec.clone_waiting = None, False
        # Ray's last_result as the run starts: the restored checkpoint's result (process_started fills
        # in the keys of a run that restores none)
        rec.run_start = {**rec.checkpoint.metrics, "config": rec.checkpoint.metrics.get("config", dict(
            rec.config))} if rec.checkpoint is not None and rec.checkpoint.metrics else {}
        return [Effect(EffectKind.START, trial_id)]

    def process_started(self, trial_id: str, run_id: int, started: dict[str, Any]) -> None:
        """What ``Result.metrics`` holds if this run ends before its first result, as Ray 2.60's
        ``Trial.last_result``: the trial id, then the run's auto-filled keys and its config; the id
        alone when ``started`` is empty (the trainable never came up: a class whose setup raised)."""
        rec = self.trials.get(trial_id)
        if rec is not None and rec.run_id == run_id:
            rec.started = started
            if started and not rec.run_start:  # Ray's last_result before the run's first result
                rec.run_start = pre_result(trial_id, started, rec.config)
                self.changed.add(trial_id)  # the scheduler's mirror shows it (hook_view.before_result)

    def forget_run(self, rec: TrialRecord) -> None:
        """A finished trial's views of its last run's start: they serve that run's hooks only (its end
        folded ``started`` into ``last_result``), so its events and hooks take them first, then they go
        (~0.7 KB a trial the controller kept for the rest of the experiment: benchmarks/bench_memory.py)."""
        if rec.status.is_finished:
            rec.started, rec.run_start = {}, {}

    def unstart(self, trial_id: str) -> None:
        """Undo ``start`` when no member had room after all: back to PENDING, no failure counted."""
        rec = self.trials[trial_id]
        if rec.status is TrialStatus.RUNNING:
            self._transition(rec, TrialStatus.PENDING)

    def results(self, trial_id: str, run_id: int, seq: int, results: tuple[dict[str, Any], ...],
                checkpoint: CheckpointRef | None) -> bool:
        """Record a batch; True if it belongs to the current run (then ask the scheduler)."""
        rec = self.trials.get(trial_id)
        if rec is None or rec.run_id != run_id or rec.status is not TrialStatus.RUNNING:
            return False
        if results:
            rec.last_result = dict(results[-1])
            rec.iteration = int(results[-1].get("training_iteration", rec.iteration))
            rec.time_total_s = float(results[-1].get("time_total_s", rec.time_total_s))
        if checkpoint is not None:
            rec.checkpoint = checkpoint
            self.changed.add(trial_id)  # schedulers pick clone sources by checkpoint_iteration (PBT)
        rec.inflight.append(seq)
        return True

    def decided(self, trial_id: str, run_id: int, seq: int, decision: Decision) -> list[Effect]:
        rec = self.trials.get(trial_id)
        if rec is None or rec.run_id != run_id or rec.status is not TrialStatus.RUNNING:
            return []
        rec.pending = merge(rec.pending, decision)
        if decision is Decision.PAUSE:
            rec.pause_checkpoint = True  # a returned PAUSE pauses with a checkpoint, as in Ray Tune
        if seq in rec.inflight:
            rec.inflight.remove(seq)
        if rec.phase is not Phase.STEPPING:
            return []  # a save or stop is in flight: the merged slot is applied when it lands
        if rec.pending is Decision.CONTINUE:
            return [Effect(EffectKind.PROCEED, trial_id, seq)]
        return self._act(rec)

    def _act(self, rec: TrialRecord) -> list[Effect]:
        """Apply a non-CONTINUE slot at a decision point."""
        if rec.pending is Decision.PAUSE and (rec.pause_checkpoint or rec.saves_inflight):
            rec.phase = Phase.SAVING
            if rec.saves_inflight:  # the save in flight is the pause's (Ray: no other after it)
                return []
            rec.saves_inflight += 1
            return [Effect(EffectKind.SAVE, rec.trial_id, save=SaveKind.PAUSE)]
        rec.phase = Phase.STOPPING
        return [Effect(EffectKind.STOP, rec.trial_id)]

    def request(self, action: SchedulerAction, source_checkpoint: CheckpointRef | None = None,
                waiting: bool = False) -> list[Effect]:
        """A scheduler (or stopper) asked for something; merge it, act if the trial is not running. A clone
        ``waiting`` for its source's save in flight is applied when that save lands, or
        dropped if it gives none (``CloneWaits.landed``)."""
        rec = self.trials.get(action.trial_id)
        if rec is None or rec.status.is_finished:
            return []
        kind = action.kind
        if kind is ActionKind.RESUME:
            if rec.status is TrialStatus.PAUSED:
                self._transition(rec, TrialStatus.PENDING)
            elif rec.status is TrialStatus.RUNNING and rec.pending is Decision.PAUSE:
                rec.resume_requested = True
            return []
        if kind is ActionKind.CHECKPOINT:
            mine = action.save is not SaveKind.CALLBACK  # the scheduler's: the checkpoint its clones take
            if rec.status is TrialStatus.RUNNING and rec.phase is Phase.STEPPING:
                rec.saves_inflight += 1
                rec.exploit_save = rec.exploit_save or mine
                return [Effect(EffectKind.SAVE, rec.trial_id, save=action.save)]
            if mine and rec.status is TrialStatus.RUNNING and rec.phase is Phase.SAVING:
                rec.exploit_save = True  # the save in flight (a pause's) is the one
            elif mine:  # Ray: a paused trial gives its last checkpoint
                rec.exploit_checkpoint, rec.exploit_save = rec.checkpoint, False
            return []
        if kind is ActionKind.CLONE:
            rec.clone = action
            rec.clone_checkpoint = source_checkpoint
            rec.clone_waiting = waiting
            if rec.status is TrialStatus.RUNNING:
                rec.resume_requested = True
                return self._merge_running(rec, Decision.PAUSE, False)
            cloned = [] if waiting else self.apply_clone(rec)
            if rec.status is TrialStatus.PAUSED:
                self._transition(rec, TrialStatus.PENDING)
            return cloned
        if kind is ActionKind.RESOURCES:  # from its next start (a running trial keeps what its member holds for it)
            new = (action.info or {}).get("resources")
            if isinstance(new, dict) and new:  # (built by the scheduler host: summed_resources)
                rec.resources = dict(new)
                self.changed.add(rec.trial_id)
            return []
        if kind in (ActionKind.LOG_POLICY, ActionKind.SEARCHER):
            return []  # a record to write, a call of the search algorithm (the core makes both): no request of the run
        decision = Decision.STOP if kind is ActionKind.STOP else Decision.PAUSE
        if rec.status is TrialStatus.RUNNING:
            return self._merge_running(rec, decision, action.should_checkpoint)
        if decision is Decision.STOP:
            self.mark(rec, MarkKind.STOP)
            self._transition(rec, TrialStatus.TERMINATED)
            return [Effect(EffectKind.REMOVE, rec.trial_id)]
        if rec.status is TrialStatus.PENDING:
            self._transition(rec, TrialStatus.PAUSED)
        return []  # PAUSE of a paused trial: harmless

    def _merge_running(self, rec: TrialRecord, decision: Decision, should_checkpoint: bool) -> list[Effect]:
        rec.pending = merge(rec.pending, decision)
        if decision is Decision.PAUSE:
            rec.pause_checkpoint = rec.pause_checkpoint or should_checkpoint
        if rec.phase is not Phase.STEPPING:
            return []  # a save or stop is in flight: merged, applied when it lands
        if rec.pending is Decision.PAUSE and rec.inflight:
            # a result's decision is on its way: that is the decision point (pause_trial + NOOP); a
            # trial running ahead of its decisions is held at its next result so the pause lands there
            return [Effect(EffectKind.HOLD, rec.trial_id)]
        # STOP, or a PAUSE with no decision pending (asked about a trial computing in its own code,
        # as Ray's pause_trial): act now, so a trial that never reports again is still halted
        return self._act(rec)

    def saved(self, trial_id: str, run_id: int, checkpoint: CheckpointRef | None) -> list[Effect]:
        rec = self.trials.get(trial_id)
        if rec is None or rec.run_id != run_id or rec.status is not TrialStatus.RUNNING:
            return []
        if checkpoint is not None:
            rec.checkpoint = checkpoint
            if rec.exploit_save:
                rec.exploit_checkpoint, rec.exploit_save = checkpoint, False
            self.changed.add(trial_id)
        rec.saves_inflight = max(0, rec.saves_inflight - 1)
        if rec.phase is Phase.SAVING and rec.saves_inflight == 0:
            rec.phase = Phase.STOPPING
            return [Effect(EffectKind.STOP, trial_id)]
        return []

    def ended(self, trial_id: str, run_id: int, reason: EndReason, checkpoint: CheckpointRef | None = None,
              error: str | None = None, traceback: str | None = None) -> list[Effect]:
        rec = self.trials.get(trial_id)
        if rec is None or rec.run_id != run_id or rec.status is not TrialStatus.RUNNING:
            return []
        if checkpoint is not None:
            rec.checkpoint = checkpoint
        reusable = reason is not EndReason.FAILED
        out = [Effect(EffectKind.RELEASE, trial_id, flag=reusable)]
        pending = rec.pending
        rec.last_result = run_result(trial_id, rec.last_result, rec.started, rec.config)
        # A trainable whose last result said done has finished: a PAUSE (or clone) decided on that
        # result must not park it, or it is resumed past its own end (paused every result: forever).
        finished = bool(rec.last_result.get("done"))
        # A run failing while its exploit's pause is pending ends as that pause: Ray 2.60's PBT applies the
        # exploit (config, tag, checkpoint) and pauses the trial at once, dropping whatever its actor does
        # after (``_schedule_trial_stop``): the clone is applied whole, and no failure is counted.
        exploited = reason is EndReason.FAILED and rec.clone is not None and pending is Decision.PAUSE
        parked = (reason is EndReason.STOPPED or exploited) and pending is Decision.PAUSE and not finished
        if reason is EndReason.COMPLETED or (reason is EndReason.STOPPED and not parked):
            if reason is EndReason.STOPPED and pending is Decision.STOP and not finished:
                self.mark(rec, MarkKind.STOP)
            if ends_done(rec.last_result, reason is EndReason.COMPLETED, rec.stop_row):
                rec.last_result = {**rec.last_result, "done": True}
            self._transition(rec, TrialStatus.TERMINATED)
            return [*out, Effect(EffectKind.COMPLETE, trial_id)]
        if parked:  # a PAUSE took effect
            resume = rec.resume_requested
            self._transition(rec, TrialStatus.PAUSED)
            if rec.clone is None:
                self.mark(rec, MarkKind.PAUSE)
            elif not rec.clone_waiting:  # (a waiting clone is applied, or dropped, when its source's save lands)
                out += self.apply_clone(rec)  # marks EXPLOIT: this pause was the exploit's own
            if resume:
                self._transition(rec, TrialStatus.PENDING)
            return out
        rec.clone = None  # a clone decided on a done result is dropped, not half applied by the retry
        rec.num_failures += 1
        rec.error, rec.traceback = error, traceback
        if pending is Decision.STOP:  # failed while being stopped: the stop is what ended it
            if not finished:
                self.mark(rec, MarkKind.STOP)
            self._transition(rec, TrialStatus.TERMINATED)
            return [*out, Effect(EffectKind.COMPLETE, trial_id)]
        self.mark(rec, MarkKind.FAIL)
        if self.max_failures < 0 or rec.num_failures <= self.max_failures:
            self._transition(rec, TrialStatus.PENDING)
            return out
        self._transition(rec, TrialStatus.ERROR)
        return [*out, Effect(EffectKind.ERROR, trial_id)]

    def end_restored(self, trial_id: str, stopped: bool) -> list[Effect]:
        """A restored trial ends before running again: a result the saved state never saw stops it
        (``stopped``) or said it was done, as that result would have had the state seen it."""
        rec = self.trials.get(trial_id)
        if rec is None or rec.status is not TrialStatus.PENDING:
            return []
        if stopped:
            self.mark(rec, MarkKind.STOP)
        rec.last_result = {**rec.last_result, "done": True}
        self._transition(rec, TrialStatus.TERMINATED)
        return [Effect(EffectKind.COMPLETE, trial_id)]

    def exploit_source(self, source_id: str) -> CheckpointRef | None:
        """The checkpoint a clone of ``source_id`` restores: the one its scheduler's last save gave, as
        Ray 2.60's PBT clones a source's ``last_checkpoint``; the latest while that save is in flight."""
        src = self.trials[source_id]
        return src.checkpoint if src.exploit_save or src.exploit_checkpoint is None else src.exploit_checkpoint

    def apply_clone(self, rec: TrialRecord) -> list[Effect]:
        """Give ``rec`` the clone it holds: the source's config, tag and checkpoint (marked EXPLOIT)."""
        action = rec.clone
        if action is None:
            return []
        if action.new_config is not None:
            rec.config = dict(action.new_config)
        if action.experiment_tag is not None:  # Ray's PBT: the perturbed tag (with the new config)
            rec.tag = action.experiment_tag
        if rec.clone_checkpoint is not None:  # restored as Ray's: its iteration and time_total_s go on
            rec.checkpoint = rec.clone_checkpoint
        rec.extra_result = {"pbt_exploit": dict(action.info or {})}
        self.mark(rec, MarkKind.EXPLOIT, action.source_id)
        self.changed.add(rec.trial_id)
        return [Effect(EffectKind.CLONED, rec.trial_id)]

    def abort_all(self) -> list[Effect]:
        """Stop everything (driver abort): running trials get STOP, the rest end now.

        Records no marks, now or later: the scheduler stopped nothing, and a restore resumes
        these trials from the state frozen before the abort.
        """
        self.aborted = True
        out: list[Effect] = []
        for rec in self.trials.values():
            if rec.status is TrialStatus.RUNNING:
                rec.pending = Decision.STOP
                if rec.phase is not Phase.STOPPING:
                    rec.phase = Phase.STOPPING
                    out.append(Effect(EffectKind.STOP, rec.trial_id))
            elif not rec.status.is_finished:
                self._transition(rec, TrialStatus.TERMINATED)
        return out


__all__ = ["Effect", "EffectKind", "Phase", "TrialRecord", "TrialTable"]
