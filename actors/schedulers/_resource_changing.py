"""Ray 2.60's ``ResourceChangingScheduler``: another scheduler decides; this one resizes trials in between.

After each result the wrapped scheduler decides; when it says CONTINUE, ``resources_allocation_function``
(``DistributeResources()`` by default) may give the trial new resources, and then the trial is paused (it saves
a checkpoint, as any PAUSE) and noted. When a trial is next chosen to run, every noted trial that is no longer
running gets its new resources (``tune_controller.set_trial_resources``, Ray's ``trial.update_resources``), and
the wrapped scheduler chooses. The trial restarts from its checkpoint with them: a function trainable reads
them from ``get_context().get_trial_resources()``, a class from ``self.trial_resources``.

audition runs a trial as one process on one machine, so a size of several bundles (``add_bundles=True``)
is placed as their sum. The experiment places each trial by its own size (``changes_trial_resources``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from actors._engine.reducer import Decision, as_decision
from actors._engine.resource_request import PlacementGroupFactory
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import ActionKind
from actors.schedulers._base import FIFOScheduler, Scheduler, SchedulerController
from actors.schedulers._distribute import DistributeResources

Allocation = Callable[[SchedulerController, TrialSnapshot, dict[str, Any], Any], Any]
_DEFAULT: Any = object()  # Ray's default: DistributeResources(add_bundles=False)
_ACTS = (ActionKind.PAUSE, ActionKind.STOP, ActionKind.CLONE)  # requests after which Ray's schedulers say NOOP


class ResourceChangingScheduler(Scheduler):
    """Wraps ``base_scheduler`` (FIFO when None) and resizes live trials with ``resources_allocation_function``
    ``(tune_controller, trial, result, scheduler) -> PlacementGroupFactory | dict | None``, called in the
    scheduler actor after each result the wrapped scheduler lets go on; None leaves the trial as it is. It must
    not block. Unlike Ray's, it runs with ``TuneConfig(reuse_actors=True)`` (audition's default): an idle trial
    process is reused only by a trial of the same size."""

    changes_trial_resources = True
    sees_cluster_resources = True

    def __init__(self, base_scheduler: Scheduler | None = None,
                 resources_allocation_function: Allocation | None = _DEFAULT) -> None:
        if resources_allocation_function is _DEFAULT:
            resources_allocation_function = DistributeResources(add_bundles=False)
        if resources_allocation_function is None:
            warnings.warn("`resources_allocation_function` is None. No resource requirements will be changed at "
                          "any time. Pass a correctly defined function to enable functionality.", stacklevel=2)
        if base_scheduler is not None and not isinstance(base_scheduler, Scheduler):
            raise TypeError(f"ResourceChangingScheduler(base_scheduler=...) takes a scheduler, got "
                            f"{type(base_scheduler).__name__}")
        self._resources_allocation_function = resources_allocation_function
        self._base_scheduler: Scheduler = base_scheduler or FIFOScheduler()
        self._base_trial_resources: PlacementGroupFactory | None = None
        self._trials_to_reallocate: dict[str, Any] = {}  # trial id -> its new resources, set once not running
        self._reallocated_trial_ids: set[str] = set()
        self._metric: str | None = None
        self._mode: str | None = None

    # ------------------------------------------------------------------ what the wrapped scheduler owns
    @property
    def metric(self) -> str | None:  # (Ray's: the wrapped scheduler's)
        return self._base_scheduler.metric

    @metric.setter
    def metric(self, value: str | None) -> None:
        self._base_scheduler.metric = value

    @property
    def mode(self) -> str | None:
        return self._base_scheduler.mode

    @mode.setter
    def mode(self, value: str | None) -> None:
        self._base_scheduler.mode = value

    @property
    def base_trial_resources(self) -> PlacementGroupFactory | None:
        """The first trial's resources: every trial starts from them and never gets less."""
        return self._base_trial_resources

    @property
    def global_numpy_draws_on_add(self) -> int:  # type: ignore[override]
        return self._base_scheduler.global_numpy_draws_on_add

    @property
    def saves_when_asked(self) -> Any:
        return self._base_scheduler.saves_when_asked  # type: ignore[attr-defined]  # (AttributeError: none)

    @saves_when_asked.setter
    def saves_when_asked(self, value: Any) -> None:
        self._base_scheduler.saves_when_asked = value  # type: ignore[attr-defined]

    def config_fill(self) -> Callable[[dict[str, Any]], None] | None:
        return self._base_scheduler.config_fill()

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        from actors.schedulers._common import MetricScheduler

        self._metric, self._mode = metric, mode
        answer = self._base_scheduler.set_search_properties(metric, mode, **spec)
        if answer and isinstance(self._base_scheduler, MetricScheduler):
            self._base_scheduler._objective()  # (its own check of a missing metric, as when it is not wrapped)
        return answer

    # ------------------------------------------------------------------ hooks
    def on_trial_add(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        resources = trial.placement_group_factory
        if self._base_trial_resources is None:
            self._base_trial_resources = resources
        elif trial.trial_id not in self._reallocated_trial_ids and resources != self._base_trial_resources:
            raise RuntimeError(f"ResourceChangingScheduler doesn't support trials with varying base resources. First "
                               f"trial had {self._base_trial_resources}, trial {trial} has {resources}.")
        self._base_scheduler.on_trial_add(tune_controller, trial)

    def on_trial_error(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._base_scheduler.on_trial_error(tune_controller, trial)

    def on_trial_result(self, tune_controller: SchedulerController, trial: TrialSnapshot,
                        result: dict[str, Any]) -> Decision:
        before = len(getattr(tune_controller, "actions", ()))
        decision = as_decision(self._base_scheduler.on_trial_result(tune_controller, trial, result))
        # Ray resizes on CONTINUE, not on NOOP, which its schedulers return when they paused, stopped or cloned the
        # trial themselves (PBT's exploit); audition's NOOP is CONTINUE, so such a request tells them apart
        acted = any(a.trial_id == trial.trial_id and a.kind in _ACTS
                    for a in list(getattr(tune_controller, "actions", ()))[before:])
        if decision is Decision.CONTINUE and not acted:
            new = self.reallocate_trial_resources_if_needed(tune_controller, trial, result)
            if new:
                self._trials_to_reallocate[trial.trial_id] = new
                return Decision.PAUSE
        return decision

    def on_trial_complete(self, tune_controller: SchedulerController, trial: TrialSnapshot,
                          result: dict[str, Any]) -> None:
        self._base_scheduler.on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        self._base_scheduler.on_trial_remove(tune_controller, trial)

    def on_clone_skipped(self, tune_controller: SchedulerController, trial_id: str, source_id: str) -> None:
        self._base_scheduler.on_clone_skipped(tune_controller, trial_id, source_id)

    def choose_trial_to_run(self, tune_controller: SchedulerController) -> TrialSnapshot | None:
        status = {t.trial_id: t.status for t in tune_controller.get_trials()}
        still: dict[str, Any] = {}
        for trial_id, new in self._trials_to_reallocate.items():
            if status.get(trial_id) is TrialStatus.RUNNING:  # (its pause has not landed yet)
                still[trial_id] = new
                continue
            self.set_trial_resources(tune_controller, trial_id, new)
        self._trials_to_reallocate = still
        return self._base_scheduler.choose_trial_to_run(tune_controller)

    def debug_string(self) -> str:
        return f"(ResourceChangingScheduler) {self._base_scheduler.debug_string()}"

    def save(self) -> dict[str, Any]:
        """Its state and the wrapped scheduler's; not the allocation function, which is configuration (a
        function local to the script's, as in Ray's examples, could not be pickled with the state)."""
        return {"base": self._base_scheduler.save(), "base_trial_resources": self._base_trial_resources,
                "to_reallocate": dict(self._trials_to_reallocate), "reallocated": set(self._reallocated_trial_ids),
                "metric": self._metric, "mode": self._mode}

    def _save_to_pickle(self) -> dict[str, Any]:
        return {**self.save(), "base": self._base_scheduler._save_to_pickle()}

    def restore(self, state: dict[str, Any]) -> None:
        self._base_scheduler.restore(state["base"])
        self._base_trial_resources = state["base_trial_resources"]
        self._trials_to_reallocate = dict(state["to_reallocate"])
        self._reallocated_trial_ids = set(state["reallocated"])
        self._metric, self._mode = state["metric"], state["mode"]

    # ------------------------------------------------------------------ resizing
    def set_trial_resources(self, tune_controller: SchedulerController, trial_id: str, new: Any) -> bool:
        """Give the trial ``new`` resources from its next start; False if there were none to give."""
        if not new:
            return False
        tune_controller.set_trial_resources(_by_id(tune_controller, trial_id), new)
        self._reallocated_trial_ids.add(trial_id)
        return True

    def _are_resources_the_same(self, trial: TrialSnapshot, new: Any) -> bool:
        return isinstance(new, PlacementGroupFactory) and trial.placement_group_factory == new

    def reallocate_trial_resources_if_needed(self, tune_controller: SchedulerController, trial: TrialSnapshot,
                                             result: dict[str, Any]) -> Any:
        """The allocation function's answer for ``trial``, or None when it gives none or the trial's own."""
        fn = self._resources_allocation_function
        if fn is None:
            return None
        if not getattr(fn, "metric", None):  # (Ray's: the wrapped scheduler's, which took the experiment's)
            fn.metric = getattr(self._base_scheduler, "metric", self._metric)  # type: ignore[attr-defined]
        if not getattr(fn, "mode", None):
            fn.mode = getattr(self._base_scheduler, "mode", self._mode)  # type: ignore[attr-defined]
        new = fn(tune_controller, trial, result, self)
        if new is None or self._are_resources_the_same(trial, new):
            return None
        return new


def _by_id(tune_controller: SchedulerController, trial_id: str) -> TrialSnapshot | str:
    return next((t for t in tune_controller.get_trials() if t.trial_id == trial_id), trial_id)


__all__ = ["ResourceChangingScheduler"]
