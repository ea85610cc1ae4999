"""SchedulerActor: hosts one scheduler plugin behind a mailbox.

A thin shell: the protocol (setup, calls put back in order, a hook that raises reported as
``SchedulerFailed`` rather than retried) lives in ``actors._engine.scheduler_endpoint``, which the
simulator drives directly.
"""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorTypeDispatcher

from actors._engine.scheduler_endpoint import SchedulerEndpoint
from actors._shell.proc import die_with_parent
from actors.messages import SchedulerCall, SchedulerSetup


class SchedulerActor(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        self.endpoint = SchedulerEndpoint()

    def receiveMsg_SchedulerSetup(self, msg: SchedulerSetup, sender: Any) -> None:
        self.send(sender, self.endpoint.setup(msg))

    def receiveMsg_SchedulerCall(self, msg: SchedulerCall, sender: Any) -> None:
        for answer in self.endpoint.call(msg):
            self.send(sender, answer)

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass


__all__ = ["SchedulerActor"]
