"""The core's view of the cluster: members, their resources and trials, and whether they are alive.

Members are actor systems in the convention led by the driver's system. The core hears of them
through ``MemberJoined``/``MemberLeft``, places a probe on each, and counts a member alive only
while its probe's heartbeats arrive: measured here, Thespian reports a SIGKILLed member after tens
of seconds or never. On one machine there is one member, ``LOCAL``, sized for
``max_concurrent`` trials (the machine's resources when each trial has its own). Decisions about
trials (fail them, restart them) stay in the core; this object only answers who is where and who
is lost.
"""

from __future__ import annotations

from typing import Any

from actors._engine.placement import LOCAL, Placement
from actors._engine.signals import Handle
from actors._engine.spec import ExperimentSpec


class Membership:
    def __init__(self, spec: ExperimentSpec) -> None:
        self.placement = Placement()
        self.last_beat: dict[str, float] = {}
        self.probes: dict[str, Handle] = {}
        self.lost: set[str] = set()
        self.waiting_since: float | None = None  # since when no member could ever hold a waiting trial
        self.leader_id = "leader" if spec.multi_host else LOCAL
        self.need = {k: float(v) for k, v in (spec.resources_per_trial or {"cpu": 1}).items() if v > 0}
        if spec.multi_host:
            if any(v > 0 for v in spec.leader_resources.values()):
                self.placement.add(self.leader_id, spec.leader_resources)
        elif spec.resources_of is not None:  # trials of many sizes: the machine, as Ray's local cluster
            self.placement.add(LOCAL, dict(spec.total_resources))
        else:
            per = spec.resources_per_trial or {"cpu": 1}
            self.placement.add(LOCAL, {k: v * spec.max_concurrent for k, v in per.items() if v > 0} or
                               {"cpu": float(spec.max_concurrent)})

    def replaced(self, member_id: str, address: Any) -> bool:
        """A known, live member registers again from a new address: it restarted, its trials died."""
        return (member_id in self.placement.members and member_id not in self.lost
                and not self.placement.is_current(member_id, address))

    def joined(self, member_id: str, resources: dict[str, float], address: Any, now: float) -> None:
        self.placement.add(member_id, resources, address)
        self.lost.discard(member_id)
        self.last_beat[member_id] = now

    def is_current(self, member_id: str, address: Any) -> bool:
        return self.placement.is_current(member_id, address)

    def heartbeat(self, member_id: str, now: float) -> bool:
        """True if the member was lost and is reachable again."""
        self.last_beat[member_id] = now
        if member_id in self.lost:
            self.lost.discard(member_id)
            return True
        return False

    def lose(self, member_id: str) -> list[str] | None:
        """Mark the member lost; the trials it held (None if it was lost already)."""
        if member_id in self.lost:
            return None
        self.lost.add(member_id)
        m = self.placement.members.get(member_id)
        return sorted(m.trials) if m is not None else []

    def silent(self, now: float, timeout_s: float) -> list[str]:
        """Members whose heartbeats stopped for longer than ``timeout_s``."""
        return [m for m in list(self.placement.members)
                if m != self.leader_id and m not in self.lost and now - self.last_beat.get(m, now) > timeout_s]

    def need_of(self, resources: dict[str, float] | None) -> dict[str, float]:
        """What a trial with these resources of its own needs (None: the experiment's ``need``)."""
        if resources is None:
            return self.need
        return {k: float(v) for k, v in (resources or {"cpu": 1}).items() if v > 0}

    def choose(self, need: dict[str, float] | None = None) -> str | None:
        return self.placement.choose(self.need if need is None else need, self.lost)

    def place(self, trial_id: str, member_id: str, need: dict[str, float] | None = None) -> None:
        self.placement.place(trial_id, member_id, self.need if need is None else need)

    def release(self, trial_id: str) -> None:
        self.placement.release(trial_id)

    def where(self, trial_id: str) -> str | None:
        return self.placement.where.get(trial_id)

    def totals(self) -> dict[str, float]:
        """Every live member's resources summed (on one machine: what it offers): the cluster Ray's
        ``_resource_updater`` counts, for a scheduler that reads it."""
        out: dict[str, float] = {}
        for m in self.placement.members.values():
            if m.member_id not in self.lost:
                for k, v in m.resources.items():
                    out[k] = out.get(k, 0.0) + v
        return out

    def free_slots(self) -> int:
        return self.placement.free_slots(self.need, self.lost)

    def could_ever_fit(self, need: dict[str, float] | None = None) -> bool:
        return self.placement.could_ever_fit(self.need if need is None else need, self.lost)

    def unplaceable_for(self, waiting: bool, now: float, needs: list[dict[str, float]] | None = None) -> float | None:
        """How long trials have waited that no member can ever hold (None: not the case); ``needs``: the waiting
        trials' own, when they have their own (one some member could hold is not the case)."""
        if not waiting or (any(self.could_ever_fit(n) for n in needs) if needs else self.could_ever_fit()):
            self.waiting_since = None
            return None
        if self.waiting_since is None:
            self.waiting_since = now
        return now - self.waiting_since

    def rows(self) -> list[dict[str, Any]]:
        return [dict(r, lost=r["member"] in self.lost) for r in self.placement.rows()]


__all__ = ["Membership"]
