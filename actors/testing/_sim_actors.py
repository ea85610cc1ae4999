"""What the simulated world knows of each actor and member: plain records, changed only by ``SimWorld``.

A trial actor carries its ``SimTrial``, the scheduler actor the real ``SchedulerEndpoint`` (wrapped
to fail as ``Faults`` say), a member's probe its ``ProbeStart`` and heartbeat count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors._engine.scheduler_endpoint import SchedulerEndpoint
from actors._engine.signals import ActorKind, Handle
from actors.messages import DecideResult, ProbeStart
from actors.testing.sim_trial import SimTrial


@dataclass(frozen=True)
class SchedulerAsk:
    """A trial worker's DecideResult on its way to the scheduler, with who asked (for the answer)."""

    trial: Handle
    msg: DecideResult


@dataclass
class SimActor:
    """One spawned actor: what it is, where it runs, whether its process is alive."""

    kind: ActorKind
    member: str | None
    trial: SimTrial | None = None
    scheduler: SchedulerEndpoint | None = None
    probe: ProbeStart | None = None
    beat: int = 0
    alive: bool = True


@dataclass
class SimMember:
    """A simulated host: its resources, its registrations (a new incarnation each), the actors it runs."""

    resources: dict[str, float]
    incarnation: int = 0
    up: bool = True
    actors: set[Handle] = field(default_factory=set)


__all__ = ["SchedulerAsk", "SimActor", "SimMember"]
