"""ControllerActor: the Thespian shell around the experiment core.

Every decision is made by ``actors._engine.core.ExperimentCore``; this class only turns Thespian's
messages into the core's events (addresses into handles, ``ChildActorExited`` into ``ActorGone``,
...) and the core's commands into Thespian calls (``send``, ``createActor``, ``wakeupAfter``), plus
the few things only a process can do: read the clock, look up processes, kill one. It creates
every other actor, so it hears ``ChildActorExited`` when one dies.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import time
import traceback
from collections.abc import Callable
from typing import Any

import cloudpickle
from thespian.actors import (
    ActorExitRequest,
    ActorTypeDispatcher,
    ChildActorExited,
    PoisonMessage,
    WakeupMessage,
)

from actors._cluster.probe import MemberProbe
from actors._driver.system import shutdown_orphaned_system
from actors._engine.core import ExperimentCore
from actors._engine.describe import describe_core
from actors._engine.placement import MEMBER_CAP, parse_resources
from actors._engine.signals import (
    DRIVER,
    ActorGone,
    ActorKind,
    CheckProcesses,
    Command,
    DriverGone,
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
    Start,
    Tick,
    Undeliverable,
    Wake,
    WakeAfter,
    WatchMembers,
)
from actors._engine.spec import ExperimentSpec
from actors._process.children import exit_status_of, gone_processes, pid_alive, record_child_exits
from actors._process.hygiene import describe_on_signal, die_with_parent
from actors._shell.experiment_io import ExperimentIO
from actors._shell.experiment_state import StateRestoreFailed, StateSaveFailed
from actors._shell.logger_host import LoggerFailed
from actors._shell.plugin_thread import plugin_caller
from actors._shell.scheduler_actor import SchedulerActor
from actors._shell.trial_actor import TrialActor
from actors.messages import ClusterStatus, ClusterStatusRequest, ExperimentFinished, StartExperiment
from storage import StorageError

log = logging.getLogger("audition")


def explain(exc: BaseException) -> str | None:
    """The user's message for a failure the core cannot prevent (None: an internal error)."""
    if isinstance(exc, LoggerFailed):
        return f"{exc}; what was written before is kept"
    if isinstance(exc, StateSaveFailed):
        return f"the experiment's state could not be saved: {exc}"
    if isinstance(exc, StateRestoreFailed):
        return f"the experiment could not be restored: {exc}"
    if isinstance(exc, StorageError):  # the storage package already retried: a clear end, not a bug report
        return f"the controller could not write to storage: {exc}; what was written before is kept"
    return None


class ControllerActor(ActorTypeDispatcher):
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        describe_on_signal(self._describe)
        record_child_exits()
        self.core: ExperimentCore | None = None
        self.driver: Any = None
        self.addr: dict[Handle, Any] = {}
        self.plugins = plugin_caller()  # the core calls the search algorithm and stoppers

    def receiveMessage(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartExperiment):
            self._start(msg, sender)
        elif self.core is None:
            if isinstance(msg, ClusterStatusRequest):  # created just now by the status query: nothing runs here
                self.send(sender, ClusterStatus(None, (), {}))
                self.send(self.myAddress, ActorExitRequest())
        else:
            event = self._event(msg, sender)
            if event is not None:
                self._handle(event, sender)

    def _start(self, msg: StartExperiment, sender: Any) -> None:
        self.driver = sender
        try:
            spec: ExperimentSpec = cloudpickle.loads(msg.spec)
        except Exception as exc:
            self.send(sender, ExperimentFinished((), f"controller could not start the experiment: {exc!r}\n"
                                                 f"{traceback.format_exc()}", 0.0, 0, 0))
            return
        self.core = self.plugins(ExperimentCore, spec, ExperimentIO, explain, os.getpid())
        wall = time.time()  # the wall clock and local time date trial directories, as Ray's
        self._handle(Start(wall, time.localtime(wall).tm_gmtoff), sender)

    def _event(self, msg: Any, sender: Any) -> Any:
        """The core's event for a Thespian message (None: nothing for the core)."""
        if isinstance(msg, ChildActorExited):
            handle = self._handle_of(msg.childAddress)
            return None if handle is None else ActorGone(handle, exit_status_of(msg.childAddress))
        if isinstance(msg, PoisonMessage):
            handle = self._handle_of(sender)
            return None if handle is None else Undeliverable(handle, type(msg.poisonMessage).__name__)
        if isinstance(msg, WakeupMessage):
            tick = Tick(msg.payload) if msg.payload in {t.value for t in Tick} else Tick.PERIODIC
            driver_pid = self.core.spec.driver_pid if self.core is not None else 0
            if tick is Tick.PERIODIC and self.driver is not None and driver_pid and not pid_alive(driver_pid):
                self.driver = None  # killed (SIGKILL): nobody else will shut this system down
                self._handle(DriverGone(), sender)
            return Wake(tick)
        if type(msg).__name__ == "ActorSystemConventionUpdate":
            caps = msg.remoteCapabilities or {}
            member_id = caps.get(MEMBER_CAP)
            if not member_id:
                return None
            if msg.remoteAdded:
                return MemberJoined(member_id, parse_resources(caps), msg.remoteAdminAddress)
            return MemberLeft(member_id, msg.remoteAdminAddress)
        if isinstance(msg, ActorExitRequest):
            return None
        return msg

    def _describe(self) -> str:
        """What the core waits for (``kill -USR2``, beside this process's stacks). Imports nothing: it runs
        in a signal handler, which may land while this thread holds the import lock."""
        if self.core is None:
            return "controller: no experiment yet"
        return describe_core(self.core)

    def _handle_of(self, addr: Any) -> Handle | None:
        # addresses are unhashable, and a fresh one equals its resolved form only through ==
        return next((h for h, a in self.addr.items() if a == addr), None)

    def _handle(self, event: Any, sender: Any) -> None:
        assert self.core is not None
        self._carry_out(self.plugins(self.core.handle, event, self.clock()), sender)

    def _carry_out(self, commands: list[Command], sender: Any) -> None:
        for c in commands:
            if isinstance(c, Send):
                to = self.driver if c.to == DRIVER else self.addr.get(c.to)
                if to is not None:
                    self.send(to, c.msg)
            elif isinstance(c, Reply):
                self.send(sender, c.msg)
            elif isinstance(c, Spawn):
                self.addr[c.handle] = self._spawn(c)
            elif isinstance(c, Retire):
                addr = self.addr.pop(c.handle, None)
                if addr is not None:
                    self.send(addr, ActorExitRequest())
            elif isinstance(c, WakeAfter):
                self.wakeupAfter(datetime.timedelta(seconds=c.seconds), payload=c.tick.value)
            elif isinstance(c, KillProcess):
                self._kill(c.pid)
            elif isinstance(c, CheckProcesses):
                gone = gone_processes(c.procs)
                if gone or c.always_answer:
                    self._handle(ProcessesChecked(gone), sender)
            elif isinstance(c, WatchMembers):
                self.notifyOnSystemRegistrationChanges(True)
            elif isinstance(c, ShutdownSystem):
                shutdown_orphaned_system(c.admin_port)

    def _spawn(self, c: Spawn) -> Any:
        if c.kind is ActorKind.SCHEDULER:
            return self.createActor(SchedulerActor)
        cls = TrialActor if c.kind is ActorKind.TRIAL else MemberProbe
        if c.member is None:
            return self.createActor(cls)
        return self.createActor(cls, targetActorRequirements={MEMBER_CAP: c.member})

    @staticmethod
    def _kill(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
            log.warning("killed trial process %d: it did not halt within its grace period", pid)
        except ProcessLookupError:
            pass


__all__ = ["ControllerActor", "explain"]
