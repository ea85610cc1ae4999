"""What the experiment core takes in besides messages, and what it gives back: its events and commands.

The core (``actors._engine.core.ExperimentCore``) is driven by ``handle(event, now)``. An event is
either one of the wire messages of ``actors.messages`` (a trial's results, a scheduler reply, a
heartbeat, ...) or one of the notifications below, which the shell makes from Thespian's own
messages. The core answers with commands; the shell (``actors._shell.controller``) carries them out
with Thespian calls, and the simulator (``actors.testing.simulate``) with its simulated transport.

Actors are named by ``Handle``: a number the core hands out in ``Spawn`` (``DRIVER`` is the
experiment's driver). Only the shell knows the Thespian address behind a handle. A member's admin
address is carried as an opaque token, compared only with ``==``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

Handle = int
DRIVER: Handle = 0


class ActorKind(Enum):
    """What a ``Spawn`` creates."""

    SCHEDULER = "scheduler"
    TRIAL = "trial"
    PROBE = "probe"


class Tick(Enum):
    """Why the core asked to be woken."""

    PERIODIC = "periodic"  # progress, state writes, liveness, time limits: every progress_interval_s
    EVENTS = "events"  # send the driver its batched callback events and console lines


# --------------------------------------------------------------------------- events (shell -> core)


@dataclass(frozen=True)
class Start:
    """The experiment begins: open storage, restore, spawn the scheduler. ``wall``: the wall clock
    (epoch seconds) at this event and ``utc_offset_s`` local time's offset then, which date trial
    directories (the core reads no clock)."""

    wall: float = 0.0
    utc_offset_s: int = 0


@dataclass(frozen=True)
class Wake:
    """A ``WakeAfter`` fell due."""

    tick: Tick


@dataclass(frozen=True)
class ActorGone:
    """An actor the core spawned has exited (Thespian's ``ChildActorExited``); ``code`` is its
    process's exit status when the shell knows it (negative: killed by that signal)."""

    handle: Handle
    code: int | None = None


@dataclass(frozen=True)
class Undeliverable:
    """An actor could not handle a message (Thespian's ``PoisonMessage``)."""

    handle: Handle
    message_type: str


@dataclass(frozen=True)
class DriverGone:
    """The driver's process is dead: nobody will stop this system but the core."""


@dataclass(frozen=True)
class MemberJoined:
    """A member actor system registered in the convention (multi-host)."""

    member_id: str
    resources: dict[str, float]
    address: Any = None  # opaque: only compared with ==


@dataclass(frozen=True)
class MemberLeft:
    """A member's registration ended (multi-host)."""

    member_id: str
    address: Any = None


@dataclass(frozen=True)
class ProcessesChecked:
    """The answer to ``CheckProcesses``: which of the asked-for trial processes are gone."""

    gone: tuple[tuple[str, int, int | None], ...]  # (trial_id, run_id, exit status if known)


# --------------------------------------------------------------------------- commands (core -> shell)


@dataclass(frozen=True)
class Send:
    """Send ``msg`` to the actor behind ``to``."""

    to: Handle
    msg: Any


@dataclass(frozen=True)
class Reply:
    """Send ``msg`` to whoever sent the event being handled (a status query)."""

    msg: Any


@dataclass(frozen=True)
class Spawn:
    """Create an actor and name it ``handle``; ``member`` places it on that member (multi-host)."""

    handle: Handle
    kind: ActorKind
    member: str | None = None


@dataclass(frozen=True)
class Retire:
    """Ask the actor behind ``handle`` to exit (``ActorExitRequest``); the handle is dead after this."""

    handle: Handle


@dataclass(frozen=True)
class WakeAfter:
    """Deliver ``Wake(tick)`` after ``seconds``."""

    seconds: float
    tick: Tick


@dataclass(frozen=True)
class KillProcess:
    """SIGKILL a trial process on this machine (it ignored a stop past its grace period)."""

    pid: int


@dataclass(frozen=True)
class CheckProcesses:
    """Look up these local trial processes now and answer with ``ProcessesChecked``; when none is
    gone, answer only if ``always_answer`` (the core remembers a process found gone at the last
    check and must hear that it is not gone now; otherwise an empty answer changes nothing)."""

    procs: tuple[tuple[str, int, int], ...]  # (trial_id, run_id, pid)
    always_answer: bool = True


@dataclass(frozen=True)
class WatchMembers:
    """Tell the core of members joining and leaving (``MemberJoined``/``MemberLeft``)."""


@dataclass(frozen=True)
class ShutdownSystem:
    """The driver is gone: after the final report, stop the whole actor system on ``admin_port``."""

    admin_port: int


@dataclass(frozen=True)
class Finish:
    """The experiment has ended (its final report is among the commands before this one)."""

    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Event = Any  # a wire message of actors.messages, or one of the event classes above
Command = (Send | Reply | Spawn | Retire | WakeAfter | KillProcess | CheckProcesses | WatchMembers | ShutdownSystem
           | Finish)

__all__ = [
    "DRIVER", "ActorGone", "ActorKind", "CheckProcesses", "Command", "DriverGone", "Event", "Finish", "Handle",
    "KillProcess", "MemberJoined", "MemberLeft", "ProcessesChecked", "Reply", "Retire", "Send", "ShutdownSystem",
    "Spawn", "Start", "Tick", "Undeliverable", "Wake", "WakeAfter", "WatchMembers",
]
