"""Whether an event changed anything a saved experiment state holds: the periodic state write is
skipped while nothing did (``ExperimentCore.unchanged``)."""

from __future__ import annotations

from typing import Any

from actors._engine.signals import DRIVER, CheckProcesses, Command, ProcessesChecked, Reply, Send, Wake, WakeAfter
from actors.messages import (
    ClusterStatusRequest,
    HookKind,
    MemberHeartbeat,
    ProbeCheck,
    ProbeChecked,
    SchedulerCall,
    SchedulerReply,
)

_QUIET_EVENTS = frozenset({Wake, ProcessesChecked, ProbeChecked, MemberHeartbeat, ClusterStatusRequest})
_QUIET_COMMANDS = frozenset({WakeAfter, CheckProcesses, Reply})


def changes_nothing(event: Any, commands: list[Command]) -> bool:
    """Whether handling ``event`` left everything a saved state holds as it was: a timer, liveness
    check (here or through a member's probe), heartbeat, status query or scheduler state that only waited,
    reported and asked again.

    Judged from the outside (the event's type and what it led to), not by listing every mutation:
    anything else counts as a change, so a missed case costs one extra write, never a lost one.
    """
    t = type(event)
    if t is SchedulerReply:
        if event.kind is not HookKind.SAVE:
            return False
    elif t not in _QUIET_EVENTS:
        return False
    for c in commands:
        if type(c) in _QUIET_COMMANDS:
            continue
        if type(c) is Send and (c.to == DRIVER or type(c.msg) is ProbeCheck
                                or (type(c.msg) is SchedulerCall and c.msg.kind is HookKind.SAVE)):
            continue
        return False
    return True
