"""The experiment core: the controller's whole logic as events in, commands out (h11's ``Connection`` style).

``ExperimentCore.handle(event, now)`` takes a wire message or a shell notification (``actors._engine.signals``)
and returns the commands that carry out its consequences. It does no I/O of its own except through its storage
port (``actors._engine.store``), reads no clock (``now`` is handed in), starts no thread and knows no Thespian
address (actors are ``Handle`` numbers). The shell (``actors._shell.controller``) and the simulator
(``actors.testing.simulate``) drive the very same object. Its phase is one named state, ``ExperimentPhase``.

The core dispatches events and owns the phase and every change of it (start, abort, drain, finish, the state
snapshot). The work on the way is done by collaborators that own their state and reach back only through
``CoreOps`` (``port.py``), which the core implements: ``ResultPath`` (results.py), ``Scheduling``
(scheduling.py), ``TrialRuns`` (runs.py), ``Upkeep`` (upkeep.py) and ``RestoreSettling`` (restored.py).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

from actors._engine.clones import CloneWaits
from actors._engine.closing import final_writes, freeze_for_abort
from actors._engine.cluster import Cluster, RunLost
from actors._engine.feed import DriverFeed
from actors._engine.halt import Halts
from actors._engine.lifecycle import Effect, TrialRecord, TrialTable
from actors._engine.link import SchedulerLink
from actors._engine.members import Membership
from actors._engine.orders import TrialOrders
from actors._engine.pool import ActorPool
from actors._engine.port import ExperimentPhase
from actors._engine.quiet import changes_nothing, ticks_idle
from actors._engine.restored import RestoreSettling
from actors._engine.results import ResultPath
from actors._engine.runs import TrialRuns
from actors._engine.scheduling import SCHEDULER, Scheduling
from actors._engine.signals import (
    DRIVER,
    ActorGone,
    ActorKind,
    Command,
    DriverGone,
    Finish,
    Handle,
    MemberJoined,
    MemberLeft,
    ProcessesChecked,
    Retire,
    Send,
    ShutdownSystem,
    Spawn,
    Start,
    Tick,
    Undeliverable,
    Wake,
    WakeAfter,
    WatchMembers,
)
from actors._engine.spec import ExperimentSpec
from actors._engine.store import ExperimentStore
from actors._engine.suggest import TrialSource
from actors._engine.trial import TrialDescription, TrialStatus
from actors._engine.upkeep import Upkeep
from actors._engine.watch import Watchdog
from actors.messages import (
    AbortExperiment,
    CallbackAnswer,
    CheckpointRef,
    ClusterStatusRequest,
    DecidedResults,
    EndReason,
    EventType,
    ExperimentFinished,
    HookKind,
    MemberHeartbeat,
    ProbeChecked,
    SchedulerFailed,
    SchedulerReady,
    SchedulerReply,
    SchedulerSetup,
    TrialEnded,
    TrialOutput,
    TrialProcess,
    TrialResults,
    TrialSaved,
)

ABORT_SAVE_TIMEOUT_S = 5.0  # how long an abort waits for the scheduler's state before it ends without it
# fail_fast=True: how long a running trial may stay in its own code before its process is killed
STOP_ALL_GRACE_S = 2.0


class ExperimentCore:
    """One experiment's controller logic. Not thread-safe: one ``handle`` at a time."""

    def __init__(self, spec: ExperimentSpec, open_store: Callable[[ExperimentSpec], ExperimentStore],
                 explain: Callable[[BaseException], str | None] = lambda exc: None, controller_pid: int = 0) -> None:
        self.spec = spec
        self.open_store = open_store
        self.explain = explain
        self.controller_pid = controller_pid
        self.phase = ExperimentPhase.STARTING
        self.table = TrialTable(spec.max_failures)
        self.link = SchedulerLink()
        self.members = Membership(spec)
        self.pool = ActorPool(keep_idle=spec.max_concurrent if spec.reuse_actors else 0)
        self.feed = DriverFeed(spec.forward_events, spec.log_to_driver)
        self.watch = Watchdog(spec.trial_stop_grace_s)
        self.cluster = Cluster(spec, self.table, self.members, self.pool, self.watch, controller_pid)
        self.store: ExperimentStore | None = None
        self.source = TrialSource(spec)
        self.orders = TrialOrders(spec, self.table, self.pool, self.members, self.watch)
        self.halts = Halts()
        self.started_at = 0.0
        self.now = 0.0
        self.error: str | None = None
        self.abort_save: int | None = None  # ABORTING waits for this SchedulerCall(SAVE)'s answer
        self.abort_saved = False  # it came (its state was written with the abort's table)
        # the abort could not capture the table as it found it: the state written last stays the restore point
        self.keep_written_state = False
        self.deadline = 0.0  # ABORTING: end without the state; DRAINING: kill the stragglers
        self.clone_waits = CloneWaits(self.table)
        self.results = ResultPath(spec, self.table, self.link, self.orders, self.feed, self.source, self.clone_waits,
                                  self)
        self.scheduling = Scheduling(spec, self.table, self.link, self.orders, self.members, self.source,
                                     self.clone_waits, self.results, self.feed, self)
        self.runs = TrialRuns(spec, self.table, self.pool, self.halts, self.clone_waits, self.results, self.source,
                              self.orders, self.members, self.watch, self)
        self.restored = RestoreSettling(spec, self.table, self)
        self.upkeep = Upkeep(spec, self.table, self.members, self.cluster, self.watch, self.feed, self)
        # nothing a state holds can have changed since the last snapshot: the periodic write is skipped
        self.unchanged = False
        self.out: list[Command] = []
        self.handlers: dict[type, Callable[[Any], None]] = {
            Start: self._start_experiment, TrialResults: self._trial_message, TrialSaved: self._trial_message,
            TrialEnded: self._trial_message, TrialOutput: self._output, TrialProcess: self.upkeep.process,
            SchedulerReady: self._scheduler_ready, SchedulerReply: self.scheduling.reply,
            DecidedResults: self.results.decided_results,
            SchedulerFailed: lambda m: self._abort(f"the scheduler failed: {m.error}", scheduler_alive=False),
            CallbackAnswer: self.results.callback_answer, AbortExperiment: lambda m: self._abort(m.reason),
            ClusterStatusRequest: self._status, Wake: self._wake, ActorGone: self._actor_gone,
            Undeliverable: self._undeliverable, DriverGone: self._driver_gone, MemberJoined: self.upkeep.member_joined,
            MemberLeft: self.upkeep.member_left, MemberHeartbeat: self.upkeep.heartbeat,
            ProcessesChecked: self.upkeep.checked, ProbeChecked: self.upkeep.checked,
        }

    @property
    def finished(self) -> bool:
        return self.phase is ExperimentPhase.FINISHED

    def _state_current(self) -> bool:
        """The last state snapshot still holds everything: no event changed anything since, no trial
        ended unwritten, and no stopper (``TimeoutStopper`` keeps time in its state)."""
        return self.unchanged and not self.io.dirty and self.spec.stopper is None

    def _searcher(self, hook: str, trial_id: str, result: dict[str, Any] | None, *rest: Any,
                  flat: dict[str, Any] | None = None) -> bool:
        """Tell the search algorithm (user code) of a result, flattened as Ray Tune hands it over;
        False after ending the run naming it if it raised."""
        rec = self.table.trials.get(trial_id)
        problem = self.source.tell(hook, trial_id, result, *rest, tag=rec.tag if rec is not None else "",
                                   flat=flat)[1]
        if problem is not None:
            self._abort(problem)
        return problem is None

    def _searcher_call(self, method: str, args: tuple[Any, ...]) -> bool:
        problem = self.source.call(method, args)
        if problem is not None:
            self._abort(problem)
        return problem is None

    def tick_idle(self) -> bool:
        """Whether periodic ticks do nothing until another event arrives (the simulator skips them; a
        real run ticks anyway): ``quiet.ticks_idle``."""
        return (self.phase is ExperimentPhase.RUNNING and self.store is not None and self._state_current()
                and ticks_idle(self.spec, self.watch, self.feed, self.table))

    def handle(self, event: Any, now: float) -> list[Command]:
        """Take one event; the commands it leads to, in the order they must be carried out."""
        self.now = now
        handler = self.handlers.get(type(event))
        # a status query is answered to the end: the CLI must never wait on a finished controller
        if handler is not None and (not self.finished or isinstance(event, ClusterStatusRequest)):
            self.scheduling.note(event)
            try:  # a bug here must end the experiment with a message, never leave the driver waiting
                handler(event)
                if self.scheduling.ask_again():
                    self.fill()
            except Exception as exc:
                reason = self.explain(exc) or (f"internal error in the controller handling {type(event).__name__}: "
                                               f"{exc!r}\n{traceback.format_exc()}")
                self._fail(reason)
        if self.feed.events:
            self._emit(self.feed.flush_full())
        out, self.out = self.out, []
        if self.unchanged and not changes_nothing(event, out):
            self.unchanged = False
        return out

    def _fail(self, reason: str) -> None:
        """Abort; if an abort already waits for the scheduler's state (whose write just failed), end now."""
        if self.phase is ExperimentPhase.ABORTING:
            self._finish(f"{self.error}\n{reason}" if self.error else reason)
        else:
            self._abort(reason)

    def _send(self, to: Handle, msg: Any) -> None:
        if to != DRIVER or self.feed.driver_present:
            self.out.append(Send(to, msg))

    def _emit(self, commands: list[Command]) -> None:
        self.out.extend(commands)

    @property
    def io(self) -> ExperimentStore:
        assert self.store is not None, "the store is opened by Start"
        return self.store

    # ------------------------------------------------------------------ set-up
    def _start_experiment(self, start: Start) -> None:
        spec = self.spec
        self.started_at = self.now
        try:
            self.store, table, src = self.open_store(spec), self.table, self.source
            problem = src.restored(self.io.restore_into(table, spec.searcher), table.trials.values(), start, self.now)
        except Exception as exc:
            self._finish(self.explain(exc)
                         or f"controller could not start the experiment: {exc!r}\n{traceback.format_exc()}")
            return
        if problem is not None:
            self._finish(problem)
            return
        if spec.multi_host:
            self.out.append(WatchMembers())
        self.out.append(Spawn(self.pool.new_handle(), ActorKind.SCHEDULER))
        describe = TrialDescription(spec.trainable_name, spec.experiment_uri, spec.storage_is_local, spec.tag_paths,
                                    spec.resources_per_trial)
        self._send(SCHEDULER, SchedulerSetup(spec.scheduler, spec.metric, spec.mode, self.io.scheduler_state(),
                                             describe, search_properties=False))
        self.upkeep.check_time_limits()  # a time budget counts from here
        self.out.append(WakeAfter(spec.progress_interval_s, Tick.PERIODIC))

    def _scheduler_ready(self, msg: SchedulerReady) -> None:
        if self.phase is not ExperimentPhase.STARTING:
            return
        self.phase = ExperimentPhase.RUNNING
        self.link.ready(msg)
        self.orders.pace(msg)
        for rec in self.table.trials.values():
            if not rec.status.is_finished:
                self.call(HookKind.ADD, rec.trial_id)
        self.restored.settle()
        self.fill()

    # ------------------------------------------------------------------ trial messages
    def _trial_message(self, msg: TrialResults | TrialSaved | TrialEnded) -> None:
        for m in self.pool.in_order(msg.trial_id, msg.run_id, msg.seq, msg):
            if self.finished:
                return
            if isinstance(m, TrialResults):
                self.results.on_results(m)
            elif isinstance(m, TrialSaved):
                self.results.on_saved(m)
            else:
                self._emit(self.feed.run_ended(m.trial_id, m.run_id, m.output, m.outputs_sent))
                self.runs.on_ended(m)

    def _stop_every_trial(self) -> list[Effect]:
        self.source.close(for_good=True)
        return self.halts.stop_all(self.table)  # ended without hooks, as Ray (actors._engine.halt)

    def _event(self, kind: EventType, rec: TrialRecord, result: dict[str, Any] | None = None,
               checkpoint: str | None = None) -> None:
        if self.feed.forward_events:
            self._emit(self.feed.event(kind, rec.snapshot(), result, checkpoint))

    def _output(self, msg: TrialOutput) -> None:
        awaited = self.feed.awaiting_output
        self._emit(self.feed.output(msg))
        if awaited and not self.feed.awaiting_output:  # the end waited for these lines (DriverFeed.output_due)
            self.fill()

    def _actor_gone(self, msg: ActorGone) -> None:
        if msg.handle == SCHEDULER:
            self._abort("the scheduler actor exited unexpectedly", scheduler_alive=False)
        else:
            self.runs.actor_gone(msg)

    def _undeliverable(self, msg: Undeliverable) -> None:
        if not self.runs.undeliverable(msg) and msg.handle == SCHEDULER:
            self._abort(f"the scheduler actor could not handle {msg.message_type}", scheduler_alive=False)

    def _status(self, _: ClusterStatusRequest) -> None:
        self.out.append(self.cluster.status())

    def _driver_gone(self, _: DriverGone) -> None:
        self.feed.driver_present = False  # sending to a dead address would stall this actor's exit
        self._abort(f"the driver process {self.spec.driver_pid} died; the experiment can be resumed "
                    "with Tuner.restore()")

    # ------------------------------------------------------------------ the ticks
    def _wake(self, msg: Wake) -> None:
        if msg.tick is Tick.EVENTS:  # not the periodic tick: just send the driver its events
            self._emit(self.feed.tick())
            return
        interval = self.spec.progress_interval_s
        if self.phase is ExperimentPhase.ABORTING:
            if self.now > self.deadline:  # the scheduler never answered: end without its state
                self._finish(self.error)
            else:
                self.out.append(WakeAfter(interval, Tick.PERIODIC))
            return
        if self.phase is ExperimentPhase.DRAINING and self.now >= self.deadline:
            for rec in self.table.with_status(TrialStatus.RUNNING):
                self.upkeep.kill(rec.trial_id, rec.run_id)
        if not self.upkeep.tick(self.now - self.started_at):  # time limits, liveness, members (upkeep.py)
            return
        if self.feed.awaiting_output:  # the end may wait no longer for lines still on the way
            self.fill()
            if self.finished:
                return
        if self.phase is not ExperimentPhase.STARTING and self.io.state_due() and not self._state_current():
            self._save_state()
        self.out.append(WakeAfter(interval, Tick.PERIODIC))

    # ------------------------------------------------------------------ the end
    def _save_state(self) -> None:
        """Snapshot the table and ask the scheduler for its state: written together when it answers."""
        self.unchanged = True
        self.io.snapshot_table(self.table, self.spec.searcher, self.source.progress, self.call(HookKind.SAVE, None))

    def _abort(self, reason: str, scheduler_alive: bool = True) -> None:
        """End the experiment early, keeping it resumable.

        The table is frozen as it is *before* every trial is stopped, and the scheduler is asked for its
        state at that same moment; the run ends when that state is written (or after
        ``ABORT_SAVE_TIMEOUT_S`` without it), so ``Tuner.restore`` continues where it stopped.
        """
        if self.phase in (ExperimentPhase.ABORTING, ExperimentPhase.FINISHED):
            return
        self.error = reason
        self.source.close()
        tag = None
        if self.store is not None:
            ready = self.phase is not ExperimentPhase.STARTING
            tag = self.call(HookKind.SAVE, None) if ready and scheduler_alive else None
            unsaved = freeze_for_abort(self.io, self.table, self.spec.searcher, self.source.progress, tag, reason,
                                       self.explain)
            if unsaved is not None:  # the state written last stays the restore point (closing.py)
                tag, self.keep_written_state = None, True
                reason = self.error = unsaved
        self.phase = ExperimentPhase.ABORTING
        self.run(self.halts.abort_all(self.table))  # no hook hears of their end, as Ray
        if tag is None:
            self._finish(reason)
        else:
            self.abort_save = tag
            self.deadline = self.now + ABORT_SAVE_TIMEOUT_S

    def _drain(self) -> None:
        """``FailureConfig(fail_fast=True)``, as Ray: no new trials, the others halted (TERMINATED, no hook), the run
        ends normally (``fit()`` returns the grid); trials still in their code after ``STOP_ALL_GRACE_S`` are killed."""
        if self.phase is not ExperimentPhase.RUNNING:
            return
        self.phase = ExperimentPhase.DRAINING
        self.deadline = self.now + STOP_ALL_GRACE_S
        self.run(self._stop_every_trial())

    def _finish(self, error: str | None) -> None:
        if self.finished:
            return
        unpaired = self.phase is ExperimentPhase.ABORTING and not self.abort_saved
        self.phase = ExperimentPhase.FINISHED
        summaries: tuple[Any, ...] = ()
        if self.store is not None:  # each step on its own: the results are reported whatever failed
            if unpaired:  # (the abort's table snapshot without the scheduler's state of that moment)
                self.io.scheduler_state_lost()
            steps = [self.results.log_unlogged, lambda: self.io.close(final=True)]
            if not self.keep_written_state:
                steps.insert(1, lambda: self.io.snapshot_table(self.table, self.spec.searcher, self.source.progress))
            error = final_writes(steps, error, self.explain)
            summaries = tuple(self.io.summary(r) for r in self.table.trials.values())
        self._emit(self.feed.flush())
        self._send(DRIVER, ExperimentFinished(summaries, error, self.now - self.started_at,
                                              self.feed.event_seq, self.feed.output_batches))
        for handle in self.pool.all_handles():
            self.out.append(Retire(handle))
        if not self.feed.driver_present and self.spec.admin_port:
            self.out.append(ShutdownSystem(self.spec.admin_port))
        self.out.append(Finish(error))

    # ------------------------------------------------------------------ the port (CoreOps, port.py)
    def run(self, effects: list[Effect]) -> None:
        self.runs.run(effects)

    def call(self, kind: HookKind, trial_id: str | None, results: tuple[dict[str, Any], ...] = (),
             run_id: int = 0, batch_seq: int = 0) -> int | None:
        return self.scheduling.call(kind, trial_id, results, run_id, batch_seq)

    def reply(self, kind: HookKind, trial_id: str | None, run_id: int, batch_seq: int, msg: SchedulerReply) -> None:
        self.scheduling.on_reply(kind, trial_id, run_id, batch_seq, msg)

    def fill(self) -> None:
        self.scheduling.fill()

    def ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: CheckpointRef | None = None,
              error: str | None = None, tb: str | None = None) -> None:
        self.runs.ended(trial_id, run_id, reason, ckpt, error, tb)

    def host_lost(self, lost: RunLost) -> None:
        self.runs.host_lost(lost)

    def put(self, command: Command) -> None:
        self.out.append(command)

    def save_answered(self, seq: int) -> bool:
        if seq != self.abort_save:
            return False
        self.abort_saved = True
        self._finish(self.error)
        return True

    # the rest of the port: the core's own methods under the port's names
    emit, send, event, searcher, searcher_call, stop_every_trial = (_emit, _send, _event, _searcher, _searcher_call,
                                                                   _stop_every_trial)
    abort, finish, save_state, drain = _abort, _finish, _save_state, _drain


__all__ = ["ABORT_SAVE_TIMEOUT_S", "SCHEDULER", "STOP_ALL_GRACE_S", "ExperimentCore", "ExperimentPhase"]
