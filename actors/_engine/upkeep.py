"""What time and the cluster bring between a trial's messages: the periodic tick's checks (time limits,
trials that did not halt in time, the trial processes' liveness, progress rows, members gone silent,
a trial no member can hold), the trial processes' pids, and the members' own events (joined, left,
reachable again).

Each ends in trials stopped or runs lost; ending a run (hooks, retries, the searcher) and the experiment's
phase stay the core's, which the tick's phase deadlines and state snapshot are part of. Separate from the
core because none of it is on a trial's own path; ``Cluster`` says what the cluster side means (commands,
``RunLost`` notices) and this carries it out through ``CoreOps``.
"""

from __future__ import annotations

from actors._engine.cluster import Cluster, RunLost
from actors._engine.feed import DriverFeed, progress_report
from actors._engine.lifecycle import Effect, TrialTable
from actors._engine.members import Membership
from actors._engine.port import CoreOps
from actors._engine.signals import DRIVER, MemberJoined, MemberLeft, ProcessesChecked
from actors._engine.spec import ExperimentSpec
from actors._engine.trial import TrialStatus
from actors._engine.verdicts import stopper_failed
from actors._engine.watch import Watchdog
from actors.messages import ActionKind, EndReason, MemberHeartbeat, ProbeChecked, SchedulerAction, TrialProcess


class Upkeep:
    """The periodic checks and the members' events, carried out on the core's objects."""

    def __init__(self, spec: ExperimentSpec, table: TrialTable, members: Membership, cluster: Cluster,
                 watch: Watchdog, feed: DriverFeed, ops: CoreOps) -> None:
        self.spec = spec
        self.table = table
        self.members = members
        self.cluster = cluster
        self.watch = watch
        self.feed = feed
        self.ops = ops

    # ------------------------------------------------------------------ the ticks
    def tick(self, elapsed: float) -> bool:
        """The periodic tick's checks (``elapsed``: since the experiment started); False if it has finished."""
        now = self.ops.now
        self.check_time_limits()
        self.ops.emit(self.cluster.ask_processes())
        for trial_id, run_id in self.watch.overdue(self.table, now):
            self.kill(trial_id, run_id)
        if self.ops.finished:
            return False
        if self.spec.progress_reports:
            self.ops.send(DRIVER, progress_report(self.spec, self.table, self.members.placement.where, elapsed))
        self.ops.emit(self.feed.flush())
        if self.spec.multi_host:
            for member_id in self.members.silent(now, self.spec.heartbeat_timeout_s):
                self._member_gone(member_id, f"no heartbeat for {self.spec.heartbeat_timeout_s:.0f}s")
        if self.spec.multi_host or self.spec.resources_of is not None:  # (trials of their own sizes: a restored
            problem = self.cluster.unplaceable(now)  # one may be bigger than this machine)
            if problem is not None:
                self.ops.abort(problem)
        return True

    def check_time_limits(self) -> None:
        stopper = self.spec.stopper
        if stopper is None:
            return
        try:  # user code: its failure is the user's error
            stop_all = stopper.stop_all()
            limit = stopper.trial_time_limit() if hasattr(stopper, "trial_time_limit") else None
        except Exception as exc:
            self.ops.abort(stopper_failed(stopper, "(none: the periodic time check)", exc))
            return
        effects: list[Effect] = []
        if stop_all:
            effects += self.ops.stop_every_trial()
        elif limit is not None:
            for trial_id in self.watch.over_time(self.table, self.ops.now, limit):
                effects += self.table.request(SchedulerAction(ActionKind.STOP, trial_id))
        self.ops.run(effects)

    def process(self, msg: TrialProcess) -> None:
        """A trial's process is up: its pid for the liveness check and kills (only while that run is the
        trial's running one: an earlier run's notice, delivered late by the transport, would put a dead
        run's pid in place of the live one's, so a later death whose exit notice was lost went unseen
        and the experiment waited for ever), and its start time."""
        rec = self.table.trials.get(msg.trial_id)
        if rec is not None and rec.run_id == msg.run_id and rec.status is TrialStatus.RUNNING:
            self.watch.process(msg.trial_id, msg.run_id, msg.pid)
        self.table.process_started(msg.trial_id, msg.run_id, msg.started)

    def checked(self, msg: ProcessesChecked | ProbeChecked) -> None:
        """Trial processes the liveness check (here, or a member's probe) found gone
        (``Cluster.processes_gone``): their runs failed."""
        for lost in self.cluster.processes_gone(msg):
            self.ops.ended(lost.trial_id, lost.run_id, EndReason.FAILED, None, lost.error, lost.traceback)

    def kill(self, trial_id: str, run_id: int) -> None:
        """End a trial that did not halt in time: kill its process, end it as the stop asked."""
        self.ops.emit(self.cluster.kill(trial_id, run_id))
        self.ops.ended(trial_id, run_id, EndReason.STOPPED)

    # ------------------------------------------------------------------ the members
    def member_joined(self, msg: MemberJoined) -> None:
        if not self.spec.multi_host:
            return
        if self.members.replaced(msg.member_id, msg.address):
            # restarted under the same id before its heartbeats timed out: its trials died with it
            self._member_gone(msg.member_id, "it joined again from a new address")
        self.ops.emit(self.cluster.join(msg, self.ops.now))
        self.ops.fill()

    def member_left(self, msg: MemberLeft) -> None:
        if self.spec.multi_host and self.cluster.left(msg):
            self._member_gone(msg.member_id, "it left the convention")

    def heartbeat(self, msg: MemberHeartbeat) -> None:
        if self.cluster.heartbeat(msg, self.ops.now):
            self.ops.fill()

    def _member_gone(self, member_id: str, why: str) -> None:
        lost = self.cluster.lose(member_id, why)
        if lost is None:
            return
        for item in lost:
            if isinstance(item, RunLost):
                self.ops.host_lost(item)
            else:
                self.ops.put(item)
        self.ops.fill()


__all__ = ["Upkeep"]
