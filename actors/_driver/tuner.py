"""``Tuner``: the public entry point and the only module that wires everything.

The driver validates every input before any actor starts, ships user objects as
cloudpickle bytes, then only talks to the controller (``controller_client``: never to
trial actors, since asking a killed actor stalls Thespian's external API for half a minute).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

import cloudpickle

from actors._driver.callback_state import CallbackStates, restore_states
from actors._driver.callbacks import CallbackDispatcher
from actors._driver.checks import (
    check_callbacks,
    check_scheduler_objective,
    claim_name,
    make_run_stopper,
    max_len_identifier,
    pickled,
    pickled_search,
    required_metrics,
    resolve_checkpoint_at_end,
)
from actors._driver.config import (
    DEFAULT_STORAGE,
    ConfigError,
    RunConfig,
    TuneConfig,
    check_resources,
    public_spec,
    samples,
)
from actors._driver.controller_client import ControllerClient
from actors._driver.errors import TuneError
from actors._driver.fresh_system import fork_unsafe_reason
from actors._driver.local_resources import local_slots, machine_resources
from actors._driver.loggers import controller_loggers, driver_callbacks
from actors._driver.parameters import parameters_of, publish, unpublish
from actors._driver.plugins import load_scheduler
from actors._driver.progress import ProgressDisplay, TrialLines
from actors._driver.ray_env import check_ray_environment, dated_subdir_disabled
from actors._driver.registry import is_registered, resolve_trainable
from actors._driver.reporters import warn_ignored
from actors._driver.resources import ResourcesOf, SameResources, resources_from_class
from actors._driver.restore import hand_back_plugins, saved_searcher
from actors._driver.result_grid import ResultGrid, Searched, grid_of
from actors._driver.searcher_setup import (
    capture_driver_stream,
    check_scheduler_takes_searcher,
    experiment_searcher,
    hand_back_driver_stream,
    tag_paths,
    wire_global_draws,
    wire_trainable_kind,
    with_filled_keys,
)
from actors._driver.system import actor_system
from actors._driver.trainable import Trainable
from actors._engine.flat import flatten
from actors._engine.naming import saved_dirname_custom
from actors._engine.spec import ExperimentSpec
from actors._tempdirs import sweep
from actors.messages import ExperimentFinished
from actors.stoppers import with_time_budget

log = logging.getLogger("audition")


class Tuner:
    """Run a hyperparameter search (Ray Tune's ``Tuner``)."""

    def __init__(self, trainable: Callable[..., Any] | type[Trainable] | str, *,
                 param_space: dict[str, Any] | None = None, tune_config: TuneConfig | None = None,
                 run_config: RunConfig | None = None) -> None:
        from actors.search import BasicVariantGenerator
        from storage import StorageContext, StorageError

        for arg, value, cls in (("tune_config", tune_config, TuneConfig), ("run_config", run_config, RunConfig)):
            if value is not None and not isinstance(value, cls):
                raise ConfigError(f"Tuner({arg}=...) takes a {cls.__name__}, got {type(value).__name__}; "
                                  f"pass {arg}={cls.__name__}(...)")
        self.tune_config = tc = tune_config or TuneConfig()
        self.run_config = rc = run_config or RunConfig()
        if param_space is not None and not isinstance(param_space, dict):
            raise ConfigError(f"param_space must be a dict, got {type(param_space).__name__}")
        # A registered name is looked up again by fit(), as Ray 2.60 looks it up there (recorded: a name registered
        # after Tuner(...) runs, and the function registered last under it is the one that runs); an unknown one
        # raises there. Known now, it is checked now too.
        self._by_name = trainable if isinstance(trainable, str) else None
        found = None if self._by_name is not None and not is_registered(self._by_name) else resolve_trainable(trainable)
        self.trainable_name: str = found[1] if found is not None else str(self._by_name)
        self._registered = True if found is None else found[2]
        spec = public_spec(tc, rc.stop)  # Ray's: what the searcher's and scheduler's set_search_properties get
        searcher, self._num_samples = experiment_searcher(tc, param_space, spec)
        self._searcher = searcher
        # what Tuner.restore(param_space=...) is checked against, as Ray checks it (flattened, sorted keys)
        self._param_space_keys = sorted(flatten(param_space or {}))
        # Ray tags a default-generator trial by its drawn values only (Trial.experiment_tag)
        self._searched = tag_paths(searcher, param_space or {}) if isinstance(searcher, BasicVariantGenerator) else None
        scheduler = load_scheduler(tc.scheduler)
        check_scheduler_objective(scheduler, tc.metric, tc.mode, spec)
        check_scheduler_takes_searcher(scheduler, tc.search_alg)
        wire_global_draws(searcher, scheduler)
        wire_trainable_kind(scheduler, found[0] if found is not None else None)
        self._searched = with_filled_keys(self._searched, searcher, param_space)
        self._required = required_metrics(tc.metric, scheduler, searcher)
        self._scheduler = pickled(scheduler, "scheduler")  # (set up above: the actor's copy is not set up again)
        # (reuse_actors stays as given: an idle trial process is only reused by a trial of its size; Ray's
        # ResourceChangingScheduler refuses reuse_actors=True, which is audition's default)
        self._resizes = bool(getattr(scheduler, "changes_trial_resources", False))
        self._stopper = with_time_budget(make_run_stopper(rc.stop), tc.time_budget_s)
        check_callbacks(rc.callbacks, "RunConfig(callbacks=...)")
        pickled_search(searcher, self._stopper, param_space)
        # the default generator as built: a second fit() draws its trials again, as Ray's fresh generator does
        self._unused_generator = cloudpickle.dumps(searcher) if tc.search_alg is None else None
        pickled((tc.trial_name_creator, tc.trial_dirname_creator), "trial_name_creator or trial_dirname_creator")
        kind = "multiproc" if str(rc.system).startswith("tcp://") else rc.system
        self._system = rc.system
        self._multi_host = str(rc.system).startswith("tcp://")
        try:
            self._ctx = StorageContext(rc.storage or DEFAULT_STORAGE, rc.storage_options)
        except StorageError as exc:
            raise ConfigError(str(exc)) from exc
        sync = getattr(rc, "sync_config", None)
        if sync is not None and sync.sync_artifacts and not self._ctx.is_local:
            raise ConfigError(
                "RunConfig(sync_config=SyncConfig(sync_artifacts=True)): audition does not upload the files a "
                f"trial writes in its working directory to {self._ctx.url}; save what you need in a checkpoint "
                "(report(..., checkpoint=...)), or use local storage, where each trial runs in its own directory "
                "of the experiment and its files stay there")
        if self._ctx.is_process_local and kind != "simple":
            raise ConfigError(
                f"storage {rc.storage!r} lives in one process's memory, so trial actors in other processes "
                "cannot write to it; use a local path or s3:// URL, or RunConfig(system='simple')"
            )
        stamp = "" if dated_subdir_disabled() else datetime.datetime.now().strftime("_%Y-%m-%d_%H-%M-%S")
        self.name = rc.name or f"{self.trainable_name}{stamp}"
        self._restore_state: dict[str, Any] | None = None
        if self._multi_host:
            leader_host = str(rc.system)[len("tcp://"):].rpartition(":")[0] or "127.0.0.1"
            if self._ctx.is_local and not leader_host.startswith(("127.", "localhost")):
                log.warning("storage %s is a local path: trials on other hosts write their checkpoints to "
                            "their own disk unless every host mounts it; prefer s3://", self._ctx.url)
        if found is not None:
            self._bind_trainable(found[0])

    def _bind_trainable(self, trainable: Any) -> None:
        """What the experiment takes from its trainable: itself (pickled), its end-checkpoint default, its
        ``with_parameters`` objects and its resources, and so how many trials run at once."""
        tc, rc = self.tune_config, self.run_config
        self._checkpoint_at_end = resolve_checkpoint_at_end(trainable, rc.checkpoint_config)
        self._trainable = pickled(trainable, "trainable")  # with_parameters objects: only their keys
        self._parameters = parameters_of(trainable)
        given = getattr(trainable, "_audition_resources", None)
        # (with_resources overrides a class's own default_resource_request, as Ray's does)
        self._resources_of: Callable[[dict[str, Any]], dict[str, float]] | None = \
            given if isinstance(given, ResourcesOf) else \
            resources_from_class(trainable) if given is None else None
        if self._resources_of is not None:  # each trial's own, from its config: placed as its resources allow
            self._resources, self._slots = {"cpu": 1.0}, tc.max_concurrent_trials or 1_000_000
            return
        resources = check_resources(given or rc.resources_per_trial or {"cpu": 1}, "with_resources(...)")
        self._resources = resources
        if getattr(self, "_resizes", False):  # its scheduler resizes trials: placed by each one's size
            self._resources_of, self._slots = SameResources(resources), tc.max_concurrent_trials or 1_000_000
            return
        if self._multi_host:
            self._slots = tc.max_concurrent_trials or 1_000_000
            return
        local_slots(resources, tc.max_concurrent_trials)  # (a trial this machine could never start: refused now)

    # ------------------------------------------------------------------ run
    def _restored(self, spec: ExperimentSpec, saved: dict[str, Any], ctx: Any) -> None:
        """Initialise from a saved experiment (see actors._driver.restore)."""
        self.tune_config = saved["tune_config"]
        self.run_config = saved["run_config"]
        self.trainable_name = spec.trainable_name
        self.name = spec.name
        self._ctx = ctx
        self._system = saved["system"]
        self._multi_host = str(self._system).startswith("tcp://")
        self._prebuilt = spec
        if "searched" in saved:  # (tuners saved before 2026-12-04 lack it)
            self._searched = saved["searched"]

    def _experiment_uri(self) -> str:
        from storage import ExperimentLayout

        return str(self._ctx.uri(ExperimentLayout(self._ctx, self.name).experiment_dir))

    def _spec(self) -> ExperimentSpec:
        if getattr(self, "_prebuilt", None) is not None:
            # where the experiment is now (it may have moved since it was saved), for the plugins' trial.path
            self._prebuilt.experiment_uri, self._prebuilt.storage_is_local = self._experiment_uri(), self._ctx.is_local
            if not self._multi_host:  # what this machine offers now (init() may declare other resources), as Ray
                if self._prebuilt.resources_of is None:
                    self._prebuilt.max_concurrent = local_slots(self._prebuilt.resources_per_trial or {"cpu": 1},
                                                                self.tune_config.max_concurrent_trials)
                self._prebuilt.total_resources = machine_resources()
            return self._prebuilt
        tc, rc = self.tune_config, self.run_config
        cc = rc.checkpoint_config
        return ExperimentSpec(
            name=self.name, trainable=self._trainable, trainable_name=self.trainable_name,
            searcher=self._searcher, scheduler=self._scheduler, stopper=self._stopper,
            metric=tc.metric, mode=tc.mode, num_samples=self._num_samples,
            # (again now: init() may have declared other resources since the Tuner was built)
            max_concurrent=self._slots if self._multi_host or self._resources_of is not None
            else local_slots(self._resources, tc.max_concurrent_trials),
            resources_per_trial=self._resources, resources_of=self._resources_of, total_resources=machine_resources(),
            max_failures=rc.failure_config.max_failures, fail_fast=bool(rc.failure_config.fail_fast),
            fail_fast_raise=isinstance(rc.failure_config.fail_fast, str),
            storage_url=self._ctx.url, storage_options=dict(self._ctx.options),
            num_to_keep=cc.num_to_keep, checkpoint_score_attribute=cc.checkpoint_score_attribute,
            checkpoint_score_order=cc.checkpoint_score_order, checkpoint_frequency=cc.checkpoint_frequency,
            checkpoint_at_end=self._checkpoint_at_end, restore_state=self._restore_state,
            checkpoint_at_end_by_default=cc.checkpoint_at_end is None,
            reuse_actors=tc.reuse_actors, multi_host=self._multi_host,
            leader_resources=machine_resources() if rc.leader_runs_trials else {},
            heartbeat_timeout_s=rc.heartbeat_timeout_s, placement_grace_s=float(rc.placement_timeout_s),
            max_progress_rows=rc.max_progress_rows, required_metrics=self._required,
            trial_name_creator=tc.trial_name_creator, trial_dirname_creator=tc.trial_dirname_creator,
            max_len_identifier=max_len_identifier(), trainable_registered=self._registered, tag_paths=self._searched,
            trial_stop_grace_s=float(rc.trial_stop_grace_s),
            log_to_driver=bool(getattr(rc, "log_to_driver", True)),  # absent from older saved run configs
            experiment_uri=self._experiment_uri(), storage_is_local=self._ctx.is_local,
        )

    def fit(self) -> ResultGrid:
        """Run the experiment to the end and return every trial's result."""
        from storage import ExperimentLayout, StorageError

        check_ray_environment()  # (before anything is written)
        try:
            self._ctx.check_usable()
        except StorageError as exc:
            raise TuneError(str(exc)) from None
        if getattr(self, "_prebuilt", None) is None:  # a new experiment (not a restore): never over an old one
            if getattr(self, "_by_name", None) is not None:  # what is registered under the name now (Ray)
                self._bind_trainable(resolve_trainable(str(self._by_name))[0])
            try:
                self.name = claim_name(self._ctx, self.name, chosen=self.run_config.name is not None)
            except StorageError as exc:
                raise TuneError(str(exc)) from None
        where = self._ctx.uri(ExperimentLayout(self._ctx, self.name).experiment_dir)
        for cb in self.run_config.callbacks or []:  # before anything is written or started
            cb.on_experiment_start(where, self._ctx.is_local)
        # with_parameters objects: written once for this machine (and storage, for other machines)
        # decided once, here: a system started afresh cannot inherit the with_parameters objects either
        self._fresh_reason = None if self._system == "simple" else fork_unsafe_reason()
        published = publish(getattr(self, "_parameters", []), self._ctx,
                            ExperimentLayout(self._ctx, self.name).experiment_dir, self._multi_host,
                            by_file=self._fresh_reason is not None)
        try:
            return self._fit()
        finally:
            unpublish(published)

    def _fit(self) -> ResultGrid:
        from storage import ExperimentLayout, StorageError, read_experiment_state

        new_run = getattr(self, "_prebuilt", None) is None
        if new_run:  # a new run draws from the driver's numpy stream, as Ray
            if getattr(self, "_drawn", False) and getattr(self, "_unused_generator", None) is not None:
                self._searcher = cloudpickle.loads(self._unused_generator)
            self._drawn = True
            capture_driver_stream(self._searcher)
        spec = self._spec()
        self._save_tuner(spec)
        spec.loggers = controller_loggers(self.run_config.callbacks)  # they travel with the spec
        finished: ExperimentFinished | None = None
        verbose = min(2, self.run_config.verbose)  # (Ray 2.60's output engine shows 3 as 2)
        warn_ignored(getattr(self.run_config, "progress_reporter", None))  # (None in a RunConfig pickled before it)
        if getattr(self.run_config, "log_to_file", False):
            log.warning("RunConfig(log_to_file=%r): each trial's output is saved as stdout.txt and stderr.txt in "
                        "its directory (and echoed here unless log_to_driver=False); the names given are not used",
                        self.run_config.log_to_file)
        self._reporter = ProgressDisplay(self.name, verbose, metric=spec.metric)
        extra = [TrialLines(self._reporter)] if verbose >= 2 else []
        self._dispatcher = CallbackDispatcher([*driver_callbacks(self.run_config.callbacks), *extra])
        self._dispatcher.describe(self.trainable_name, spec.experiment_uri, spec.storage_is_local,  # (as the spec's
                                  self._ctx.options, getattr(self, "_searched", None),        # scheduler host has it)
                                  spec.resources_per_trial)
        exp_dir = ExperimentLayout(self._ctx, self.name).experiment_dir
        if spec.restore_state:  # Ray's trials list holds the restored trials, finished ones too
            state = spec.restore_state  # (whether trial_dirname_creator named each: its custom_dirname)
            self._dispatcher.restored([{**row, "dirname_custom": saved_dirname_custom(state, row)}
                                       for row in state["trials"]])
            restore_states(self.run_config.callbacks or [], self._ctx, exp_dir)  # before setup, as Ray
        # Ray's Callback.setup(**Experiment.public_spec, total_num_samples=): "stop" is the dict given
        # (else {}), time_budget_s as given, total_num_samples the searcher's total
        stop = self.run_config.stop
        self._dispatcher.setup(stop=dict(stop) if isinstance(stop, Mapping) else {},
                               num_samples=samples(self.tune_config),
                               total_num_samples=getattr(self, "_num_samples", samples(self.tune_config)),
                               time_budget_s=self.tune_config.time_budget_s)
        self._states = CallbackStates(self.run_config.callbacks or [], self._ctx, exp_dir)
        self._states.maybe_save(force=True)  # Ray: at its loop's first step, before any trial starts
        spec.forward_events = bool(self._dispatcher.callbacks)
        spec.callback_gate = self._dispatcher.may_ask_checkpoint
        try:
            client = ControllerClient(self._dispatcher, self._reporter, self._states,
                                      self.run_config.controller_timeout_s)
            with actor_system(self._system, spec.leader_resources, fresh_reason=self._fresh_reason) as asys:
                finished = client.run(asys, spec, self._system, self._ctx.uri(exp_dir))
            self._interrupted = client.interrupted  # (read by `audition resume`, which then exits 130)
        finally:
            sweep()  # temp dirs left by this machine's killed trial processes (the actor system is down now)
            self._reporter.close()
            self._states.maybe_save(force=True)  # Ray: the final save comes before on_experiment_end
            # also when interrupted or the controller went silent
            self._dispatcher.end(finished.trials if finished is not None else ())
        if finished is None:
            raise TuneError(f"experiment {self.name!r}: the controller did not report the end in time")
        try:  # the driver's searcher, and after a new run its global streams, go on from the run's, as Ray's
            saved = read_experiment_state(self._ctx, ExperimentLayout(self._ctx, self.name))
        except StorageError as exc:
            log.warning("the searcher and numpy's global random stream stay where fit() found them: %s", exc)
        else:
            hand_back_driver_stream(getattr(self, "_searcher", None), saved_searcher(saved), streams=new_run)
            hand_back_plugins(self.tune_config.scheduler, self.run_config.stop, saved)
        counts: dict[str, int] = {}
        for t in finished.trials:
            counts[t.status.value] = counts.get(t.status.value, 0) + 1
        ended = "interrupted after" if getattr(self, "_interrupted", False) else "finished in"
        self._reporter.close(f"[{self.name}] {ended} {finished.elapsed_s:.1f}s: "
                             + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        grid = grid_of(finished.trials, self._ctx, self.name, self.tune_config.metric, self.tune_config.mode,
                       self.run_config.checkpoint_config, self._tagging())
        results = list(grid)
        if finished.error and spec.fail_fast_raise:  # Ray Tune raises the trial's own error here
            failed = [r.error for r in results if r.error is not None]
            if failed:
                raise failed[0]
        if finished.error:
            raise TuneError(f"experiment {self.name!r} stopped: {finished.error.strip()}\n"
                            f"what was written so far is in {grid.experiment_path}")
        self._grid = grid
        return grid

    def get_results(self) -> ResultGrid:
        """The results of this tuner's ``fit()``, or, on a ``Tuner.restore(...)`` not yet fitted,
        the stored results of the experiment as it was saved, without running anything (Ray
        Tune's ``Tuner.get_results``)."""
        grid: ResultGrid | None = getattr(self, "_grid", None)
        if grid is not None:
            return grid
        saved: dict[str, Any] | None = getattr(self, "_saved_state", None)
        if saved is None:
            raise TuneError("get_results(): this Tuner has not run yet; call fit() first (or read an earlier "
                            "run with Tuner.restore(path, trainable).get_results())")
        from actors._driver.restore import stored_results

        return stored_results(self._ctx, self.name, saved, self.tune_config, self.run_config, self._tagging(),
                              self._prebuilt.resources_per_trial)

    def _tagging(self) -> Searched | None:
        """How Result.metrics["experiment_tag"] is made; None for a tuner restored from a tuner.pkl
        written before the paths were saved in it (no tag rather than a wrong one)."""
        if not hasattr(self, "_searched"):
            return None
        return Searched(self._searched)

    def _save_tuner(self, spec: ExperimentSpec) -> None:
        """Store what Tuner.restore needs besides the trainable."""
        from storage import ExperimentLayout, write_bytes

        layout = ExperimentLayout(self._ctx, self.name)
        if spec.restore_state is not None:
            return  # the original tuner.pkl stays: it holds the searcher/scheduler as first built
        import dataclasses

        # callbacks live in the driver only (they may hold open files): not part of the saved tuner
        saved_rc = dataclasses.replace(self.run_config, callbacks=None)
        data = {"tune_config": self.tune_config, "run_config": saved_rc, "system": self._system,
                "spec": _without_trainable(spec), "searched": self._searched,
                "param_space_keys": getattr(self, "_param_space_keys", None)}
        write_bytes(self._ctx, layout.tuner_file, cloudpickle.dumps(data))

    # ------------------------------------------------------------------ restore
    @classmethod
    def can_restore(cls, path: str, storage_options: dict[str, Any] | None = None) -> bool:
        from actors._driver.restore import can_restore

        return can_restore(path, storage_options)

    @classmethod
    def restore(cls, path: str, trainable: Callable[..., Any] | type[Trainable] | str, *,
                resume_unfinished: bool = True, resume_errored: bool = False, restart_errored: bool = False,
                param_space: dict[str, Any] | None = None, storage_options: dict[str, Any] | None = None,
                callbacks: list[Any] | None = None, _resume_config: Any = None) -> Tuner:
        """Continue the experiment at ``path``. Callbacks live in the driver and are not saved with
        the experiment: pass the ones the resumed run should have (default: none). ``param_space``,
        as in Ray, may be given again and must have the saved one's keys; the saved space is used (it
        is stored whole: there are no object references to refresh). ``_resume_config`` (a
        ``ResumeConfig``, Ray's experimental argument) replaces the three flags when given."""
        import dataclasses

        from actors._driver.restore import restore_tuner
        from actors._driver.resume import choices_of, flags_choices

        check_callbacks(callbacks, "Tuner.restore(callbacks=...)")  # before storage is touched
        choices = (flags_choices(resume_unfinished, resume_errored, restart_errored) if _resume_config is None
                   else choices_of(_resume_config, "Tuner.restore(_resume_config=...)"))
        tuner = restore_tuner(cls, path, trainable, choices, storage_options, param_space)
        if callbacks:
            tuner.run_config = dataclasses.replace(tuner.run_config, callbacks=list(callbacks))
        return tuner


def _without_trainable(spec: ExperimentSpec) -> ExperimentSpec:
    import copy

    out = copy.copy(spec)
    out.trainable = b""
    return out

__all__ = ["Tuner"]
