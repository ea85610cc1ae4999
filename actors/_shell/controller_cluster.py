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

import contextlib
import datetime
import logging
import os
import signal
import time
from typing import Any

from thespian.actors import ActorExitRequest, ActorTypeDispatcher, WakeupMessage

from actors._engine.placement import LOCAL, MEMBER_CAP, Placement, parse_resources
from actors._engine.sequencer import Sequencer
from actors._engine.trial import TrialStatus, trial_name
from actors._shell.proc import die_with_parent
from actors._shell.trial_actor import TrialActor
from actors.messages import EndReason, EventType, MemberHeartbeat, ProbeKill, ProbeStart, RunTrial

log = logging.getLogger("audition.cluster")


class MemberProbe(ActorTypeDispatcher):
    """Lives on one member system and heartbeats to the controller."""

    @staticmethod
    def actorSystemCapabilityCheck(capabilities: dict[str, Any], requirements: dict[str, Any]) -> bool:
        want = (requirements or {}).get(MEMBER_CAP)
        return want is None or capabilities.get(MEMBER_CAP) == want

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        die_with_parent()
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

    def receiveMsg_ProbeKill(self, msg: ProbeKill, sender: Any) -> None:
        """A trial process on this member ignored its stop past the grace period (controller's call)."""
        if sender == self.controller and msg.pid not in (os.getpid(), os.getppid()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(msg.pid, signal.SIGKILL)

    def _beat(self) -> None:
        self.seq += 1
        self.send(self.controller, MemberHeartbeat(self.member_id, self.seq))
        self.wakeupAfter(datetime.timedelta(seconds=self.interval))

    def receiveUnrecognizedMessage(self, msg: Any, sender: Any) -> None:
        pass


class ClusterMixin:
    """Mixed into ControllerActor: members, liveness, and placing/releasing trial actors.

    Uses the controller's ``table``, ``io``, ``actor_of``, ``idle``, ``inbox`` and
    ``window``, and calls back into its ``_ended``, ``_abort``, ``_fill`` and ``_recover``.
    """

    spec: Any
    table: Any
    io: Any
    actor_of: dict[str, Any]
    idle: list[tuple[Any, str]]
    inbox: dict[str, Any]
    window: int

    def _ended(self, trial_id: str, run_id: int, reason: EndReason, ckpt: Any = None,
               error: str | None = None, tb: str | None = None) -> None:
        raise NotImplementedError

    def _abort(self, reason: str) -> None:
        raise NotImplementedError

    def _fill(self) -> None:
        raise NotImplementedError

    def _recover(self, rec: Any) -> None:
        raise NotImplementedError

    def _event(self, kind: Any, rec: Any, result: dict[str, Any] | None = None,
               checkpoint: str | None = None) -> None:
        raise NotImplementedError

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
            old = self.placement.members.get(member_id)
            if (old is not None and member_id not in self.lost
                    and not self.placement.is_current(member_id, msg.remoteAdminAddress)):
                # restarted under the same id before its heartbeats timed out: its trials died with it
                self._member_gone(member_id, "it joined again from a new address")
            log.info("member %s joined with %s", member_id, parse_resources(caps))
            self.placement.add(member_id, parse_resources(caps), msg.remoteAdminAddress)
            self.lost.discard(member_id)
            self.last_beat[member_id] = time.monotonic()
            probe = self.createActor(MemberProbe,  # type: ignore[attr-defined]
                                     targetActorRequirements={MEMBER_CAP: member_id})
            self.probes[member_id] = probe
            self.send(probe, ProbeStart(member_id, self.spec.heartbeat_interval_s))  # type: ignore[attr-defined]
            self._fill()
        elif self.placement.is_current(member_id, msg.remoteAdminAddress):
            self._member_gone(member_id, "it left the convention")
        else:
            log.info("member %s: an old registration (%s) expired; the current one stays",
                     member_id, msg.remoteAdminAddress)

    def receiveMsg_MemberHeartbeat(self, msg: MemberHeartbeat, sender: Any) -> None:
        self.last_beat[msg.member_id] = time.monotonic()
        if msg.member_id in self.lost:
            # the link came back: the member gets work again
            self.lost.discard(msg.member_id)
            log.warning("member %s is reachable again", msg.member_id)
            self._fill()

    def _member_gone(self, member_id: str, why: str) -> None:
        if member_id in self.lost:
            return
        self.lost.add(member_id)
        trials = sorted(self.placement.members[member_id].trials) if member_id in self.placement.members else []
        log.warning("member %s lost (%s); %d trial(s) restart elsewhere", member_id, why, len(trials))
        for trial_id in trials:
            self._host_lost(trial_id, member_id, why)
        self._fill()

    # ------------------------------------------------------------------ placing trial actors
    def _need(self) -> dict[str, float]:
        assert self.spec is not None
        return {k: float(v) for k, v in (self.spec.resources_per_trial or {"cpu": 1}).items() if v > 0}

    def _start(self, trial_id: str) -> None:
        assert self.spec is not None
        s = self.spec
        rec = self.table.get(trial_id)
        member = self.placement.choose(self._need(), self.lost)
        if member is None:  # the room it was chosen for is gone (a member was lost meanwhile)
            self.table.unstart(trial_id)
            return
        self.io.on_start(rec)
        pooled = next((i for i, (_, m) in enumerate(self.idle) if m == member), None)
        if pooled is not None:
            actor = self.idle.pop(pooled)[0]
        elif s.multi_host:
            actor = self.createActor(  # type: ignore[attr-defined]
                TrialActor, targetActorRequirements={MEMBER_CAP: member})
        else:
            actor = self.createActor(  # type: ignore[attr-defined]
                TrialActor)
        self.placement.place(trial_id, member, self._need())
        self.actor_of[trial_id] = actor
        self.inbox[trial_id] = (rec.run_id, Sequencer())
        self._event(EventType.START, rec)
        extra = rec.extra_result
        rec.extra_result = {}
        self.send(  # type: ignore[attr-defined]
            actor, RunTrial(
            trial_id, rec.run_id, dict(rec.config), s.trainable, rec.checkpoint, rec.iteration,
            rec.time_total_s, self.window, s.storage_url, s.storage_options, s.name,
            self.io.next_checkpoint_index(rec), s.checkpoint_frequency, s.checkpoint_at_end, extra,
            member if s.multi_host else "", capture_fds=s.actor_processes, echo_output=s.log_to_driver,
            trial_dirname=rec.dirname or "",
            trial_name=trial_name(trial_id, s.trainable_name, rec.config, rec.name) if s.log_to_driver else ""))

    def _release(self, trial_id: str, reusable: bool) -> None:
        assert self.spec is not None
        member = self.placement.where.get(trial_id)
        self.placement.release(trial_id, self._need())
        actor = self.actor_of.pop(trial_id, None)
        if actor is None:
            return
        if (reusable and member is not None and self.spec.reuse_actors and member not in self.lost
                and len(self.idle) < self.spec.max_concurrent):
            self.idle.append((actor, member))
        else:
            self.send(  # type: ignore[attr-defined]
            actor, ActorExitRequest())

    def _host_lost(self, trial_id: str, member: str, why: str) -> None:
        """The member running ``trial_id`` is unreachable: the trial fails and restarts elsewhere."""
        rec = self.table.get(trial_id)
        actor = self.actor_of.pop(trial_id, None)
        if actor is not None:
            self.send(  # type: ignore[attr-defined]
            actor, ActorExitRequest())  # delivered if the member comes back
        self.placement.release(trial_id, self._need())
        if rec.status is TrialStatus.RUNNING:
            # what the lost run committed before now counts, even unreported (its result died with
            # the member); only its later commits are fenced off. Fencing first hid them all.
            self._recover(rec)
            self.io.fence(trial_id)
            self._ended(trial_id, rec.run_id, EndReason.FAILED, None,
                        f"lost contact with member {member!r} ({why})", "host lost\n")

    def _check_placeable(self) -> None:
        """A trial that no member can ever hold is an error, once members had time to join."""
        assert self.spec is not None
        need = self._need()
        waiting = self.table.with_status(TrialStatus.PENDING)
        if not waiting or self.table.running or self.placement.could_ever_fit(need, self.lost):
            self.waiting_since = None
            return
        now = time.monotonic()
        if self.waiting_since is None:
            self.waiting_since = now
            log.warning("no member can hold a trial needing %s (members: %s); waiting up to %.0fs "
                        "(RunConfig(placement_timeout_s)) for a worker big enough to join", need,
                        self.placement.rows() or "none yet", self.spec.placement_grace_s)
        elif now - self.waiting_since > self.spec.placement_grace_s:
            members = self.placement.rows() or "no member has joined"
            self._abort(f"no member can ever run a trial needing {need} (members: {members}); start "
                        "workers with enough resources (audition worker --cpus N --resources JSON)")


    def _check_members(self) -> None:
        """Called from the controller's tick: members whose heartbeats stopped are lost."""
        now = time.monotonic()
        timeout = self.spec.heartbeat_timeout_s
        for member_id in list(self.placement.members):
            if member_id == self.leader_id or member_id in self.lost:
                continue
            if now - self.last_beat.get(member_id, now) > timeout:
                self._member_gone(member_id, f"no heartbeat for {timeout:.0f}s")

    def _free_slots(self, need: dict[str, float]) -> int:
        return self.placement.free_slots(need, self.lost)


__all__ = ["ClusterMixin", "MemberProbe"]
