"""Whether an event changed anything a saved experiment state holds: the periodic state write is
skipped while nothing did (``ExperimentCore.unchanged``); and whether the periodic ticks have anything
to do until the next event (``ticks_idle``: the simulator skips such ticks)."""

from __future__ import annotations

from typing import Any

from actors._engine.effects import Phase
from actors._engine.feed import DriverFeed
from actors._engine.lifecycle import TrialTable
from actors._engine.signals import DRIVER, CheckProcesses, Command, ProcessesChecked, Reply, Send, Wake, WakeAfter
from actors._engine.spec import ExperimentSpec
from actors._engine.trial import TrialStatus
from actors._engine.watch import Watchdog
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


def ticks_idle(spec: ExperimentSpec, watch: Watchdog, feed: DriverFeed, table: TrialTable) -> bool:
    """Of a running experiment whose last state still holds everything: nothing is due at a tick and nothing
    depends on the time it runs at (no member to watch, no progress report, no trial to reap or whose halt
    has a deadline, no event or output for the driver, none on its way)."""
    if (spec.multi_host or spec.progress_reports or watch.gone or feed.events or feed.console_out
            or feed.awaiting_output):
        return False
    # a trial saving or stopping must halt by its deadline (``Watchdog``), which a tick checks
    return not any(r.phase in (Phase.SAVING, Phase.STOPPING) for r in table.with_status(TrialStatus.RUNNING))
