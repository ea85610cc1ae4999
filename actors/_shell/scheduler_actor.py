"""SchedulerActor: hosts one scheduler plugin behind a mailbox.

A thin shell: the protocol (setup, calls put back in order, a hook that raises reported as
``SchedulerFailed`` rather than retried) lives in ``actors._engine.scheduler_endpoint``, which the
simulator drives directly.

Where Thespian can watch a socket (the TCP base) and the plugin decides every result (no batching,
no decision horizon), the actor also listens for trials asking for their decisions directly
(``actors/_engine/direct.py``): it answers each trial at once and sends the controller the hooks'
replies in groups, at once when a trial was told to wait (the controller must act on that reply),
else after at most ``flush_after_s`` or ``flush_at`` replies, and always before the reply to any
call of the controller's (they leave in the order the hooks ran).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, ThespianWatch, WakeupMessage, WatchMessage

from actors._engine.scheduler_endpoint import SchedulerEndpoint, decides_every_result
from actors._process.hygiene import die_with_parent
from actors._shell.decision_server import DecisionServer
from actors._shell.plugin_thread import plugin_caller
from actors.messages import (
    DecidedResults,
    DirectDecision,
    SchedulerCall,
    SchedulerFailed,
    SchedulerReady,
    SchedulerSetup,
)


class SchedulerActor(ActorTypeDispatcher):
    flush_after_s = 0.005
    flush_at = 64

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
        self.endpoint = SchedulerEndpoint()
        self.plugins = plugin_caller()  # the scheduler's hooks
        self.server: DecisionServer | None = None
        self.controller: Any = None
        self.pending: list[DirectDecision] = []
        self.timer = False

    def receiveMsg_SchedulerSetup(self, msg: SchedulerSetup, sender: Any) -> None:
        self.controller = sender
        ready = self.plugins(self.endpoint.setup, msg)
        if (isinstance(ready, SchedulerReady) and decides_every_result(ready) and self.server is None
                and self._can_watch()):
            self.server = DecisionServer()
            ready = dataclasses.replace(ready, direct=self.server.address)
        self.send(sender, ready)

    def receiveMsg_SchedulerCall(self, msg: SchedulerCall, sender: Any) -> None:
        self._flush()
        for answer in self.plugins(self.endpoint.call, msg):
            self.send(sender, answer)

    def receiveMsg_WatchMessage(self, msg: WatchMessage, sender: Any) -> None:
        if self.server is None:
            return
        for conn, request in self.server.ready(msg.ready):
            answer, reply = self.plugins(self.endpoint.decide, request)
            self.server.answer(conn, request, answer)
            if reply is None:  # a run the controller has already ended
                continue
            if isinstance(reply, SchedulerFailed):
                self._flush()
                self.send(self.controller, reply)
                continue
            self.pending.append(reply)
            if not answer.go_on or len(self.pending) >= self.flush_at:
                self._flush()
        if self.pending and not self.timer:
            self.timer = True
            self.wakeupAfter(datetime.timedelta(seconds=self.flush_after_s))

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        self.timer = False
        self._flush()

    def receiveMsg_ActorExitRequest(self, msg: ActorExitRequest, sender: Any) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    def receiveMessage(self, msg: Any, sender: Any) -> Any:
        """Keep watching the decision socket (Thespian replaces the watch list after every message
        with what the handler returned)."""
        super().receiveMessage(msg, sender)
        if self.server is None or isinstance(msg, ActorExitRequest):
            return None
        return ThespianWatch(self.server.filenos())

    def _flush(self) -> None:
        if self.pending and self.controller is not None:
            self.send(self.controller, DecidedResults(tuple(self.pending)))
            self.pending = []

    def _can_watch(self) -> bool:
        """The condition Thespian's own ActorManager applies to a returned ``ThespianWatch``."""
        transport = getattr(getattr(self, "_myRef", None), "transport", None)
        return hasattr(transport, "set_watch")

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass


__all__ = ["SchedulerActor"]
