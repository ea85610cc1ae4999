"""The simulator's event queue: what happens next in simulated time, and whether it is progress.

``SimWorld`` pops it in its loop; everything that happens (a message delivered, a trial's step, a
heartbeat, a member lost) is pushed here first. Whether an event is progress (not a timer, a heartbeat,
a liveness check or a periodic state save) is judged once, when it is queued: the world's hang check
counts the progress still queued (``busy``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from enum import Enum
from typing import Any

from actors._engine.signals import ProcessesChecked, Wake
from actors.messages import HookKind, MemberHeartbeat, ProbeCheck, ProbeChecked, SchedulerCall, SchedulerReply

# the messages that are never progress, and those that are not when they carry a periodic state save
# (exact types: the simulator makes and receives these, never subclasses of them)
_NOT_PROGRESS = frozenset({Wake, MemberHeartbeat, ProcessesChecked, ProbeCheck, ProbeChecked})
_HOOK_MESSAGES = frozenset({SchedulerCall, SchedulerReply})

Event = tuple[float, int, "EventKind", Any, Any, bool]  # (when, order, kind, a, b, progress)


class EventKind(Enum):
    CORE = 0  # an event for the core
    ACTOR = 1  # a message for a simulated actor
    STEP = 2  # a trial's step finishes
    BEAT = 3  # a probe's heartbeat timer
    MEMBER = 4  # a member is lost or comes back
    LIVENESS = 5  # a trial actor's periodic look (TrialActor._liveness): numbered messages sent again


class EventQueue:
    """A heap of events in time order (ties: in the order queued), counting the progress it holds."""

    def __init__(self) -> None:
        self.heap: list[Event] = []
        self._n = 0
        self.busy = 0  # queued entries other than the core's timers and heartbeats

    def push(self, at: float, kind: EventKind, a: Any = None, b: Any = None) -> None:
        self._n += 1
        if kind is EventKind.BEAT or kind is EventKind.LIVENESS:
            progress = False
        else:
            msg: Any = a if kind is EventKind.CORE else b if kind is EventKind.ACTOR else None
            t = type(msg)
            progress = t not in _NOT_PROGRESS and not (t in _HOOK_MESSAGES and msg.kind is HookKind.SAVE)
        if progress:
            self.busy += 1
        heapq.heappush(self.heap, (at, self._n, kind, a, b, progress))

    def next_tick(self, at: float, interval: float, idle: Callable[[], bool]) -> float:
        """When a periodic tick due ``at`` is delivered: then, or, while ticks are ``idle``
        (``ExperimentCore.tick_idle``), the first one at or after the earliest queued event. Ticks
        draw nothing from the generator and change nothing, so skipping them changes no outcome;
        their times are added up one by one, as the ticks themselves would have. ``idle`` is asked only
        while progress is queued (a test's core need not have it)."""
        if self.busy == 0 or not self.heap or not idle():
            return at  # (with nothing but timers queued, the hang check needs every tick)
        upto = self.heap[0][0]
        while at < upto:
            at += interval
        return at


__all__ = ["EventKind", "EventQueue"]
