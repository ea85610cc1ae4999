"""The scheduler plugin contract.

A :class:`Scheduler` lives inside the scheduler plugin actor, never in the
controller: it is created there from a cloudpickled copy, its hooks are called
one at a time from that actor's message loop, and it reaches the controller
only through the ``tune_controller`` handle passed to every hook (Ray's name).  The handle records
requests (pause, stop, resume, checkpoint, clone); they travel back to the
controller as one message per hook call and are merged into each trial's pending
decision by the reducer, so no call can overwrite another.

Hooks must not block for long: while a hook runs, no other trial's result is
scheduled.  Trials are read-only :class:`~actors._engine.trial.TrialSnapshot` values.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, TrialStatus


class SchedulerController(ABC):
    """What a scheduler may ask of the controller from inside a hook.

    Requests are not applied immediately: they are collected while the hook runs
    and merged into the target trials' pending decisions when the hook returns.
    """

    @abstractmethod
    def pause_trial(self, trial: TrialSnapshot, should_checkpoint: bool = True) -> None:
        """Pause ``trial`` (after saving a checkpoint unless told not to)."""

    @abstractmethod
    def stop_trial(self, trial: TrialSnapshot) -> None:
        """Stop ``trial`` for good (it ends TERMINATED)."""

    @abstractmethod
    def resume_trial(self, trial: TrialSnapshot) -> None:
        """Make a PAUSED trial runnable again; if its pause is still in flight the
        resume is applied as soon as the pause completes, never dropped."""

    @abstractmethod
    def checkpoint_trial(self, trial: TrialSnapshot) -> None:
        """Ask a running trial to save a checkpoint without pausing it."""

    @abstractmethod
    def clone_trial(
        self, trial: TrialSnapshot, source: TrialSnapshot, new_config: dict[str, Any], info: dict[str, Any],
        wait_for_checkpoint: bool = False, experiment_tag: str | None = None,
    ) -> None:
        """Restart ``trial`` from ``source``'s latest checkpoint with ``new_config``
        (PBT's exploit/explore); ``info`` is recorded in the trial's next result. With
        ``wait_for_checkpoint``, a save of ``source`` still in flight is waited for and its checkpoint
        used (``trial`` pauses now and does not run again before it landed), as Ray Tune's PBT does.
        ``experiment_tag``: the trial's tag from then on (Ray's ``trial.set_experiment_tag``; None keeps it)."""

    def log_policy(self, trial: TrialSnapshot, source: TrialSnapshot, row: dict[str, Any]) -> None:
        """Log an exploit in Ray's PBT policy files (``pbt_global.txt``, ``pbt_policy_<id>.txt``): ``row``
        has ``trial_tag``/``source_tag`` (their tags when added; or ``trial_tag_config``/``source_tag_config``,
        their configs then, to work the tags out from), ``trial_iteration``,
        ``source_iteration``, ``source_config`` and ``new_config``. A controller without files ignores it."""

    @abstractmethod
    def get_trials(self) -> list[TrialSnapshot]:
        """Snapshots of every trial the scheduler has been told about."""

    @property
    def search_alg(self) -> Any:
        """Ray's ``tune_controller.search_alg``, and its ``.searcher``: a method called on it (HyperBandForBOHB's
        ``search_alg.searcher.on_pause(trial_id)``) is recorded like the requests above and made on the
        experiment's search algorithm in the controller after the hook returns, before that algorithm hears of
        the result being decided; the call returns None. A search algorithm without the method ends the run
        naming it (Ray raises ``AttributeError``)."""
        raise NotImplementedError(f"{type(self).__name__} does not reach the search algorithm")

    def get_live_trials(self) -> set[TrialSnapshot]:
        """Ray's ``tune_controller.get_live_trials()``: the trials not ended yet (PENDING, RUNNING or PAUSED),
        as a set, as Ray's schedulers use it."""
        return {t for t in self.get_trials() if not t.status.is_finished}

    def set_trial_resources(self, trial: TrialSnapshot | str, resources: Any) -> None:
        """Run ``trial`` with ``resources`` (a dict, or a ``PlacementGroupFactory`` whose bundles are summed:
        a trial is one process on one machine) from its next start on; a running trial keeps what it holds
        until then. Ray's ``trial.update_resources``, as its ``ResourceChangingScheduler`` calls it on a trial
        that is not running. The experiment places trials by their own sizes once its scheduler sets any."""
        raise NotImplementedError(f"{type(self).__name__} cannot change a trial's resources")

    def cluster_resources(self) -> dict[str, float]:
        """The cluster's resources (every live member's, summed; on one machine, what it offers), in Ray's
        names (``{"CPU": 8.0, "GPU": 0.0}``): what Ray's ``tune_controller._resource_updater.get_num_cpus()``
        and ``get_num_gpus()`` count. Only a scheduler with ``sees_cluster_resources = True`` is told them."""
        raise NotImplementedError(f"{type(self).__name__} does not know the cluster's resources")

    @property
    def _resource_updater(self) -> _ResourceCounts:
        """Ray's private ``tune_controller._resource_updater`` (``get_num_cpus()``, ``get_num_gpus()``), which
        Ray's own resources allocation functions read (``xgboost_dynamic_resources_example.py``)."""
        return _ResourceCounts(self.cluster_resources())


class _ResourceCounts:
    """``get_num_cpus()``/``get_num_gpus()`` over a ``cluster_resources()`` dict (Ray's ``_ResourceUpdater``)."""

    def __init__(self, resources: dict[str, float]) -> None:
        self.resources = resources

    def get_num_cpus(self) -> float:
        return self.resources.get("CPU", 0.0)

    def get_num_gpus(self) -> float:
        return self.resources.get("GPU", 0.0)


class Scheduler(ABC):
    """Base class of trial schedulers (Ray Tune's ``TrialScheduler`` hooks).

    ``tolerates_batching``: ``True`` lets the engine deliver several results of
    one trial in one batch and let the trial run ahead while its results are
    scheduled (higher throughput, but a decision applies a few steps late).
    ``None`` (the default) means: tolerate batching only if the subclass does not
    override :meth:`on_trial_result`.  Every scheduler still sees every result,
    in order.
    """

    tolerates_batching: bool | None = None
    metric: str | None = None
    mode: str | None = None
    #: doubles Ray's version of this scheduler draws from numpy's global stream in on_trial_add; the
    #: default generator takes as many after each trial, so seeded configs interleave as in Ray
    global_numpy_draws_on_add: int = 0
    #: the plugin reads ``tune_controller.cluster_resources()`` (each hook call then carries them)
    sees_cluster_resources: bool = False
    #: the plugin calls ``tune_controller.set_trial_resources()``: the experiment places each trial by its own
    #: size (an idle trial process is reused only by a trial of its size)
    changes_trial_resources: bool = False
    # Ray Tune's TrialScheduler constants, so a plugin written for Ray returns ``self.STOP`` as it did
    CONTINUE = Decision.CONTINUE
    NOOP = Decision.NOOP
    PAUSE = Decision.PAUSE
    STOP = Decision.STOP

    def config_fill(self) -> Callable[[dict[str, Any]], None] | None:
        """What a new trial's config gets before it starts (Ray's PBT fills its mutated keys in ``on_trial_add``).

        Called once, in the driver, when the ``Tuner`` is built. The callable it returns is cloudpickled to
        the controller, where the default generator calls it with each config it creates, in order, with
        Python's and numpy's global ``random`` streams set to the driver's; it changes the config in place
        and must not block. None (the default): configs are left as drawn.
        """
        return None

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Take the experiment's metric/mode when the scheduler was built without them. ``**spec``: Ray's
        signature (its ``num_samples``, ``stop``, ``time_budget_s``), taken so a ported scheduler's
        ``super().set_search_properties(metric, mode, **spec)`` works. Called once, in the driver, when the
        experiment is built (the scheduler actor runs a copy made after it; ``SchedulerTestKit`` calls it
        without ``spec``). False: the scheduler refuses the experiment's metric/mode (it has its own); the
        driver then refuses the experiment, as Ray does."""
        if self.metric is None and metric is not None:
            self.metric = metric
        if self.mode is None and mode is not None:
            self.mode = mode
        return True

    def batching_allowed(self) -> bool:
        """Whether results may be batched for this scheduler.

        A ``tolerates_batching`` declaration counts only if it is made by the class
        that defines the effective ``on_trial_result`` or by a subclass of it: a
        subclass of FIFOScheduler that overrides ``on_trial_result`` decides per
        result unless it says otherwise.
        """
        mro = type(self).__mro__
        hook_owner = next(i for i, c in enumerate(mro) if "on_trial_result" in c.__dict__)
        declared = next((i for i, c in enumerate(mro) if c.__dict__.get("tolerates_batching") is not None),
                        None)
        if "tolerates_batching" in self.__dict__ and self.__dict__["tolerates_batching"] is not None:
            return bool(self.__dict__["tolerates_batching"])
        if declared is not None and declared <= hook_owner:
            return bool(mro[declared].__dict__["tolerates_batching"])
        return mro[hook_owner] is Scheduler

    def on_trial_add(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        """A new trial was created (PENDING); also a retried one, right after ``on_trial_error``
        (Ray's requeue), and, after ``Tuner.restore``, every unfinished trial again."""

    def on_trial_result(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> Decision:
        """A RUNNING trial reported ``result`` (flattened, as Ray's: ``val/loss``, ``config/lr``);
        return what it should do next."""
        return Decision.CONTINUE

    def on_trial_complete(
        self, tune_controller: SchedulerController, trial: TrialSnapshot, result: dict[str, Any]
    ) -> None:
        """The trial finished (trainable returned, or a STOP took effect)."""

    def on_trial_error(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        """The trial failed: it ended in ERROR, or (with retries left) it is requeued, and
        ``on_trial_add`` follows at once, as Ray Tune calls them."""

    def on_trial_remove(self, tune_controller: SchedulerController, trial: TrialSnapshot) -> None:
        """The trial was terminated by a decision other than its own completion."""

    def on_clone_skipped(self, tune_controller: SchedulerController, trial_id: str, source_id: str) -> None:
        """audition's (Ray's schedulers decide this themselves): a ``clone_trial(trial, source, ...)`` this
        scheduler asked for was not applied, because ``source`` had no checkpoint to give (its save died with its
        run, or gave none). The trial goes on as it was. Called before the next hook, in the scheduler actor; a
        scheduler that recorded the exploit takes it back here. The default does nothing."""

    def horizon_attr(self) -> str | None:
        """The result key :meth:`decision_horizon` is measured in (usually ``time_attr``); ``None``,
        the default, declares no horizons: every result waits for its decision."""
        return None

    def decision_horizon(self, trial: TrialSnapshot) -> float | None:
        """The smallest value of :meth:`horizon_attr` at which :meth:`on_trial_result` may decide
        anything but CONTINUE for ``trial``; ``math.inf``: never; ``None``: at any result.

        Called by the scheduler host right after :meth:`on_trial_add` and after each batch of
        :meth:`on_trial_result` calls for ``trial``, in the scheduler actor; it must not block and
        must not call the controller. It is a promise: until ``trial`` reports a result at or past
        the horizon, its results are decided CONTINUE whatever happens to other trials, so the trial
        runs ahead with its results batched (the scheduler still sees each one, in order) and waits
        only at the horizon, where the decision is exact. A promise broken (STOP or PAUSE returned
        below the horizon) or a ``pause_trial``/``stop_trial`` made from another hook takes effect at
        the trial's next decided batch, a few results late. The answer may only grow as the trial
        goes on; the engine forgets it when the experiment is restored.
        """
        return None

    @abstractmethod
    def choose_trial_to_run(self, tune_controller: SchedulerController) -> TrialSnapshot | None:
        """Pick a PENDING or PAUSED trial to start next, or ``None`` to wait."""

    def save(self) -> dict[str, Any]:
        """The scheduler's state, picklable, stored with the experiment."""
        return dict(self.__dict__)

    def restore(self, state: dict[str, Any]) -> None:
        """Reload what :meth:`save` returned (on experiment resume)."""
        self.__dict__.update(state)

    def _save_to_pickle(self) -> dict[str, Any]:
        """What the scheduler host pickles at a state write: :meth:`save`'s answer (a scheduler whose
        ``save`` deep-copies may skip the copy here, the answer is pickled before it runs again)."""
        return self.save()

    def debug_string(self) -> str:
        return type(self).__name__


class FIFOScheduler(Scheduler):
    """Runs trials in the order they were added; never pauses or stops one.

    Pending trials are chosen before paused ones.
    """

    tolerates_batching = True

    def debug_string(self) -> str:
        return "Using FIFO scheduling algorithm."  # Ray's words

    def choose_trial_to_run(self, tune_controller: SchedulerController) -> TrialSnapshot | None:
        trials = tune_controller.get_trials()
        for status in (TrialStatus.PENDING, TrialStatus.PAUSED):
            for t in trials:
                if t.status is status:
                    return t
        return None


__all__ = ["FIFOScheduler", "Scheduler", "SchedulerController"]
