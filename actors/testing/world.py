"""A seeded discrete-event world around one experiment core: simulated transport, actors and clock.

The core's commands are carried out here instead of by Thespian: every ``Send`` arrives after a
latency drawn from the seeded generator (so messages, even two in a row from one sender, may
overtake each other, as on Thespian's TCP transport), ``WakeAfter`` sets a timer, ``Spawn`` makes a
``SimTrial``, a scheduler (the real ``SchedulerEndpoint``) or a member probe. ``Faults`` decide what
goes wrong. The run is over when the core emits ``Finish``; it *hangs* when nothing but timers
is left for ``idle_limit_s`` simulated seconds, no event is left at all, or a cap is exceeded.

Beside it: the event queue (``_sim_events``), the seeded fault draws (``faults.FaultDice``) and the
records of actors and members (``_sim_actors``); this module is the loop and what each event does.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable
from typing import Any

from actors._engine.scheduler_endpoint import decides_every_result
from actors._engine.signals import (
    DRIVER,
    ActorGone,
    ActorKind,
    CheckProcesses,
    Finish,
    Handle,
    KillProcess,
    MemberJoined,
    MemberLeft,
    ProcessesChecked,
    Reply,
    Retire,
    Send,
    ShutdownSystem,
    Spawn,
    Tick,
    Undeliverable,
    Wake,
    WakeAfter,
    WatchMembers,
)
from actors.messages import (
    AbortExperiment,
    CallbackAnswer,
    DecidedResults,
    DecideResult,
    ExperimentFinished,
    MemberHeartbeat,
    ProbeCheck,
    ProbeChecked,
    ProbeKill,
    ProbeStart,
    RunTrial,
    SchedulerCall,
    SchedulerFailed,
    SchedulerReady,
    SchedulerSetup,
    TrialEnded,
    TrialEvents,
    TrialResults,
    TrialSaved,
)
from actors.testing._sim_actors import SchedulerAsk, SimActor, SimMember
from actors.testing._sim_choices import ChoiceWatch
from actors.testing._sim_events import EventKind, EventQueue
from actors.testing.faults import FaultDice, Faults, FaultyEndpoint, faulty_commits
from actors.testing.sim_store import commit_empty
from actors.testing.sim_trial import Commit, Curve, DirectAnswer, SimTrial

SIGKILL_CODE = -9
FIRST_PID = 10_000
_NUMBERED = frozenset({TrialResults, TrialSaved, TrialEnded})  # a trial's messages the core releases by number


class SimWorld:
    """Runs ``core`` (anything with ``handle(event, now) -> commands``) to its end in simulated time."""

    def __init__(self, core: Any, curve: Curve, *, seed: int = 0, faults: Faults | None = None,
                 max_iterations: int | None = None, members: dict[str, dict[str, float]] | None = None,
                 max_deliveries: int = 1_000_000, max_time_s: float = 1e7, idle_limit_s: float = 120.0,
                 commit: Commit = commit_empty, direct: bool = False, skip_idle_ticks: bool = True,
                 callback_checkpoint_p: float | None = None, checkpoints: bool = True) -> None:
        self.core = core
        self.checkpoints = checkpoints  # False: trials are function trainables that never checkpoint
        # the driver's callbacks answer each held result batch, asking a checkpoint with this chance
        self.callback_checkpoint_p = callback_checkpoint_p
        self.skip_idle_ticks = skip_idle_ticks
        # the scheduler offers direct decisions where the real actor would (a multi-process run)
        self.direct = direct
        self.scheduler: Handle | None = None
        self.curve = curve
        self.faults = faults or Faults()
        dice = FaultDice(self.faults, seed)
        self.rng = dice.rng  # (the store's faults draw from it too)
        # bound once: called for every message
        self._latency: Callable[[], float] = dice.latency
        self._chance: Callable[[float], bool] = dice.chance
        self._crash = dice.crash
        self._commit_checkpoint: Commit = faulty_commits(dice, commit)
        self.max_iterations = max_iterations
        self.members = {m: SimMember(dict(r)) for m, r in (members or {}).items()}
        self.max_deliveries = max_deliveries
        self.max_time_s = max_time_s
        self.idle_limit_s = idle_limit_s
        self.now = 0.0
        self.deliveries = 0  # messages and notifications handed to the core or an actor
        self.copies = 0  # copies of trials' numbered messages queued for the core (Faults.duplicate_p)
        self.lost = 0  # trials' numbered messages lost on their first send (Faults.lost_p)
        self.resent = 0  # trials' numbered messages sent again by their actor's periodic look
        self.choices = ChoiceWatch()  # the core's CHOOSE calls, and those repeated with nothing new
        self.hung = False
        self.hang_reason: str | None = None
        self.finish: Finish | None = None
        self.finished: ExperimentFinished | None = None
        self.driver: list[Any] = []  # everything the core sent the driver, in order
        self.actors: dict[Handle, SimActor] = {}
        self.pids: dict[int, Handle] = {}
        self.dead: dict[int, int | None] = {}  # pid -> exit status of trial processes that are gone
        self.trial_numbers: dict[str, int] = {}
        self.spawned: list[tuple[float, Spawn]] = []  # (when, what): where the core placed its actors
        self.events = EventQueue()
        self._at = self.events.push
        self.last_activity = 0.0
        for at, member, back in self.faults.member_loss:
            self._at(at, EventKind.MEMBER, member, back)
        if self.faults.abort_at_s is not None:
            self._at(self.faults.abort_at_s, EventKind.CORE, AbortExperiment("simulated abort (Faults.abort_at_s)"))

    # ------------------------------------------------------------------ the loop
    def run(self, start: Any) -> None:
        self._core(start)
        events = self.events
        queue, pop = events.heap, heapq.heappop
        core, actor, step = EventKind.CORE, EventKind.ACTOR, EventKind.STEP
        while self.finish is None:
            if not queue:
                self._hang("no event left and the experiment has not finished")
                return
            at, _, kind, a, b, progress = pop(queue)
            if progress:
                events.busy -= 1
            elif events.busy == 0 and at - self.last_activity > self.idle_limit_s:
                self._hang(f"only timers for {at - self.last_activity:.0f} simulated seconds")
                return
            if at > self.now:
                self.now = at
            if self.now > self.max_time_s or self.deliveries > self.max_deliveries:
                self._hang(f"cap exceeded ({self.deliveries} deliveries, {self.now:.0f} simulated seconds)")
                return
            if progress:
                self.last_activity = self.now
            if kind is core:
                self._core(a)
            elif kind is actor:
                self._deliver(a, b)
            elif kind is step:
                self._step(a, b)
            elif kind is EventKind.LIVENESS:
                self._liveness(a)
            elif kind is EventKind.BEAT:
                self._beat(a)
            else:
                self._member_event(a, b)

    def _dead_among(self, procs: tuple[tuple[str, int, int], ...]) -> tuple[tuple[str, int, int | None], ...]:
        """A liveness check's answer (``actors._process.children.gone_processes`` in a real run): the processes
        among ``procs`` that are dead, with their exit status."""
        return tuple((t, r, self.dead[pid]) for t, r, pid in procs if pid in self.dead)

    def _hang(self, reason: str) -> None:
        self.hung = True
        self.hang_reason = reason

    def _to_core(self, event: Any) -> None:
        self._at(self.now + self._latency(), EventKind.CORE, event)

    # ------------------------------------------------------------------ the core and its commands
    def _core(self, event: Any) -> None:
        self.deliveries += 1
        self.choices.event(event)
        out = self.core.handle(event, self.now)
        if not out:
            return
        last = out[-1]
        if self.skip_idle_ticks and type(last) is WakeAfter and last.tick is Tick.PERIODIC:
            for cmd in out[:-1]:
                self._command(cmd)
            # while the core's ticks are idle, the next one comes with the next event (EventQueue.next_tick)
            tick_at = self.events.next_tick(self.now + last.seconds, last.seconds, lambda: self.core.tick_idle())
            self._at(tick_at, EventKind.CORE, Wake(last.tick))
        else:
            for cmd in out:
                self._command(cmd)

    def _command(self, cmd: Any) -> None:
        if isinstance(cmd, Send):
            to = cmd.to
            if to == DRIVER:
                self.driver.append(cmd.msg)
                if isinstance(cmd.msg, ExperimentFinished):
                    self.finished = cmd.msg
                elif self.callback_checkpoint_p is not None and isinstance(cmd.msg, TrialEvents):
                    self._answer(cmd.msg)
                return
            self.choices.sent(cmd.msg)
            actor = self.actors.get(to)
            if actor is not None and actor.alive:
                if actor.scheduler is None and self._chance(self.faults.poison_p):
                    self._to_core(Undeliverable(to, type(cmd.msg).__name__))
                else:
                    self._at(self.now + self._latency(), EventKind.ACTOR, to, cmd.msg)
        elif isinstance(cmd, WakeAfter):
            self._at(self.now + cmd.seconds, EventKind.CORE, Wake(cmd.tick))
        elif isinstance(cmd, Spawn):
            self._spawn(cmd)
        elif isinstance(cmd, Retire):
            actor = self.actors.get(cmd.handle)
            if actor is not None and actor.alive:
                self._gone(cmd.handle, 0, notice=True)
        elif isinstance(cmd, KillProcess):
            handle = self.pids.get(cmd.pid)
            if handle is not None and self.actors[handle].alive:
                self._gone(handle, SIGKILL_CODE)
        elif isinstance(cmd, CheckProcesses):
            gone = self._dead_among(cmd.procs)
            if gone or cmd.always_answer:
                self._at(self.now, EventKind.CORE, ProcessesChecked(gone))  # the shell reads /proc at once
        elif isinstance(cmd, WatchMembers):
            for member_id in self.members:
                self._joined(member_id)
        elif isinstance(cmd, Finish):
            self.finish = cmd
        elif isinstance(cmd, (Reply, ShutdownSystem)):
            self.driver.append(cmd)
        else:
            raise TypeError(f"the simulator does not know the command {cmd!r}")

    def _answer(self, msg: TrialEvents) -> None:
        """The driver's ``CallbackDispatcher``: a held batch's last result answered after its callbacks ran,
        one of which set ``should_checkpoint`` (Ray's rule) with ``callback_checkpoint_p``."""
        p = self.callback_checkpoint_p or 0.0
        for ev in msg.events:
            if ev.answer_batch:
                self._to_core(CallbackAnswer(ev.trial.trial_id, ev.answer_run, ev.answer_batch, self._chance(p)))

    def _spawn(self, cmd: Spawn) -> None:
        self.spawned.append((self.now, cmd))
        actor = SimActor(cmd.kind, cmd.member)
        if cmd.kind is ActorKind.TRIAL:
            pid = FIRST_PID + cmd.handle
            actor.trial = SimTrial(self.curve, pid, self.max_iterations, commit=self._commit_checkpoint,
                                   saves=self.checkpoints)
            self.pids[pid] = cmd.handle
        elif cmd.kind is ActorKind.SCHEDULER:
            self.scheduler = cmd.handle
            actor.scheduler = FaultyEndpoint(lambda: self._chance(self.faults.scheduler_error_p))
        member = self.members.get(cmd.member or "")
        if member is not None:
            member.actors.add(cmd.handle)
            actor.alive = member.up  # placed on a member that is gone: never runs, no notice
        self.actors[cmd.handle] = actor

    def _gone(self, handle: Handle, code: int | None, notice: bool | None = None) -> None:
        """An actor's process ended; its parent hears ActorGone unless the notice is lost."""
        actor = self.actors[handle]
        actor.alive = False
        if actor.trial is not None:
            actor.trial.die()
            self.dead[actor.trial.pid] = code
        if notice or (notice is None and not self._chance(self.faults.lost_exit_p)):
            self._to_core(ActorGone(handle, code))

    # ------------------------------------------------------------------ actors
    def _deliver(self, handle: Handle, msg: Any) -> None:
        actor = self.actors[handle]
        if not actor.alive:
            return  # a dead letter
        self.deliveries += 1
        if actor.trial is not None:
            trial = actor.trial
            if isinstance(msg, RunTrial) and msg.trial_id not in self.trial_numbers:
                self.trial_numbers[msg.trial_id] = len(self.trial_numbers)
            token = trial.step_token
            self._trial_out(handle, trial.receive(msg, self.now))
            self._schedule_step(handle, trial, token)
            if not trial.liveness_armed and isinstance(msg, RunTrial):  # (TrialActor._arm_liveness)
                trial.liveness_armed = True
                self._at(self.now + trial.outbox.every_s, EventKind.LIVENESS, handle)
        elif actor.scheduler is not None:
            if isinstance(msg, SchedulerSetup):
                ready = actor.scheduler.setup(msg)
                if self.direct and isinstance(ready, SchedulerReady) and decides_every_result(ready):
                    ready = dataclasses.replace(ready, direct="simulated")
                self._to_core(ready)
            elif isinstance(msg, SchedulerCall):
                for answer in actor.scheduler.call(msg):
                    self._to_core(answer)
            elif isinstance(msg, SchedulerAsk):  # SchedulerActor.receiveMsg_WatchMessage, one request at a time
                decided, reply = actor.scheduler.decide(msg.msg)
                self._at(self.now + self._latency(), EventKind.ACTOR, msg.trial,
                         DirectAnswer(msg.msg.trial_id, msg.msg.run_id, decided))
                if reply is not None:  # (None: a run the controller has already ended)
                    self._to_core(reply if isinstance(reply, SchedulerFailed) else DecidedResults((reply,)))
        elif isinstance(msg, ProbeStart):
            actor.probe = msg
            self._at(self.now, EventKind.BEAT, handle)
        elif isinstance(msg, ProbeCheck):  # the probe reads its machine's /proc: a dead process is gone there
            if actor.probe is not None:  # (before its ProbeStart the real probe knows no controller to answer)
                self._to_core(ProbeChecked(actor.probe.member_id, self._dead_among(msg.procs)))
        elif isinstance(msg, ProbeKill):
            target = self.pids.get(msg.pid)
            if target is not None and self.actors[target].alive:
                self._gone(target, SIGKILL_CODE)

    def _schedule_step(self, handle: Handle, trial: SimTrial, token: int) -> None:
        if trial.step_at is not None and trial.step_token != token:
            self._at(trial.step_at, EventKind.STEP, handle, trial.step_token)

    def _step(self, handle: Handle, token: int) -> None:
        actor = self.actors[handle]
        trial = actor.trial
        if trial is None or not actor.alive or trial.step_token != token:
            return
        crash = self._crash((self.trial_numbers.get(trial.trial_id, -1), trial.iteration + 1))
        self._trial_out(handle, trial.step_done(self.now, crash))
        if trial.dead:
            self._gone(handle, -11)  # a segfault
        else:
            self._schedule_step(handle, trial, token)

    def _liveness(self, handle: Handle) -> None:
        """A trial actor's periodic look: what its outbox sends again goes to the core as any message."""
        actor = self.actors[handle]
        trial = actor.trial
        if trial is None or not actor.alive:
            return
        again, armed = trial.liveness(self.now)
        for msg in again:
            self.resent += 1
            self._to_core(msg)
        if armed:
            self._at(self.now + trial.outbox.every_s, EventKind.LIVENESS, handle)

    def _trial_out(self, handle: Handle, outs: list[Any]) -> None:
        """A trial's messages: to the core, except a decision asked of the scheduler directly. Each
        numbered one is kept in the trial's outbox until acknowledged, and may be lost (``Faults.lost_p``)."""
        trial = self.actors[handle].trial
        for out in outs:
            if isinstance(out, DecideResult):
                sched = self.actors.get(self.scheduler) if self.scheduler is not None else None
                if sched is not None and sched.alive:  # (else the worker waits until it is stopped)
                    self._at(self.now + self._latency(), EventKind.ACTOR, self.scheduler, SchedulerAsk(handle, out))
            elif type(out) in _NUMBERED:
                assert trial is not None
                trial.outbox.sent(out.seq, out, self.now)
                if self._chance(self.faults.lost_p):  # (no draw at 0)
                    self.lost += 1  # lost on the way: the actor's look sends it again
                    continue
                self._to_core(out)
                if self._chance(self.faults.duplicate_p):  # (no draw at 0)
                    self.copies += 1
                    self._at(self.now + self.faults.duplicate_after_s + self._latency(), EventKind.CORE, out)
            else:
                self._to_core(out)

    def _beat(self, handle: Handle) -> None:
        actor = self.actors[handle]
        if not actor.alive or actor.probe is None:
            return
        actor.beat += 1
        self._to_core(MemberHeartbeat(actor.probe.member_id, actor.beat))
        self._at(self.now + actor.probe.interval_s, EventKind.BEAT, handle)

    # ------------------------------------------------------------------ members (multi-host)
    def _joined(self, member_id: str) -> None:
        m = self.members[member_id]
        self._to_core(MemberJoined(member_id, dict(m.resources), (member_id, m.incarnation)))

    def _member_event(self, member_id: str, back_after_s: float | None) -> None:
        m = self.members.get(member_id)
        if m is None:
            raise ValueError(f"Faults(member_loss=...) names member {member_id!r}, which the simulation does "
                             f"not have (members: {sorted(self.members)})")
        if back_after_s is None:  # it comes back: a new incarnation registers
            m.up = True
            m.incarnation += 1
            self._joined(member_id)
            return
        if not m.up:
            return
        m.up = False
        for handle in m.actors:
            actor = self.actors[handle]
            if actor.alive:  # silently: Thespian reports a lost member's actors late or never
                actor.alive = False
                if actor.trial is not None:
                    actor.trial.die()
        m.actors.clear()
        if self._chance(self.faults.member_left_p):
            self._to_core(MemberLeft(member_id, (member_id, m.incarnation)))
        if back_after_s >= 0:
            self._at(self.now + back_after_s, EventKind.MEMBER, member_id, None)


__all__ = ["SimWorld"]
