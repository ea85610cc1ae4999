"""ControllerActor: the supervisor that owns the trial table.

It creates trial actors (so it hears ``ChildActorExited`` when one dies), feeds
results to the scheduler actor, merges decisions through the pure
``TrialTable`` and carries out the effects the table returns.  All user objects
arrive cloudpickled in ``StartExperiment``.
"""

from __future__ import annotations

import datetime
import time
import traceback
from typing import Any

import cloudpickle
from thespian.actors import (
    ActorExitRequest,
    ActorTypeDispatcher,
    ChildActorExited,
    PoisonMessage,
    WakeupMessage,
)

from actors._driver.checks import stopper_failed
from actors._driver.naming import TrialNamer
from actors._driver.spec import ExperimentSpec
from actors._driver.system import pid_alive
from actors._engine.lifecycle import Effect, EffectKind, Phase, TrialTable
from actors._engine.sequencer import Sequencer
from actors._engine.trial import TrialStatus
from actors._shell.controller_cluster import ClusterMixin
from actors._shell.controller_end import EndMixin
from actors._shell.controller_gate import GateMixin
from actors._shell.controller_progress import EVENTS_TICK, ProgressMixin
from actors._shell.controller_sched import SchedulerLinkMixin
from actors._shell.controller_watch import WatchMixin
from actors._shell.experiment_io import ExperimentIO
from actors._shell.logger_host import LoggerFailed
from actors._shell.proc import die_with_parent, record_child_exits
from actors._shell.scheduler_actor import SchedulerActor
from actors.messages import (
    AbortExperiment,
    ActionKind,
    CheckpointRef,
    ClusterStatus,
    ClusterStatusRequest,
    EndReason,
    EventType,
    HookKind,
    SchedulerAction,
    SchedulerSetup,
    StartExperiment,
    TrialEnded,
    TrialEvent,
    TrialProceed,
    TrialResults,
    TrialSave,
    TrialSaved,
    TrialStop,
)
from actors.search._variant import pending_trials_wanted
from storage import StorageError

# How long an abort waits for the scheduler's state before ending without it.


class ControllerActor(EndMixin, GateMixin, SchedulerLinkMixin, ProgressMixin, ClusterMixin, WatchMixin,
                      ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        record_child_exits()
        self._watch_init()
        self.spec: ExperimentSpec | None = None
        self.driver: Any = None
        self.sched: Any = None
        self.ready = False
        self.finished = False
        self.window = 1
        self.seq = 0
        self.calls: dict[int, tuple[HookKind, str | None, int, int]] = {}
        self.choosing = False
        self.choose_version = -1
        self.actor_of: dict[str, Any] = {}
        self.idle: list[tuple[Any, str]] = []  # reusable trial actors and their member
        self.searcher_done = False
        self.suggested = 0
        self.started_at = time.time()
        self.error: str | None = None
        self.abort_save: int | None = None  # an abort waits for this SchedulerCall(SAVE)'s answer
        self.abort_deadline = 0.0
        self.orphaned = False  # the driver is dead: shut the whole system down at the end
        self.hooks: frozenset[HookKind] = frozenset(HookKind)
        self.inbox: dict[str, tuple[int, Sequencer[Any]]] = {}  # per trial run, restores send order
        self.replies: Sequencer[Any] = Sequencer()
        self.events: list[TrialEvent] = []  # for the driver's callbacks, sent in batches
        self.event_seq = 0
        self.stop_all_deadline: float | None = None  # fail_fast=True is stopping every trial
        self.held: dict[str, Any] = {}  # result batches waiting for the driver's callbacks (GateMixin)
        self.console_out: list[Any] = []  # TrialOutput for the driver's console (ProgressMixin)

    def receiveMessage(self, msg: Any, sender: Any) -> None:
        # A bug here must end the experiment with a message, never leave the driver waiting.
        try:
            super().receiveMessage(msg, sender)
        except LoggerFailed as exc:
            self._fail(f"{exc}; what was written before is kept")
        except StorageError as exc:  # the storage package already retried: a clear end, not a bug report
            self._fail(f"the controller could not write to storage: {exc}; what was written before is kept")
        except Exception as exc:
            self._fail(f"internal error in the controller handling {type(msg).__name__}: {exc!r}\n"
                       f"{traceback.format_exc()}")

    def _fail(self, reason: str) -> None:
        """Abort; if an abort already waits for the scheduler's state (whose write just failed), end now."""
        if self.abort_save is not None and not self.finished:
            self._finish(f"{self.error}\n{reason}" if self.error else reason)
        else:
            self._abort(reason)

    # ------------------------------------------------------------------ set-up
    def receiveMsg_StartExperiment(self, msg: StartExperiment, sender: Any) -> None:
        self.driver = sender
        try:
            spec: ExperimentSpec = cloudpickle.loads(msg.spec)
            self.spec = spec
            self._cluster_init()
            self.table = TrialTable(spec.max_failures)
            self.io = ExperimentIO(spec)
            self.trial_prefix = self.io.trial_prefix
            self.suggested = self.io.restore_into(self.table, spec.searcher)
            self.namer = TrialNamer(spec.trial_name_creator, spec.trial_dirname_creator, spec.trainable_name,
                                    self.table.trials.values())
            self.sched = self.createActor(SchedulerActor)
            self.send(self.sched, SchedulerSetup(spec.scheduler, spec.metric, spec.mode,
                                                 self.io.scheduler_state()))
        except Exception as exc:
            self._finish(f"controller could not start the experiment: {exc!r}\n{traceback.format_exc()}")
            return
        self._check_time_limits()  # a time budget counts from here
        self.wakeupAfter(datetime.timedelta(seconds=spec.progress_interval_s))

    # ------------------------------------------------------------------ trial messages
    def _in_order(self, msg: Any) -> list[Any]:
        entry = self.inbox.get(msg.trial_id)
        if entry is None or entry[0] != msg.run_id:
            return []  # from an earlier run of the trial: stale
        return entry[1].push(msg.seq, msg)

    def receiveMsg_TrialResults(self, msg: TrialResults, sender: Any) -> None:
        self._dispatch(msg)

    def receiveMsg_TrialSaved(self, msg: TrialSaved, sender: Any) -> None:
        self._dispatch(msg)

    def receiveMsg_TrialEnded(self, msg: TrialEnded, sender: Any) -> None:
        self._dispatch(msg)

    def _dispatch(self, msg: Any) -> None:
        for m in self._in_order(msg):
            if self.finished:
                return
            if isinstance(m, TrialResults):
                self._on_results(m)
            elif isinstance(m, TrialSaved):
                self._on_saved(m)
            else:
                if m.output is not None:
                    self.receiveMsg_TrialOutput(m.output, None)
                self._ended(m.trial_id, m.run_id, m.reason, m.checkpoint, m.error, m.traceback)
                if m.storage_failure and not self.finished:
                    # retrying cannot help (the storage package already retried transient errors),
                    # and every other trial would hit the same wall: stop, keeping what was written
                    self._abort(f"trial {m.trial_id} could not write its checkpoint to storage: "
                                f"{m.storage_failure}")

    def _on_results(self, msg: TrialResults) -> None:
        if not self.table.results(msg.trial_id, msg.run_id, msg.seq, msg.results, msg.checkpoint):
            return
        assert self.spec is not None
        rec = self.table.get(msg.trial_id)
        stopper = self.spec.stopper
        hits: list[bool] = [False] * len(msg.results)
        stop_all, stopper_error = False, ""
        if stopper is not None:
            try:  # user code: its failure is the user's error, reported as such (not "internal error")
                hits = [bool(stopper(msg.trial_id, r)) for r in msg.results]  # every result, no short-circuit
                stop_all = stopper.stop_all()
            except Exception as exc:
                stopper_error = stopper_failed(stopper, msg.trial_id, exc)
        for r, hit in zip(msg.results, hits):
            if hit:  # Ray Tune: the result a stopper fired on is the trial's last, done=True
                r["done"] = True
        err = self.io.on_results(rec, msg.results)
        if err or stopper_error:
            self._abort(err or stopper_error)
            return
        if self.spec.searcher is not None:
            for r, hit in zip(msg.results, hits):
                if not hit:  # Ray Tune tells the searcher only of results that do not stop the trial
                    self.spec.searcher.on_trial_result(msg.trial_id, r)
        if self.spec.forward_events:
            for r in msg.results:
                self._event(EventType.RESULT, rec, result=r)
        # batched: every checkpoint committed in the batch, not just the latest
        for c in (*msg.earlier_checkpoints, *((msg.checkpoint,) if msg.checkpoint else ())):
            self._checkpointed(rec, c)
        effects: list[Effect] = []
        if stopper is not None:
            if any(hits):
                effects += self.table.request(SchedulerAction(ActionKind.STOP, msg.trial_id))
            if stop_all:
                self.searcher_done = True
                for rec in self.table.trials.values():
                    effects += self.table.request(SchedulerAction(ActionKind.STOP, rec.trial_id))
        if self._gated():  # a driver callback may ask for a checkpoint at this result: wait for it
            self._hold(msg)
        else:
            self._call(HookKind.RESULT, msg.trial_id, msg.results, msg.run_id, msg.seq)
        self._run(effects)

    def _on_saved(self, msg: TrialSaved) -> None:
        if msg.checkpoint is not None and msg.trial_id in self.table.trials:
            self._checkpointed(self.table.get(msg.trial_id), msg.checkpoint)
        self._run(self.table.saved(msg.trial_id, msg.run_id, msg.checkpoint))
        self._saved_release(msg.trial_id)

    def _checkpointed(self, rec: Any, ckpt: CheckpointRef) -> None:
        """A checkpoint was committed: retention and numbering count it, callbacks hear of it."""
        self.io.on_checkpoint(rec, ckpt)
        self._event(EventType.CHECKPOINT, rec, checkpoint=self.io.ctx.uri(ckpt.path))

    def _ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: Any = None,
               error: str | None = None, tb: str | None = None) -> None:
        rec = self.table.trials.get(trial_id)
        if rec is None:
            return
        known = rec.checkpoint.path if rec.checkpoint is not None else None
        effects = self.table.ended(trial_id, run_id, reason, ckpt, error, tb)
        if effects:
            self.inbox.pop(trial_id, None)  # this run is over: no more messages are expected from it
            self.held.pop(trial_id, None)  # a stop ended it: its held result needs no decision
            if ckpt is not None and ckpt.path != known:  # saved at the end: the next run must not reuse its index
                self._checkpointed(rec, ckpt)
        if effects and reason is EndReason.FAILED:
            self.io.on_error(rec, error or "", tb or "")
            self._recover(rec)
        self._run(effects)
        if effects:  # paused, finished, failed or retried: write it down soon, not only every state_interval_s
            self.io.dirty = True
            if self.ready and self.abort_save is None and self.io.state_due():
                self._save_state()
        if rec.status.is_finished and self.spec is not None and self.spec.searcher is not None:
            self.spec.searcher.on_trial_complete(trial_id, dict(rec.last_result),
                                                 rec.status is TrialStatus.ERROR)
        if rec.status is TrialStatus.ERROR and self.spec is not None and self.spec.fail_fast:
            if self.spec.fail_fast_raise:  # fail_fast="raise": fit() raises this error
                self._abort(f"trial {trial_id} failed and fail_fast is set: {error}")
                return
            self._stop_all()  # fail_fast=True: stop the rest, fit() returns the results (Ray Tune)
        self._fill()

    def _recover(self, rec: Any) -> None:
        """Checkpoints the failed run committed but never sent (``ExperimentIO.recover``): callbacks
        hear of them and of the results they carry, retention counts them."""
        got = self.io.recover(rec)
        for row in got.rows if got else ():
            self._event(EventType.RESULT, rec, result=row)
        for c in got.usable if got else ():
            self._checkpointed(rec, c)

    def receiveMsg_ChildActorExited(self, msg: ChildActorExited, sender: Any) -> None:
        addr = msg.childAddress
        if addr == self.sched and not self.finished:
            self._abort("the scheduler actor exited unexpectedly", scheduler_alive=False)
            return
        self.idle = [(a, m) for a, m in self.idle if a != addr]
        trial_id = self._trial_of(addr)
        if trial_id is None:
            return
        del self.actor_of[trial_id]
        rec = self.table.get(trial_id)
        if rec.status is TrialStatus.RUNNING:
            self._ended(trial_id, rec.run_id, EndReason.FAILED, None, self._death(addr),
                        "ChildActorExited: the process running this trial is gone\n")

    def _trial_of(self, addr: Any) -> str | None:
        # Addresses are unhashable and a fresh one compares equal to its resolved form
        # only through ==, so look them up by equality.
        return next((t for t, a in self.actor_of.items() if a == addr), None)

    def receiveMsg_PoisonMessage(self, msg: PoisonMessage, sender: Any) -> None:
        trial_id = self._trial_of(sender)
        if trial_id is not None:
            rec = self.table.get(trial_id)
            self._ended(trial_id, rec.run_id, EndReason.FAILED, None,
                        f"the trial actor could not handle {type(msg.poisonMessage).__name__}", "")
        elif sender == self.sched:
            self._abort(f"the scheduler actor could not handle {type(msg.poisonMessage).__name__}",
                        scheduler_alive=False)

    def receiveMsg_ClusterStatusRequest(self, msg: ClusterStatusRequest, sender: Any) -> None:
        if self.spec is None:  # created just now by the status query itself: no experiment runs here
            self.send(sender, ClusterStatus(None, (), {}))
            self.send(self.myAddress, ActorExitRequest())
            return
        rows = tuple(dict(r, lost=r["member"] in self.lost) for r in self.placement.rows())
        counts: dict[str, int] = {}
        for rec in self.table.trials.values():
            counts[rec.status.value] = counts.get(rec.status.value, 0) + 1
        self.send(sender, ClusterStatus(self.spec.name, rows, counts))

    def receiveMsg_AbortExperiment(self, msg: AbortExperiment, sender: Any) -> None:
        self._abort(msg.reason)

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        if self.finished or self.spec is None:
            return
        if msg.payload == EVENTS_TICK:  # not the periodic tick: just send the driver its events
            self.events_tick = False
            self._flush_events()
            return
        if self.spec.driver_pid and not pid_alive(self.spec.driver_pid):
            # The driver was killed (SIGKILL): nobody will shut this system down.
            self.driver = None  # sending to a dead address would stall this actor's exit
            self.orphaned = True
            self._abort(f"the driver process {self.spec.driver_pid} died; the experiment can be resumed "
                        "with Tuner.restore()")
            return
        if self.abort_save is not None:
            if time.monotonic() > self.abort_deadline:  # the scheduler never answered: end without it
                self._finish(self.error)
            else:
                self.wakeupAfter(datetime.timedelta(seconds=self.spec.progress_interval_s))
            return
        self._end_stragglers()
        self._watch_tick()
        self.send(self.driver, self._progress())
        self._flush_events()
        if self.spec.multi_host:
            self._check_members()
            self._check_placeable()
        if self.ready and self.io.state_due():
            self._save_state()
        self.wakeupAfter(datetime.timedelta(seconds=self.spec.progress_interval_s))

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass

    # ------------------------------------------------------------------ effects
    def _run(self, effects: list[Effect]) -> None:
        assert self.spec is not None
        for e in effects:
            rec = self.table.get(e.trial_id)
            actor = self.actor_of.get(e.trial_id)
            if e.kind is EffectKind.START:
                self._start(e.trial_id)
                self._watch_started(e.trial_id)
            elif e.kind is EffectKind.PROCEED and actor is not None:
                self.send(actor, TrialProceed(e.trial_id, rec.run_id, e.seq))
            elif e.kind is EffectKind.SAVE and actor is not None:
                self.send(actor, TrialSave(e.trial_id, rec.run_id))
                if rec.phase is Phase.SAVING:  # saving to pause: it must halt within the grace period
                    self._arm_halt(e.trial_id)
            elif e.kind is EffectKind.STOP and actor is not None:
                self.send(actor, TrialStop(e.trial_id, rec.run_id, self._save_at_end()))
                self._arm_halt(e.trial_id)
            elif e.kind is EffectKind.RELEASE:
                self._release(e.trial_id, e.flag)
            elif e.kind in (EffectKind.COMPLETE, EffectKind.ERROR, EffectKind.REMOVE):
                self.io.on_finished(rec)
                self._event(EventType.ERROR if e.kind is EffectKind.ERROR else EventType.COMPLETE, rec)
                hook = {EffectKind.COMPLETE: HookKind.COMPLETE, EffectKind.ERROR: HookKind.ERROR,
                        EffectKind.REMOVE: HookKind.REMOVE}[e.kind]
                self._call(hook, e.trial_id, (dict(rec.last_result),))

    def _save_at_end(self) -> bool:
        return bool(self.spec and self.spec.checkpoint_at_end)

    # ------------------------------------------------------------------ scheduling loop
    def _fill(self) -> None:
        """Start trials while resources allow; finish when everything is done."""
        if not self.ready or self.finished or self.abort_save is not None:
            return
        assert self.spec is not None
        self._top_up()
        free = min(self._free_slots(self._need()), self.spec.max_concurrent - self.table.running)
        waiting = self.table.count(TrialStatus.PENDING) + self.table.count(TrialStatus.PAUSED)
        if free > 0 and waiting and not self.choosing:
            self.choosing = True
            self.choose_version = self.table.version
            self._call(HookKind.CHOOSE, None)
            return
        if self.searcher_done and self.table.all_finished() and not self.calls:
            self._finish(None)
        elif (not waiting and self.table.running == 0 and not self.calls and not self.searcher_done):
            self._abort("the search algorithm suggested no configuration while no trial was running; "
                        "it would wait forever (check its max_concurrent / suggest())")

    def _top_up(self) -> None:
        """Ask the searcher for new trials while fewer than it should have are pending (Ray's rule)."""
        assert self.spec is not None
        s = self.spec
        while not self.searcher_done:
            pending = self.table.count(TrialStatus.PENDING)
            room = min(self._free_slots(self._need()), s.max_concurrent - self.table.running)
            if pending >= pending_trials_wanted(s.searcher, room, s.total_resources.get("cpu", 1.0)):
                return
            if self.suggested >= s.num_samples and s.num_samples > 0:
                self.searcher_done = True
                return
            trial_id = f"{self.trial_prefix}_{self.suggested:05d}"
            config = s.searcher.suggest(trial_id)
            if config is None:
                return
            if _is_finished(config):
                self.searcher_done = True
                return
            self.suggested += 1
            rec = self.table.add(trial_id, config)
            problem = self.namer.apply(rec)
            if problem is not None:
                self._abort(problem)
                return
            self.io.on_add(rec)
            self._call(HookKind.ADD, trial_id)


def _is_finished(config: Any) -> bool:
    return not isinstance(config, dict)


__all__ = ["ControllerActor"]
