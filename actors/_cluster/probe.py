"""MemberProbe: lives on one member system and heartbeats to the controller.

The controller counts a member alive only while these heartbeats arrive (Thespian reports a
SIGKILLed member after tens of seconds or never), asks the probe to SIGKILL a trial process on
its member that ignored a stop past its grace period, and, at each liveness check, which trial
processes on its member are gone (their exit notice may never reach the controller).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
from typing import Any

from thespian.actors import ActorTypeDispatcher, WakeupMessage

from actors._engine.placement import placed_here
from actors._process.children import gone_processes
from actors._process.hygiene import die_with_parent
from actors.messages import MemberHeartbeat, ProbeCheck, ProbeChecked, ProbeKill, ProbeStart


class MemberProbe(ActorTypeDispatcher):
    """Lives on one member system and heartbeats to the controller."""

    # run only on the member the controller placed it on (multi-host)
    actorSystemCapabilityCheck = staticmethod(placed_here)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        self.controller: Any = None
        self.member_id = ""
        self.interval = 1.0
        self.seq = 0

    def receiveMsg_ProbeStart(self, msg: ProbeStart, sender: Any) -> None:
        first = self.controller is None
        self.controller, self.member_id, self.interval = sender, msg.member_id, msg.interval_s
        if first:
            self._beat()

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        self._beat()

    def receiveMsg_ProbeKill(self, msg: ProbeKill, sender: Any) -> None:
        """A trial process on this member ignored its stop past the grace period (controller's call)."""
        if sender == self.controller and msg.pid not in (os.getpid(), os.getppid()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(msg.pid, signal.SIGKILL)

    def receiveMsg_ProbeCheck(self, msg: ProbeCheck, sender: Any) -> None:
        """Which of these trial processes on this member are gone (from ``/proc``, as the controller looks
        up its own machine's): answered every time, an empty answer included."""
        if sender != self.controller:
            return
        self.send(sender, ProbeChecked(self.member_id, gone_processes(msg.procs)))

    def _beat(self) -> None:
        self.seq += 1
        self.send(self.controller, MemberHeartbeat(self.member_id, self.seq))
        self.wakeupAfter(datetime.timedelta(seconds=self.interval))

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass


__all__ = ["MemberProbe"]
