"""The controller's view of the cluster: members, placement and liveness.

Members are Thespian actor systems in the convention led by the driver's system.
The controller hears of them through ``ActorSystemConventionUpdate``, places a
``MemberProbe`` on each one, and counts a member alive only while its probe's
heartbeats arrive: measured here, Thespian reports a SIGKILLed member after tens
of seconds or never.  A member that goes silent loses its trials (each counts a
failure and restarts elsewhere from its latest checkpoint); when its heartbeats
resume, or it registers again, it gets work again.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import Any

from thespian.actors import ActorTypeDispatcher, WakeupMessage

from actors._placement import LOCAL, MEMBER_CAP, Placement, parse_resources
from actors.messages import MemberHeartbeat, ProbeStart

log = logging.getLogger("audition.cluster")


class MemberProbe(ActorTypeDispatcher):
    """Lives on one member system and heartbeats to the controller."""

    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        want = (requirements or {}).get(MEMBER_CAP)
        return want is None or capabilities.get(MEMBER_CAP) == want

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.controller: Any = None
        self.member_id = ""
        self.interval = 1.0
        self.seq = 0

    def receiveMsg_ProbeStart(self, msg: ProbeStart, sender: Any) -> None:
        first = self.controller is None
        self.controller, self.member_id, self.interval = sender, msg.member_id, msg.interval_s
        if first:
            self._beat()

    def receiveMsg_WakeupMessage(self, msg: WakeupMessage, sender: Any) -> None:
        self._beat()

    def _beat(self) -> None:
        self.seq += 1
        self.send(self.controller, MemberHeartbeat(self.member_id, self.seq))
        self.wakeupAfter(datetime.timedelta(seconds=self.interval))

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass


class ClusterMixin:
    """Mixed into ControllerActor; needs ``spec``, ``_host_lost`` and ``_fill``."""

    spec: Any

    def _cluster_init(self) -> None:
        s = self.spec
        self.placement = Placement()
        self.last_beat: dict[str, float] = {}
        self.probes: dict[str, Any] = {}
        self.lost: set[str] = set()
        self.waiting_since: float | None = None
        self.leader_id = "leader" if s.multi_host else LOCAL
        if s.multi_host:
            if any(v > 0 for v in s.leader_resources.values()):
                self.placement.add(self.leader_id, s.leader_resources)
            self.notifyOnSystemRegistrationChanges(True)  # type: ignore[attr-defined]
        else:
            per = s.resources_per_trial or {"cpu": 1}
            self.placement.add(LOCAL, {k: v * s.max_concurrent for k, v in per.items() if v > 0} or
                               {"cpu": float(s.max_concurrent)})

    def receiveMsg_ActorSystemConventionUpdate(self, msg: Any, sender: Any) -> None:
        caps = msg.remoteCapabilities or {}
        member_id = caps.get(MEMBER_CAP)
        if not member_id or self.spec is None or not self.spec.multi_host:
            return
        if msg.remoteAdded:
            log.info("member %s joined with %s", member_id, parse_resources(caps))
            self.placement.add(member_id, parse_resources(caps), msg.remoteAdminAddress)
            self.lost.discard(member_id)
            self.last_beat[member_id] = time.monotonic()
            probe = self.createActor(MemberProbe,  # type: ignore[attr-defined]
                                     targetActorRequirements={MEMBER_CAP: member_id})
            self.probes[member_id] = probe
            self.send(probe, ProbeStart(member_id, self.spec.heartbeat_interval_s))  # type: ignore[attr-defined]
            self._fill()  # type: ignore[attr-defined]
        else:
            self._member_gone(member_id, "it left the convention")

    def receiveMsg_MemberHeartbeat(self, msg: MemberHeartbeat, sender: Any) -> None:
        self.last_beat[msg.member_id] = time.monotonic()
        if msg.member_id in self.lost:
            # the link came back: the member gets work again
            self.lost.discard(msg.member_id)
            log.warning("member %s is reachable again", msg.member_id)
            self._fill()  # type: ignore[attr-defined]

    def _member_gone(self, member_id: str, why: str) -> None:
        if member_id in self.lost:
            return
        self.lost.add(member_id)
        trials = sorted(self.placement.members[member_id].trials) if member_id in self.placement.members else []
        log.warning("member %s lost (%s); %d trial(s) restart elsewhere", member_id, why, len(trials))
        for trial_id in trials:
            self._host_lost(trial_id, member_id, why)  # type: ignore[attr-defined]
        self._fill()  # type: ignore[attr-defined]

    def _check_members(self) -> None:
        """Called from the controller's tick: members whose heartbeats stopped are lost."""
        now = time.monotonic()
        timeout = self.spec.heartbeat_timeout_s
        for member_id in list(self.placement.members):
            if member_id == self.leader_id or member_id in self.lost:
                continue
            if now - self.last_beat.get(member_id, now) > timeout:
                self._member_gone(member_id, f"no heartbeat for {timeout:.0f}s")

    def _choose_member(self, need: dict[str, float]) -> str | None:
        ok = [m for m in self.placement.members.values() if m.member_id not in self.lost and m.fits(need)]
        if not ok:
            return None
        return max(ok, key=lambda m: (m.free("cpu"), m.member_id)).member_id

    def _free_slots(self, need: dict[str, float]) -> int:
        total = 0
        for m in self.placement.members.values():
            if m.member_id in self.lost:
                continue
            n = min((int(m.free(k) // v) for k, v in need.items() if v > 0), default=0)
            total += max(0, n)
        return total


__all__ = ["ClusterMixin", "MemberProbe"]
