"""Runs scheduler hooks against a mirror of the trial table, recording requests.

Pure (no actor runtime): the scheduler actor wraps it, and users' plugin tests
can drive it directly.  Each ``SchedulerCall`` becomes exactly one
``SchedulerReply`` carrying the hook's decision and every controller call the
hook made, in order.
"""

from __future__ import annotations

import pickle
from dataclasses import replace
from typing import Any

from actors._engine.errors import ConfigError
from actors._engine.flat import flatten
from actors._engine.hook_view import before_result, tagged
from actors._engine.horizon import clean_horizon
from actors._engine.reducer import Decision, as_decision, merge
from actors._engine.resource_request import ray_named, summed_resources
from actors._engine.trial import TrialDescription, TrialSnapshot, TrialStatus, tag_of
from actors._legacy import loads as legacy_loads
from actors.messages import (
    ActionKind,
    HookKind,
    SaveKind,
    SchedulerAction,
    SchedulerCall,
    SchedulerReply,
)
from actors.schedulers._base import Scheduler, SchedulerController


def _pause_saves(actions: list[SchedulerAction], trial_id: str) -> list[SchedulerAction]:
    """The hook's own save of a trial its result pauses is that pause's save: Ray 2.60 skips a result's
    ``checkpoint_frequency`` save when its decision is PAUSE and pauses after the scheduler's save without
    another, so an iteration already committed here (that frequency's checkpoint) is not saved again."""
    return [replace(a, save=SaveKind.PAUSE) if a.kind is ActionKind.CHECKPOINT and a.trial_id == trial_id else a
            for a in actions]


class RecordingController(SchedulerController):
    """The ``controller`` handle schedulers see: requests are recorded, not applied."""

    def __init__(self, resizes: bool = False) -> None:
        self.resizes = resizes  # the scheduler declared ``changes_trial_resources``: the run places trials by size
        self.trials: dict[str, TrialSnapshot] = {}
        self.actions: list[SchedulerAction] = []
        self.cluster: dict[str, float] = {}  # audition's names, as the last call carrying them gave them

    def _id(self, trial: TrialSnapshot | str) -> str:
        return trial if isinstance(trial, str) else trial.trial_id

    def pause_trial(self, trial: TrialSnapshot, should_checkpoint: bool = True) -> None:
        self.actions.append(SchedulerAction(ActionKind.PAUSE, self._id(trial), should_checkpoint))

    def stop_trial(self, trial: TrialSnapshot) -> None:
        self.actions.append(SchedulerAction(ActionKind.STOP, self._id(trial)))

    def resume_trial(self, trial: TrialSnapshot) -> None:
        self.actions.append(SchedulerAction(ActionKind.RESUME, self._id(trial)))

    def checkpoint_trial(self, trial: TrialSnapshot) -> None:
        self.actions.append(SchedulerAction(ActionKind.CHECKPOINT, self._id(trial)))

    def clone_trial(
        self, trial: TrialSnapshot, source: TrialSnapshot, new_config: dict[str, Any], info: dict[str, Any],
        wait_for_checkpoint: bool = False, experiment_tag: str | None = None,
    ) -> None:
        self.actions.append(
            SchedulerAction(
                ActionKind.CLONE, self._id(trial), False, self._id(source), dict(new_config), dict(info),
                wait_for_source=wait_for_checkpoint, experiment_tag=experiment_tag,
            )
        )

    def log_policy(self, trial: TrialSnapshot, source: TrialSnapshot, row: dict[str, Any]) -> None:
        self.actions.append(SchedulerAction(ActionKind.LOG_POLICY, self._id(trial), False, self._id(source),
                                            info=dict(row)))

    def get_trials(self) -> list[TrialSnapshot]:
        return list(self.trials.values())

    def set_trial_resources(self, trial: TrialSnapshot | str, resources: Any) -> None:
        if not self.resizes:
            raise ConfigError("set_trial_resources(): the scheduler's class must declare changes_trial_resources = "
                              "True, so that the experiment places each trial by its own size")
        new = summed_resources(resources, f"set_trial_resources({self._id(trial)})")
        self.actions.append(SchedulerAction(ActionKind.RESOURCES, self._id(trial), False, info={"resources": new}))

    def cluster_resources(self) -> dict[str, float]:
        return ray_named({"cpu": 0.0, "gpu": 0.0, **self.cluster})

    @property
    def search_alg(self) -> _SearcherCalls:
        """Calls recorded as ``SEARCHER`` actions (``SchedulerController.search_alg``)."""
        return _SearcherCalls(self.actions)


class _SearcherCalls:
    """Records calls of the search algorithm's methods (``SEARCHER`` actions)."""

    def __init__(self, actions: list[SchedulerAction]) -> None:
        self._actions = actions

    @property
    def searcher(self) -> _SearcherCalls:
        return self

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)

        def call(*args: Any) -> None:
            trial_id = args[0] if args and isinstance(args[0], str) else ""
            self._actions.append(SchedulerAction(ActionKind.SEARCHER, trial_id, False, method=method, args=args))
        return call


_HOOK_METHODS = {
    HookKind.ADD: "on_trial_add",
    HookKind.RESULT: "on_trial_result",
    HookKind.COMPLETE: "on_trial_complete",
    HookKind.ERROR: "on_trial_error",
    HookKind.REMOVE: "on_trial_remove",
}


def horizon_attr(scheduler: Scheduler) -> str | None:
    """The key the plugin's decision horizons are measured in, if it declares horizons (a plugin
    that tolerates batching runs ahead anyway, and one that does not decide per result needs none)."""
    attr = scheduler.horizon_attr()
    if attr is None or scheduler.batching_allowed():
        return None
    if not isinstance(attr, str) or not attr:
        raise TypeError(f"{type(scheduler).__name__}.horizon_attr() must return a result key (str) or None, "
                        f"got {attr!r}")
    return attr


def overridden_hooks(scheduler: Scheduler) -> frozenset[HookKind]:
    """Hooks the plugin implements; CHOOSE and SAVE always go to the plugin."""
    cls = type(scheduler)
    own = {k for k, name in _HOOK_METHODS.items() if getattr(cls, name) is not getattr(Scheduler, name)}
    return frozenset(own | {HookKind.CHOOSE, HookKind.SAVE})


class SchedulerHost:
    """Owns one scheduler object and answers ``SchedulerCall``s."""

    def __init__(self, scheduler: Scheduler, metric: str | None, mode: str | None,
                 state: bytes | None = None, describe: TrialDescription | None = None,
                 search_properties: bool = True) -> None:
        if not isinstance(scheduler, Scheduler):
            raise TypeError(
                f"scheduler must be an actors.schedulers.Scheduler instance, got {type(scheduler).__name__}"
            )
        self.scheduler = scheduler
        self.controller = RecordingController(bool(getattr(scheduler, "changes_trial_resources", False)))
        # per trial, its last result as Ray's Trial.last_result holds it once that result's hooks ran
        # (tagged): what the next result's hook sees (hook_view.before_result)
        self.seen: dict[str, dict[str, Any]] = {}
        self.saved: dict[str, dict[str, Any]] = {}  # per trial, its latest result that carried a checkpoint
        # Ray's Trial fields the controller's snapshots leave out (its name, directory, evaluated_params)
        self.describe = describe
        self.evaluated: dict[str, dict[str, Any]] = {}  # per trial, worked out once
        if search_properties:  # (an experiment's driver did, on the object this is a copy of: Ray calls it once)
            scheduler.set_search_properties(metric, mode)
        self.horizon_attr = horizon_attr(scheduler)
        # whether a hook's changes to its result dict are looked for (for the search algorithm): not for a
        # class of audition's that declares it leaves results as they are (its own body; a subclass is watched)
        self.watch_results = not type(scheduler).__dict__.get("_leaves_results", False)
        if state is not None:
            saved = legacy_loads(state)
            scheduler.restore(saved["scheduler"])
            # (a state saved before 2026-12-04 also holds the mirror; the core's first call after a
            # restore sends every trial again, so it is no longer saved)
            self.controller.trials = dict(saved.get("trials") or {})

    def handle(self, call: SchedulerCall) -> SchedulerReply:
        ctl = self.controller
        for snap in call.updates:
            ctl.trials[snap.trial_id] = self._mirrored(snap, ctl.trials.get(snap.trial_id))
        if call.cluster is not None:
            ctl.cluster = dict(call.cluster)
        if call.order:  # the table's order changed (a retry requeued, a restore): the mirror follows it
            ctl.trials = {t: ctl.trials[t] for t in (*call.order, *ctl.trials) if t in ctl.trials}
        ctl.actions = []
        for trial_id, source_id in call.skipped_clones:  # (before the hook; its requests go with this reply)
            self.scheduler.on_clone_skipped(ctl, trial_id, source_id)
        decision = Decision.CONTINUE
        chosen: str | None = None
        state: bytes | None = None
        trial = ctl.trials.get(call.trial_id) if call.trial_id else None
        sched = self.scheduler
        horizon: float | None = None
        notes: tuple[dict[str, Any] | None, ...] = ()
        if call.kind is HookKind.RESULT:
            assert trial is not None
            tid = trial.trial_id
            noted: list[dict[str, Any] | None] | None = [] if self.watch_results else None
            for result in call.results:
                # as Ray 2.60: during the hook trial.last_result is still the previous result (recorded)
                ctl.trials[tid] = _with_last(trial, before_result(
                    result, self.seen.get(tid, {}), trial.run_start, tid, trial.config, self.saved.get(tid)))
                flat = flatten(result)  # as Ray Tune: "val/loss" keys
                before = {} if noted is None else flat.copy()  # (compared only when noted)
                d = sched.on_trial_result(ctl, ctl.trials[tid], flat)
                if noted is not None:
                    noted.append(None if _same(flat, before) else flat)
                decision = merge(decision, as_decision(d))
                new = tagged(result, trial.experiment_tag)
                trial = ctl.trials[tid] = _with_last(trial, new if new is not result else dict(result))
                self.seen[tid] = trial.last_result
                if result.get("should_checkpoint"):
                    self.saved[tid] = result
            if decision is Decision.PAUSE:
                ctl.actions = _pause_saves(ctl.actions, trial.trial_id)
            horizon = self._horizon(trial)
            if noted and any(n is not None for n in noted):
                notes = tuple(noted)
        elif call.kind is HookKind.ADD:
            assert trial is not None
            ctl.trials[trial.trial_id] = ctl.trials.pop(trial.trial_id)  # added again (a retry): listed last
            sched.on_trial_add(ctl, trial)
            horizon = self._horizon(trial)
        elif call.kind is HookKind.COMPLETE:
            assert trial is not None
            # Ray 2.60 passes flatten(trial.last_result): the last result, ending with its experiment_tag
            last = call.results[-1] if call.results else trial.last_result
            sched.on_trial_complete(ctl, trial, flatten(tagged(last, trial.experiment_tag)))
        elif call.kind is HookKind.ERROR:
            assert trial is not None
            sched.on_trial_error(ctl, trial)
        elif call.kind is HookKind.REMOVE:
            assert trial is not None
            sched.on_trial_remove(ctl, trial)
        elif call.kind is HookKind.CHOOSE:
            pick = sched.choose_trial_to_run(ctl)
            chosen = pick.trial_id if pick is not None else None
        elif call.kind is HookKind.SAVE:
            # the plugin's state only: the mirror is the core's table, which a restore sends again
            state = pickle.dumps({"scheduler": sched._save_to_pickle()})
        return SchedulerReply(call.seq, call.kind, call.trial_id, decision, tuple(ctl.actions), chosen, state,
                              horizon, notes)

    def _horizon(self, trial: TrialSnapshot) -> float | None:
        return clean_horizon(self.scheduler.decision_horizon(trial)) if self.horizon_attr else None

    def _mirrored(self, snap: TrialSnapshot, old: TrialSnapshot | None) -> TrialSnapshot:
        """The controller's snapshot with ``last_result`` as Ray's ``Trial`` holds it: a reported result
        ends with its ``experiment_tag`` but where a run starts from a checkpoint (that checkpoint's
        result, untagged); before any result, the keys the run had (or a retried run keeps the failed
        run's last result). The snapshot of a result being decided is the hook's to show (``handle``)."""
        if self.describe is not None:
            snap = self._described(snap)
        last = snap.last_result
        if "training_iteration" not in last:
            seen = self.seen.get(snap.trial_id, {})
            last = seen or snap.run_start or last
        elif not (snap.status is TrialStatus.RUNNING and (old is None or old.status is not TrialStatus.RUNNING)):
            last = tagged(last, snap.experiment_tag)
        return snap if last is snap.last_result else _with_last(snap, dict(last))

    def _described(self, snap: TrialSnapshot) -> TrialSnapshot:
        assert self.describe is not None
        params = self.evaluated.get(snap.trial_id)
        if params is None:
            params = self.evaluated[snap.trial_id] = tag_of(snap.trial_id, snap.config, self.describe.tag_paths)[1]
        return self.describe.described(snap, params)


def _same(flat: dict[str, Any], before: dict[str, Any]) -> bool:
    """Whether the hook left the flattened result as it got it (the same keys, each the same object)."""
    return len(flat) == len(before) and all(before.get(k, _ABSENT) is v for k, v in flat.items())


_ABSENT = object()


def _with_last(trial: TrialSnapshot, last: dict[str, Any]) -> TrialSnapshot:
    """The snapshot with another last result, every other field kept (the trial's name too). Once
    per result: a copy of the frozen dataclass's fields (0.5 us; ``dataclasses.replace``: 4 us)."""
    new = object.__new__(TrialSnapshot)
    new.__dict__.update(trial.__dict__)
    new.__dict__["last_result"] = last
    return new


__all__ = ["RecordingController", "SchedulerHost", "horizon_attr", "overridden_hooks"]
