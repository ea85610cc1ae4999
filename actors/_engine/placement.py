"""Which actor system (member) runs which trial: resource accounting, pure.

A member is an actor system that joined the convention (or the driver's own
system, "local"/"leader").  Each advertises resources; a trial needs a resource
dict (default ``{"cpu": 1}``) and is placed on the member with the most room
left, so load spreads.  A member that leaves or goes silent is never forgotten here:
``Membership`` counts it lost (no trial is placed on it) until it is heard from again,
and one that registers again keeps its books while it holds trials.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MEMBER_CAP = "audition.member"
RESOURCES_CAP = "audition.resources"
LOCAL = "local"


@dataclass
class Member:
    member_id: str
    resources: dict[str, float]
    address: Any = None
    used: dict[str, float] = field(default_factory=dict)
    trials: set[str] = field(default_factory=set)

    def free(self, key: str) -> float:
        return self.resources.get(key, 0.0) - self.used.get(key, 0.0)

    def fits(self, need: dict[str, float]) -> bool:
        return all(self.free(k) >= v for k, v in need.items() if v > 0)

    def could_ever_fit(self, need: dict[str, float]) -> bool:
        return all(self.resources.get(k, 0.0) >= v for k, v in need.items() if v > 0)


class Placement:
    """Members and their free resources; ``place``/``release`` keep the books."""

    def __init__(self) -> None:
        self.members: dict[str, Member] = {}
        self.where: dict[str, str] = {}  # trial id -> member id
        self.needs: dict[str, dict[str, float]] = {}  # trial id -> what it holds there

    def add(self, member_id: str, resources: dict[str, float], address: Any = None) -> None:
        old = self.members.get(member_id)
        if old is not None and old.trials:
            old.resources, old.address = dict(resources), address  # re-registered: keep the books
            return
        self.members[member_id] = Member(member_id, dict(resources), address)

    def choose(self, need: dict[str, float], lost: set[str] | frozenset[str] = frozenset()) -> str | None:
        """The member not in ``lost`` with room for ``need`` and the most free CPU, or None."""
        ok = [m for m in self.members.values() if m.member_id not in lost and m.fits(need)]
        if not ok:
            return None
        return max(ok, key=lambda m: (m.free("cpu"), m.member_id == LOCAL, m.member_id)).member_id

    def place(self, trial_id: str, member_id: str, need: dict[str, float]) -> None:
        m = self.members[member_id]
        for k, v in need.items():
            m.used[k] = m.used.get(k, 0.0) + v
        m.trials.add(trial_id)
        self.where[trial_id] = member_id
        self.needs[trial_id] = dict(need)

    def release(self, trial_id: str) -> None:
        """Give back what the trial was placed with."""
        member_id = self.where.pop(trial_id, None)
        need = self.needs.pop(trial_id, {})
        m = self.members.get(member_id) if member_id else None
        if m is None:
            return
        for k, v in need.items():
            m.used[k] = max(0.0, m.used.get(k, 0.0) - v)
        m.trials.discard(trial_id)

    def free_slots(self, need: dict[str, float], lost: set[str] | frozenset[str] = frozenset()) -> int:
        """How many more trials of size ``need`` fit right now, over all members not in ``lost``."""
        total = 0
        for m in self.members.values():
            if m.member_id in lost:
                continue
            n = min((int(m.free(k) // v) for k, v in need.items() if v > 0), default=0)
            total += max(0, n)
        return total

    def could_ever_fit(self, need: dict[str, float], lost: set[str] | frozenset[str] = frozenset()) -> bool:
        """True if some member not in ``lost`` is big enough for ``need`` once it is idle."""
        return any(m.could_ever_fit(need) for m in self.members.values() if m.member_id not in lost)

    def is_current(self, member_id: str, address: Any) -> bool:
        """Does a "member left" notice for ``address`` concern the registration we hold?

        A worker restarted with the same id registers again from a new address before Thespian
        expires its old registration; the expiry of the old one must not remove the new one.
        """
        m = self.members.get(member_id)
        return m is not None and (m.address is None or address is None or m.address == address)

    def rows(self) -> list[dict[str, Any]]:
        return [{"member": m.member_id, "resources": dict(m.resources),
                 "free": {k: m.free(k) for k in m.resources}, "trials": sorted(m.trials)}
                for m in self.members.values()]


def placed_here(capabilities: dict[str, Any], requirements: dict[str, Any] | None) -> bool:
    """Thespian's capability check for an actor placed on one member: this system is that member."""
    want = (requirements or {}).get(MEMBER_CAP)
    return want is None or capabilities.get(MEMBER_CAP) == want


def parse_resources(caps: dict[str, Any]) -> dict[str, float]:
    res = caps.get(RESOURCES_CAP) or {}
    return {str(k): float(v) for k, v in dict(res).items()}


__all__ = ["LOCAL", "MEMBER_CAP", "RESOURCES_CAP", "Member", "Placement", "parse_resources", "placed_here"]
