"""SchedulerActor: hosts one scheduler plugin behind a mailbox.

A hook that raises is reported as ``SchedulerFailed`` (with the traceback) rather
than retried: a scheduler in an unknown state must not keep making decisions.
"""

from __future__ import annotations

import traceback
from typing import Any

import cloudpickle
from thespian.actors import ActorTypeDispatcher

from actors._engine.scheduler_host import SchedulerHost, overridden_hooks
from actors._engine.sequencer import Sequencer
from actors._shell.proc import die_with_parent
from actors.messages import HookKind, SchedulerCall, SchedulerFailed, SchedulerReady, SchedulerSetup


class SchedulerActor(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        self.host: SchedulerHost | None = None
        self.calls: Sequencer[SchedulerCall] = Sequencer()  # the transport may reorder calls

    def receiveMsg_SchedulerSetup(self, msg: SchedulerSetup, sender: Any) -> None:
        try:
            sched = cloudpickle.loads(msg.scheduler)
            self.host = SchedulerHost(sched, msg.metric, msg.mode, msg.state)
            self.send(sender, SchedulerReady(sched.batching_allowed(), type(sched).__name__,
                                             overridden_hooks(sched)))
        except Exception as exc:
            self.send(sender, SchedulerFailed(0, HookKind.ADD, f"loading the scheduler failed: {exc!r}\n"
                                              + traceback.format_exc()))

    def receiveMsg_SchedulerCall(self, msg: SchedulerCall, sender: Any) -> None:
        for call in self.calls.push(msg.seq, msg):
            self._handle(call, sender)

    def _handle(self, msg: SchedulerCall, sender: Any) -> None:
        if self.host is None:
            self.send(sender, SchedulerFailed(msg.seq, msg.kind, "scheduler not set up"))
            return
        try:
            reply = self.host.handle(msg)
        except Exception as exc:
            name = type(self.host.scheduler).__name__
            self.send(sender, SchedulerFailed(
                msg.seq, msg.kind,
                f"{name} raised in its {msg.kind.value} hook: {exc!r}\n{traceback.format_exc()}"))
            return
        self.send(sender, reply)

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass


__all__ = ["SchedulerActor"]
