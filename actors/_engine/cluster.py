"""Where trials run: members joining, lost and silent, their probes, and the trial processes the core
checks on and kills.

The core owns one ``Cluster``; it works on the core's ``Membership``, ``ActorPool`` and ``Watchdog``
(handed in) and returns the commands that follow. A run it finds lost (its process gone, its member
unreachable) comes back as a ``RunLost`` notice: ending the trial (hooks, retries, the searcher) stays
the core's decision. Methods that hand back notices are generators, so each trial is looked at only
after the core acted on the one before, in the order the core always used.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from actors._engine.lifecycle import TrialTable
from actors._engine.members import Membership
from actors._engine.pool import ActorPool
from actors._engine.signals import (
    ActorKind,
    CheckProcesses,
    Command,
    KillProcess,
    MemberJoined,
    MemberLeft,
    ProcessesChecked,
    Reply,
    Retire,
    Send,
    Spawn,
)
from actors._engine.spec import ExperimentSpec
from actors._engine.trial import TrialStatus
from actors._engine.watch import Watchdog, death_message
from actors.messages import ClusterStatus, MemberHeartbeat, ProbeCheck, ProbeChecked, ProbeKill, ProbeStart

log = logging.getLogger("audition")


@dataclass(frozen=True)
class RunLost:
    """This run of the trial is gone without its own end notice: the core ends it FAILED with this error."""

    trial_id: str
    run_id: int
    error: str
    traceback: str


class Cluster:
    """Members, probes and trial processes: who runs where, and what to do when one is gone."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, members: Membership, pool: ActorPool,
                 watch: Watchdog, controller_pid: int) -> None:
        self.spec = spec
        self.table = table
        self.members = members
        self.pool = pool
        self.watch = watch
        self.controller_pid = controller_pid

    def status(self) -> Reply:
        """The answer to ``ClusterStatusRequest``: the members and how many trials are in each status."""
        counts: dict[str, int] = {}
        for rec in self.table.trials.values():
            counts[rec.status.value] = counts.get(rec.status.value, 0) + 1
        return Reply(ClusterStatus(self.spec.name, tuple(self.members.rows()), counts))

    # ------------------------------------------------------------------ trial processes
    def local_pid(self, trial_id: str, run_id: int) -> int | None:
        """The pid of the process running this run of the trial, if it runs on this machine."""
        pid = self.watch.pid(trial_id, run_id)
        if pid is None or not self.spec.actor_processes or pid in (self.controller_pid, self.spec.driver_pid):
            return None
        if self.spec.multi_host and self.members.where(trial_id) != self.members.leader_id:
            return None
        return pid

    def ask_processes(self) -> list[Command]:
        """The periodic liveness check of the running trials' processes (if any is to be asked): this
        machine's here, each other member's through its probe (``ProbeCheck``)."""
        local: list[tuple[str, int, int]] = []
        remote: dict[str, list[tuple[str, int, int]]] = {}  # member -> its trials' processes
        for rec in self.table.with_status(TrialStatus.RUNNING):
            pid = self.local_pid(rec.trial_id, rec.run_id)
            if pid is not None:
                local.append((rec.trial_id, rec.run_id, pid))
            elif self.spec.multi_host and self.spec.actor_processes:
                member, pid = self.members.where(rec.trial_id), self.watch.pid(rec.trial_id, rec.run_id)
                if pid is not None and member is not None and member != self.members.leader_id:
                    remote.setdefault(member, []).append((rec.trial_id, rec.run_id, pid))
        out: list[Command] = []
        if local or self.watch.gone:
            out.append(CheckProcesses(tuple(local), always_answer=bool(self.watch.gone)))
        probes = self.members.probes
        out += [Send(probes[m], ProbeCheck(tuple(procs))) for m, procs in remote.items() if m in probes]
        return out

    def processes_gone(self, msg: ProcessesChecked | ProbeChecked) -> Iterator[RunLost]:
        """Trial processes gone at two checks in a row (of the same machine) with no exit notice heard: those
        runs failed."""
        member = msg.member_id if isinstance(msg, ProbeChecked) else None
        for trial_id, run_id, code in self.watch.seen_gone(msg.gone, member):
            rec = self.table.trials.get(trial_id)
            if rec is None or rec.run_id != run_id or rec.status is not TrialStatus.RUNNING:
                continue
            self.pool.unassign(trial_id)  # never reused; a late ActorGone is ignored
            self.watch.forget(trial_id)
            yield RunLost(trial_id, run_id, death_message(code),
                          "the trial's process is gone (found by the controller's liveness check)\n")

    def kill(self, trial_id: str, run_id: int) -> list[Command]:
        """A trial that did not halt in time: kill its process (here, or through its member's probe) and
        retire its actor; the core then ends the run as the stop asked."""
        out: list[Command] = []
        local = self.local_pid(trial_id, run_id)
        member = self.members.where(trial_id)
        pid = self.watch.pid(trial_id, run_id)
        self.watch.forget(trial_id)
        handle = self.pool.unassign(trial_id)  # never reused; its ActorGone is now ignored
        if local is not None:
            out.append(KillProcess(local))
        elif pid is not None and self.spec.actor_processes and member in self.members.probes:
            out.append(Send(self.members.probes[member], ProbeKill(pid)))
        if handle is not None:
            out.append(Retire(handle))
        return out

    # ------------------------------------------------------------------ members
    def join(self, msg: MemberJoined, now: float) -> list[Command]:
        """A member joined (a replaced one was lost first, by the core): it gets a probe."""
        log.info("member %s joined with %s", msg.member_id, msg.resources)
        self.members.joined(msg.member_id, msg.resources, msg.address, now)
        probe = self.pool.new_handle()
        self.members.probes[msg.member_id] = probe
        return [Spawn(probe, ActorKind.PROBE, msg.member_id),
                Send(probe, ProbeStart(msg.member_id, self.spec.heartbeat_interval_s))]

    def left(self, msg: MemberLeft) -> bool:
        """Whether the member that left is the current registration (an old one expiring changes nothing)."""
        if self.members.is_current(msg.member_id, msg.address):
            return True
        log.info("member %s: an old registration (%s) expired; the current one stays", msg.member_id, msg.address)
        return False

    def heartbeat(self, msg: MemberHeartbeat, now: float) -> bool:
        """Whether the member was lost and is reachable again."""
        if self.members.heartbeat(msg.member_id, now):
            log.warning("member %s is reachable again", msg.member_id)
            return True
        return False

    def lose(self, member_id: str, why: str) -> Iterator[Command | RunLost] | None:
        """The member is unreachable (None if it was lost already): its idle actors and its trials' actors
        are retired, its running trials' runs are lost and restart elsewhere."""
        trials = self.members.lose(member_id)
        if trials is None:
            return None
        log.warning("member %s lost (%s); %d trial(s) restart elsewhere", member_id, why, len(trials))
        return self._lost(member_id, trials, why)

    def _lost(self, member_id: str, trials: list[str], why: str) -> Iterator[Command | RunLost]:
        for idle in self.pool.drop_idle(member_id):  # parked there: dead with it, never to be reused
            yield Retire(idle)
        for trial_id in trials:
            rec = self.table.get(trial_id)
            handle = self.pool.unassign(trial_id)
            if handle is not None:
                yield Retire(handle)  # delivered if the member comes back
            self.members.release(trial_id)
            if rec.status is TrialStatus.RUNNING:
                yield RunLost(trial_id, rec.run_id, f"lost contact with member {member_id!r} ({why})", "host lost\n")

    def unplaceable(self, now: float) -> str | None:
        """A trial that no member can ever hold is an error, once members had time to join: the problem. A paused
        one too (a scheduler that resizes trials may give one more than any member has: Ray would wait for ever)."""
        pending = self.table.with_status(TrialStatus.PENDING) + self.table.with_status(TrialStatus.PAUSED)
        waiting = bool(pending) and not self.table.running
        needs = [self.members.need_of(r.resources) for r in pending] if self.spec.resources_of is not None else None
        waited = self.members.unplaceable_for(waiting, now, needs)
        if waited is None:
            return None
        need = needs[0] if needs else self.members.need
        if waited == 0:
            log.warning("no member can hold a trial needing %s (members: %s); waiting up to %.0fs "
                        "(RunConfig(placement_timeout_s)) for a worker big enough to join", need,
                        self.members.rows() or "none yet", self.spec.placement_grace_s)
        elif waited > self.spec.placement_grace_s and not self.spec.multi_host:
            return (f"no trial waiting can ever run on this machine: one needs {need}, the machine offers "
                    f"{self.spec.total_resources} (a restored trial keeps the resources it was given); run it "
                    "where there is room, or declare more with init(...)")
        elif waited > self.spec.placement_grace_s:
            return (f"no member can ever run a trial needing {need} (members: "
                    f"{self.members.rows() or 'no member has joined'}); start workers with enough "
                    "resources (audition worker --cpus N --resources JSON), or, if the scheduler resized it (a "
                    "ResourceChangingScheduler shares the whole cluster's CPUs), cap its allocation at one member's")
        return None


__all__ = ["Cluster", "RunLost"]
