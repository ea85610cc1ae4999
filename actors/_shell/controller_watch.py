"""Trials that die or will not stop: how the controller notices, and how it ends them.

Mixed into ``ControllerActor``.  A trial's process can die in ways Python never sees (a segfault
in a C extension, ``os._exit``, the OOM killer's SIGKILL): Thespian tells the controller with
``ChildActorExited``, and :func:`actors._shell.proc.record_child_exits` keeps the exit status so the
error says how it died.  A trainable can also block without ever reaching ``report()`` (a long
C call, a sleep): a stop (or pause) is cooperative first, and after ``RunConfig(trial_stop_grace_s)``
its process is killed and the trial ends as the stop asked (TERMINATED, or PAUSED at its latest
checkpoint).  Time limits that need no report are checked here on the controller's own clock,
about once a second: the stopper's ``stop_all`` (``TimeoutStopper``, ``TuneConfig(time_budget_s)``)
and a per-trial ``stop={"time_total_s": T}``.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import TYPE_CHECKING, Any

from thespian.actors import ActorExitRequest

from actors._driver.checks import stopper_failed
from actors._engine.lifecycle import Effect, Phase
from actors._engine.trial import TrialStatus
from actors._shell.proc import describe_exit, exit_status_of, process_exit
from actors.messages import ActionKind, EndReason, ProbeKill, SchedulerAction, TrialProcess

log = logging.getLogger("audition")


class WatchMixin:
    """Uses the controller's ``spec``, ``table``, ``actor_of``, ``placement`` and ``probes``."""

    spec: Any
    table: Any
    actor_of: dict[str, Any]
    searcher_done: bool

    if TYPE_CHECKING:  # provided by the Thespian actor and the other mixins; never shadow them at run time
        placement: Any
        probes: dict[str, Any]
        leader_id: str

        def send(self, target: Any, msg: Any) -> None: ...

        def _run(self, effects: list[Effect]) -> None: ...

        def _abort(self, reason: str, scheduler_alive: bool = True) -> None: ...

        def _ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: Any = None,
                   error: str | None = None, tb: str | None = None) -> None: ...

    def _watch_init(self) -> None:
        self.procs: dict[str, tuple[int, int]] = {}  # trial -> (run_id, pid) of the process running it
        self.halt_by: dict[str, tuple[int, float]] = {}  # trial -> (run_id, monotonic kill deadline)
        self.run_clock: dict[str, tuple[int, float, float]] = {}  # trial -> (run_id, started, time_total_s)
        self.gone: dict[str, int] = {}  # trial -> run_id whose local process was seen dead at the last tick

    # ------------------------------------------------------------------ processes
    def receiveMsg_TrialProcess(self, msg: TrialProcess, sender: Any) -> None:
        self.procs[msg.trial_id] = (msg.run_id, msg.pid)

    def _death(self, addr: Any, code: int | None = None) -> str:
        """How the trial process at ``addr`` ended, for its error message."""
        code = exit_status_of(addr) if code is None else code
        if code is None:
            return "the trial's actor process exited unexpectedly (killed, or crashed outside Python)"
        how = describe_exit(code)
        if code == -signal.SIGKILL:
            how += ": the kernel's out-of-memory killer does this when memory runs out"
        return f"the trial's process died ({how})"

    def _watch_started(self, trial_id: str) -> None:
        """A run started (RunTrial sent): its clock starts now, any old deadline is void."""
        rec = self.table.get(trial_id)
        self.run_clock[trial_id] = (rec.run_id, time.monotonic(), rec.time_total_s)
        self.halt_by.pop(trial_id, None)

    def _arm_halt(self, trial_id: str) -> None:
        """A stop or pause was sent: the trial must halt within the grace period."""
        rec = self.table.get(trial_id)
        old = self.halt_by.get(trial_id)
        if old is None or old[0] != rec.run_id:
            self.halt_by[trial_id] = (rec.run_id, time.monotonic() + self.spec.trial_stop_grace_s)

    # ------------------------------------------------------------------ the tick
    def _watch_tick(self) -> None:
        """About once a second: time limits, then trials that ignored a stop past its grace."""
        self._check_time_limits()
        self._check_lost_processes()
        now = time.monotonic()
        for rec in self.table.with_status(TrialStatus.RUNNING):
            if rec.phase in (Phase.SAVING, Phase.STOPPING):  # e.g. a pause joined a save in flight:
                self._arm_halt(rec.trial_id)  # no effect was sent, but it too must halt in time
        for trial_id, (run_id, deadline) in list(self.halt_by.items()):
            rec = self.table.trials.get(trial_id)
            if rec is None or rec.run_id != run_id or rec.status is not TrialStatus.RUNNING:
                del self.halt_by[trial_id]
            elif now >= deadline:
                del self.halt_by[trial_id]
                self._kill_trial(trial_id, run_id)

    def _local_pid(self, trial_id: str, run_id: int) -> int | None:
        """The pid of the process running this run of the trial, if it runs on this machine."""
        proc = self.procs.get(trial_id)
        pid = proc[1] if proc is not None and proc[0] == run_id else None
        if pid is None or not self.spec.actor_processes or pid in (os.getpid(), self.spec.driver_pid):
            return None
        if self.spec.multi_host and self.placement.where.get(trial_id) != self.leader_id:
            return None
        return pid

    def _check_lost_processes(self) -> None:
        """A local trial process dead at two ticks in a row, with no ``ChildActorExited`` heard, failed.

        Thespian reaps children on SIGCHLD; when two trial processes died at once, one death was
        never reported and the experiment waited forever on a RUNNING trial (seen in test_trial_death).
        """
        seen: dict[str, int] = {}
        for rec in list(self.table.with_status(TrialStatus.RUNNING)):
            pid = self._local_pid(rec.trial_id, rec.run_id)
            if pid is None:
                continue
            gone, code = process_exit(pid)
            if not gone:
                continue
            if self.gone.get(rec.trial_id) != rec.run_id:
                seen[rec.trial_id] = rec.run_id  # give Thespian's own notice a tick to arrive
                continue
            actor = self.actor_of.pop(rec.trial_id, None)  # never reused; a late ChildActorExited is ignored
            self.procs.pop(rec.trial_id, None)
            log.warning("trial %s: its process %d is gone and no exit notice came; failing the run", rec.trial_id, pid)
            self._ended(rec.trial_id, rec.run_id, EndReason.FAILED, None, self._death(actor, code),
                        "the trial's process is gone (found by the controller's liveness check)\n")
        self.gone = seen

    def _check_time_limits(self) -> None:
        stopper = self.spec.stopper if self.spec is not None else None
        if stopper is None:
            return
        try:  # user code: its failure is the user's error
            stop_all = stopper.stop_all()
            limit = stopper.trial_time_limit() if hasattr(stopper, "trial_time_limit") else None
        except Exception as exc:
            self._abort(stopper_failed(stopper, "(none: the periodic time check)", exc))
            return
        effects: list[Effect] = []
        if stop_all:
            self.searcher_done = True
            for rec in self.table.trials.values():
                effects += self.table.request(SchedulerAction(ActionKind.STOP, rec.trial_id))
        elif limit is not None:
            now = time.monotonic()
            for rec in self.table.with_status(TrialStatus.RUNNING):
                run = self.run_clock.get(rec.trial_id)
                if run is None or run[0] != rec.run_id or rec.phase is not Phase.STEPPING:
                    continue
                if run[2] + (now - run[1]) >= limit:  # time_total_s on the controller's clock
                    effects += self.table.request(SchedulerAction(ActionKind.STOP, rec.trial_id))
        self._run(effects)

    def _kill_trial(self, trial_id: str, run_id: int, grace: float | None = None,
                    knob: str = "RunConfig(trial_stop_grace_s)") -> None:
        """End a trial that did not halt within the grace period: kill its process, end it as asked.
        ``grace``/``knob`` name the limit in the log when it is not ``trial_stop_grace_s``."""
        grace = self.spec.trial_stop_grace_s if grace is None else grace
        actor = self.actor_of.pop(trial_id, None)  # never reused; its ChildActorExited is now ignored
        member = self.placement.where.get(trial_id)
        proc = self.procs.pop(trial_id, None)
        pid = proc[1] if proc is not None and proc[0] == run_id else None
        how = "asked it to exit"
        if pid is not None and self.spec.actor_processes and pid not in (os.getpid(), self.spec.driver_pid):
            if not self.spec.multi_host or member == self.leader_id:
                try:
                    os.kill(pid, signal.SIGKILL)
                    how = f"killed its process {pid}"
                except ProcessLookupError:
                    how = f"its process {pid} was already gone"
            elif member in self.probes:
                self.send(self.probes[member], ProbeKill(pid))
                how = f"killed its process {pid} on member {member!r}"
        if actor is not None:
            self.send(actor, ActorExitRequest())
        log.warning("trial %s did not stop within %gs (%s): %s", trial_id, grace, knob, how)
        self._ended(trial_id, run_id, EndReason.STOPPED)


__all__ = ["WatchMixin"]
