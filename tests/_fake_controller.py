"""A pure stand-in for the engine, for scheduler tests.

``FakeController`` is the ``controller`` handle: it records every call and
keeps a table of snapshots whose status the test (or ``Simulator``) updates.
``Simulator`` replays scripted result streams through a scheduler and applies
its decisions and requests the way the engine does: the hook's own decision
first, then its controller calls in order; a PAUSE saves a checkpoint; a
resume of a trial whose pause is pending lands after the pause; STOP of a
running trial ends in ``on_trial_complete``, of an idle one in
``on_trial_remove``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from actors._engine.reducer import Decision, merge
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.schedulers._base import Scheduler, SchedulerController

Call = tuple[Any, ...]


class FakeController(SchedulerController):
    """Records requests; ``take()`` hands over those made since the last call."""

    def __init__(self) -> None:
        self.trials: dict[str, TrialSnapshot] = {}
        self.calls: list[Call] = []
        self._new: list[Call] = []

    # -- table
    def add_trial(self, trial_id: str, config: dict[str, Any] | None = None,
                  status: TrialStatus = TrialStatus.PENDING) -> TrialSnapshot:
        snap = TrialSnapshot(trial_id, dict(config or {}), status)
        self.trials[trial_id] = snap
        return snap

    def get(self, trial_id: str) -> TrialSnapshot:
        return self.trials[trial_id]

    def update(self, trial_id: str, **changes: Any) -> TrialSnapshot:
        self.trials[trial_id] = dataclasses.replace(self.trials[trial_id], **changes)
        return self.trials[trial_id]

    def set_status(self, trial_id: str, status: TrialStatus) -> TrialSnapshot:
        return self.update(trial_id, status=status)

    def status(self, trial_id: str) -> TrialStatus:
        return self.trials[trial_id].status

    # -- the controller interface
    def _record(self, call: Call) -> None:
        self.calls.append(call)
        self._new.append(call)

    def pause_trial(self, trial: TrialSnapshot, should_checkpoint: bool = True) -> None:
        self._record(("pause", trial.trial_id, should_checkpoint))

    def stop_trial(self, trial: TrialSnapshot) -> None:
        self._record(("stop", trial.trial_id))

    def resume_trial(self, trial: TrialSnapshot) -> None:
        self._record(("resume", trial.trial_id))

    def checkpoint_trial(self, trial: TrialSnapshot) -> None:
        self._record(("checkpoint", trial.trial_id))

    def clone_trial(self, trial: TrialSnapshot, source: TrialSnapshot, new_config: dict[str, Any],
                    info: dict[str, Any], wait_for_checkpoint: bool = False,
                    experiment_tag: str | None = None) -> None:
        self._record(("clone", trial.trial_id, source.trial_id, dict(new_config), dict(info)))

    def log_policy(self, trial: TrialSnapshot, source: TrialSnapshot, row: dict[str, Any]) -> None:
        self._record(("policy", trial.trial_id, source.trial_id, dict(row)))

    def get_trials(self) -> list[TrialSnapshot]:
        return list(self.trials.values())

    def take(self) -> list[Call]:
        out, self._new = self._new, []
        return out

    def calls_of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c[0] == kind]


class Stranded(AssertionError):
    """Nothing runs, trials wait, and the scheduler chose none of them (the engine would abort)."""


class Simulator:
    """Drives one scheduler through add / report / complete / choose like the engine."""

    def __init__(self, scheduler: Scheduler, metric: str | None = None, mode: str | None = None) -> None:
        self.scheduler = scheduler
        self.ctl = FakeController()
        if metric is not None or mode is not None:
            scheduler.set_search_properties(metric, mode)
        self.iteration: dict[str, int] = {}
        self.decisions: list[tuple[str, int, Decision]] = []
        self.hooks: list[tuple[str, str]] = []  # ("complete" | "remove" | "error", trial_id)
        self.started: list[str] = []

    # -- events
    def add(self, trial_id: str, config: dict[str, Any] | None = None) -> None:
        snap = self.ctl.add_trial(trial_id, config)
        self.iteration[trial_id] = 0
        self.scheduler.on_trial_add(self.ctl, snap)
        self._apply(None, Decision.CONTINUE)

    def start(self, trial_id: str) -> None:
        assert self.ctl.status(trial_id) in (TrialStatus.PENDING, TrialStatus.PAUSED), trial_id
        self.ctl.set_status(trial_id, TrialStatus.RUNNING)
        self.started.append(trial_id)

    def report(
        self, trial_id: str, *, done: bool = False, t: float | None = None, checkpoint: bool = False,
        **metrics: Any,
    ) -> Decision:
        """Deliver the trial's next result (``t`` is its time_total_s, default = iteration;
        ``checkpoint``: the trainable saved a checkpoint along with this result)."""
        assert self.ctl.status(trial_id) is TrialStatus.RUNNING, (trial_id, self.ctl.status(trial_id))
        self.iteration[trial_id] += 1
        it = self.iteration[trial_id]
        result = {**metrics, "trial_id": trial_id, "training_iteration": it,
                  "time_total_s": float(it if t is None else t), "timestamp": it, "done": done}
        snap = self.ctl.update(trial_id, last_result=dict(result))
        if checkpoint:
            snap = self.ctl.update(trial_id, checkpoint_iteration=it)
        decision = Decision(self.scheduler.on_trial_result(self.ctl, snap, result))
        self.decisions.append((trial_id, it, decision))
        self._apply(trial_id, decision)
        if done and not self.ctl.status(trial_id).is_finished:
            self.complete(trial_id)  # the trainable returned: it ends whatever was decided
        return decision

    def complete(self, trial_id: str) -> None:
        snap = self.ctl.set_status(trial_id, TrialStatus.TERMINATED)
        self.hooks.append(("complete", trial_id))
        self.scheduler.on_trial_complete(self.ctl, snap, dict(snap.last_result))
        self._apply(None, Decision.CONTINUE)

    def error(self, trial_id: str) -> None:
        snap = self.ctl.set_status(trial_id, TrialStatus.ERROR)
        self.hooks.append(("error", trial_id))
        self.scheduler.on_trial_error(self.ctl, snap)
        self._apply(None, Decision.CONTINUE)

    def choose(self) -> str | None:
        """Ask for a trial to run and start it."""
        pick = self.scheduler.choose_trial_to_run(self.ctl)
        if pick is not None:
            assert pick.status in (TrialStatus.PENDING, TrialStatus.PAUSED), pick
        self._apply(None, Decision.CONTINUE)
        if pick is None or self.ctl.status(pick.trial_id).is_finished:
            return None
        self.start(pick.trial_id)
        return pick.trial_id

    def fill(self, slots: int) -> None:
        while len(self.running()) < slots and self.waiting():
            if self.choose() is None:
                break
        if not self.running() and self.waiting():
            raise Stranded(f"nothing runs and the scheduler chose none of {self.waiting()}")

    def running(self) -> list[str]:
        return [t for t, s in self.ctl.trials.items() if s.status is TrialStatus.RUNNING]

    def waiting(self) -> list[str]:
        idle = (TrialStatus.PENDING, TrialStatus.PAUSED)
        return [t for t, s in self.ctl.trials.items() if s.status in idle]

    def run(self, metric_fn: Callable[[str, int], dict[str, Any]], slots: int, max_iter: int,
            max_steps: int = 100_000) -> None:
        """Run every trial to the end: ``metric_fn(trial_id, iteration)`` gives each result's
        metrics; a trial reports ``done`` at ``max_iter``; running trials take turns."""
        for _ in range(max_steps):
            self.fill(slots)
            running = self.running()
            if not running:
                return
            for tid in running:
                if self.ctl.status(tid) is not TrialStatus.RUNNING:
                    continue
                it = self.iteration[tid] + 1
                self.report(tid, done=it >= max_iter, **metric_fn(tid, it))
                self.fill(slots)
        raise AssertionError("the simulation did not finish")

    # -- applying a hook's decision and requests, in the engine's order
    def _apply(self, current: str | None, decision: Decision) -> None:
        pending: dict[str, Decision] = {}
        resume: set[str] = set()
        cloned: set[str] = set()
        if current is not None and self.ctl.status(current) is TrialStatus.RUNNING:
            pending[current] = decision
        removed: list[str] = []
        for call in self.ctl.take():
            kind, tid = call[0], call[1]
            status = self.ctl.status(tid)
            if status.is_finished:
                continue
            if kind == "resume":
                if status is TrialStatus.PAUSED:
                    self.ctl.set_status(tid, TrialStatus.PENDING)
                elif status is TrialStatus.RUNNING and pending.get(tid) is Decision.PAUSE:
                    resume.add(tid)
            elif kind == "checkpoint":
                if status is TrialStatus.RUNNING:
                    self.ctl.update(tid, checkpoint_iteration=self.iteration[tid])
            elif kind == "clone":
                source = self.ctl.get(call[2])
                self.ctl.update(tid, config=dict(call[3]), checkpoint_iteration=source.checkpoint_iteration)
                cloned.add(tid)
                if status is TrialStatus.RUNNING:
                    pending[tid] = merge(pending.get(tid, Decision.CONTINUE), Decision.PAUSE)
                    resume.add(tid)
                elif status is TrialStatus.PAUSED:
                    self.ctl.set_status(tid, TrialStatus.PENDING)
            else:
                d = Decision.STOP if kind == "stop" else Decision.PAUSE
                if status is TrialStatus.RUNNING:
                    pending[tid] = merge(pending.get(tid, Decision.CONTINUE), d)
                elif d is Decision.STOP:
                    self.ctl.set_status(tid, TrialStatus.TERMINATED)
                    removed.append(tid)
                elif status is TrialStatus.PENDING:
                    self.ctl.set_status(tid, TrialStatus.PAUSED)
        completed: list[str] = []
        for tid, d in pending.items():
            if d is Decision.STOP:
                self.ctl.set_status(tid, TrialStatus.TERMINATED)
                completed.append(tid)
            elif d is Decision.PAUSE:
                self.ctl.set_status(tid, TrialStatus.PENDING if tid in resume else TrialStatus.PAUSED)
                if tid not in cloned:  # a pause saves a checkpoint; a clone brings the source's
                    self.ctl.update(tid, checkpoint_iteration=self.iteration[tid])
        for tid in removed:
            self.hooks.append(("remove", tid))
            self.scheduler.on_trial_remove(self.ctl, self.ctl.get(tid))
            self._apply(None, Decision.CONTINUE)
        for tid in completed:
            self.hooks.append(("complete", tid))
            snap = self.ctl.get(tid)
            self.scheduler.on_trial_complete(self.ctl, snap, dict(snap.last_result))
            self._apply(None, Decision.CONTINUE)
