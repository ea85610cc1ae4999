"""``run(...)``: Ray Tune's classic ``tune.run`` API, mapped onto ``Tuner``/``TuneConfig``/``RunConfig``.

No second engine: every argument becomes a ``Tuner`` setting, the ``ResultGrid`` of ``fit()`` is
wrapped in an ``ExperimentAnalysis``. An argument audition cannot honour is refused before
anything runs, naming what to use instead; one that Ray 2.60 itself deprecates warns as Ray does.
``tune.run``'s defaults differ from the ``Tuner``'s in three places, kept here: ``reuse_actors=False``,
no end checkpoint unless asked (``checkpoint_at_end`` never defaults to True), and ``verbose=2``.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actors._driver.analysis import ExperimentAnalysis
from actors._driver.config import DEFAULT_STORAGE, CheckpointConfig, FailureConfig, RunConfig, TuneConfig
from actors._driver.errors import ConfigError, TuneError
from actors._driver.experiments import RUN_ARGS
from actors._driver.resume import ResumeChoices, choices_of, flags_choices
from actors._engine.trial import TrialStatus
from actors.schedulers._registry import RAY_SCHEDULER_NAMES, create_scheduler
from actors.search._registry import create_searcher

log = logging.getLogger("audition")
_UNSET: Any = object()
# resume="AUTO+<suffix>": (resume_unfinished, resume_errored, restart_errored), Ray's ResumeConfig choices
_RESUME_SUFFIXES = {"": (True, False, False), "ERRORED": (True, True, False),
                    "RESTART_ERRORED": (True, False, True), "ERRORED_ONLY": (False, True, False),
                    "RESTART_ERRORED_ONLY": (False, False, True)}


def _deprecated(arg: str, instead: str) -> None:
    warnings.warn(f"run({arg}=...) is deprecated (in Ray 2.60 too): use {instead}", DeprecationWarning,
                  stacklevel=3)


def _refuse(arg: str, why_and_fix: str) -> None:
    raise ConfigError(f"run({arg}=...): {why_and_fix}")


def _one_experiment(given: Any) -> Any:
    """``run_or_experiment``'s ``Experiment`` (a list of one too), or None for a trainable."""
    from actors._driver.experiments import Experiment

    if isinstance(given, list | tuple):
        if len(given) == 1 and isinstance(given[0], Experiment):
            return given[0]
        _refuse("run_or_experiment", "audition runs one experiment per run (Ray runs a list together, sharing "
                "one scheduler and search algorithm); call run_experiments(experiments, concurrent=False) to "
                "run them one after the other, or run(...) once per experiment")
    return given if isinstance(given, Experiment) else None


def _resume_choices(resume: Any) -> tuple[bool, bool, bool] | None:
    """Ray's ``resume=`` (True, False/None, "AUTO", "AUTO+ERRORED", ...) as ``Tuner.restore``'s three
    flags; None for a new experiment. As in Ray, the last suffix wins."""
    if resume is None or resume is False:
        return None
    if resume is True:
        return _RESUME_SUFFIXES[""]
    if not isinstance(resume, str):
        _refuse("resume", f"{resume!r} is not one of True, False, 'AUTO' (optionally '+ERRORED', "
                "'+RESTART_ERRORED', '+ERRORED_ONLY', '+RESTART_ERRORED_ONLY')")
    head, *suffixes = resume.split("+")
    if head in ("LOCAL", "REMOTE", "PROMPT", "ERRORED_ONLY"):
        _refuse("resume", f"{head!r} was removed from Ray Tune (2.60 raises too); use True, False or 'AUTO'")
    if head != "AUTO":
        _refuse("resume", f"{resume!r}: use True, False or 'AUTO', optionally with '+ERRORED' & co.")
    choice = _RESUME_SUFFIXES[""]
    for suffix in suffixes:
        if suffix not in _RESUME_SUFFIXES or not suffix:
            _refuse("resume", f"unknown resume setting {suffix!r}; use one of "
                    f"{sorted(k for k in _RESUME_SUFFIXES if k)}")
        choice = _RESUME_SUFFIXES[suffix]
    return choice


def _checkpointing(checkpoint_config: CheckpointConfig | None, keep_checkpoints_num: int | None,
                   checkpoint_score_attr: str | None, checkpoint_freq: int,
                   checkpoint_at_end: bool) -> CheckpointConfig:
    """Ray's deprecated checkpoint arguments folded into a copy of ``checkpoint_config``; as
    ``tune.run`` (not the ``Tuner``), the end checkpoint is taken only when asked for."""
    if checkpoint_config is not None and not isinstance(checkpoint_config, CheckpointConfig):
        _refuse("checkpoint_config", f"pass an actors.CheckpointConfig(...), got {type(checkpoint_config).__name__}")
    changes: dict[str, Any] = {}
    if keep_checkpoints_num is not None:
        _deprecated("keep_checkpoints_num", "checkpoint_config=CheckpointConfig(num_to_keep=...)")
        changes["num_to_keep"] = keep_checkpoints_num
    if checkpoint_score_attr is not None:
        _deprecated("checkpoint_score_attr", "checkpoint_config=CheckpointConfig(checkpoint_score_attribute=...)")
        attr, order = checkpoint_score_attr, "max"
        if attr.startswith("min-"):
            _deprecated("checkpoint_score_attr='min-...'", "CheckpointConfig(checkpoint_score_order='min')")
            attr, order = attr[len("min-"):], "min"
        changes.update(checkpoint_score_attribute=attr, checkpoint_score_order=order)
    if checkpoint_freq:
        _deprecated("checkpoint_freq", "checkpoint_config=CheckpointConfig(checkpoint_frequency=...)")
        changes["checkpoint_frequency"] = checkpoint_freq
    if checkpoint_at_end:
        _deprecated("checkpoint_at_end", "checkpoint_config=CheckpointConfig(checkpoint_at_end=True)")
        changes["checkpoint_at_end"] = True
    cc = dataclasses.replace(checkpoint_config or CheckpointConfig(), **changes)
    if cc.checkpoint_at_end is None:  # recorded: Ray's tune.run saves a class trainable at the end only if asked
        cc = dataclasses.replace(cc, checkpoint_at_end=False)
    return cc


def run(run_or_experiment: Callable[..., Any] | type | str | Any, *, name: str | None = None, metric: str | None = None,
        mode: str | None = None, stop: Mapping[str, Any] | Callable[..., Any] | Any = None,
        time_budget_s: float | datetime.timedelta | None = None, config: dict[str, Any] | None = None,
        resources_per_trial: Mapping[str, float] | None = None, num_samples: int = 1,
        storage_path: str | os.PathLike[str] | None = None, storage_filesystem: Any = None,
        search_alg: Any = None, scheduler: Any = None, checkpoint_config: CheckpointConfig | None = None,
        verbose: int | None = None, progress_reporter: Any = None, log_to_file: bool | str | Sequence[str] = False,
        trial_name_creator: Callable[[Any], str] | None = None,
        trial_dirname_creator: Callable[[Any], str] | None = None, sync_config: Any = None,
        export_formats: Sequence[str] | None = None, max_failures: int = 0, fail_fast: bool | str = False,
        restore: str | None = None, resume: bool | str | None = None, resume_config: Any = None,
        reuse_actors: bool = False, raise_on_failed_trial: bool = True, callbacks: Sequence[Any] | None = None,
        max_concurrent_trials: int | None = None, keep_checkpoints_num: int | None = None,
        checkpoint_score_attr: str | None = None, checkpoint_freq: int = 0, checkpoint_at_end: bool = False,
        chdir_to_trial_dir: Any = _UNSET, local_dir: str | None = None,
        storage_options: dict[str, Any] | None = None, system: str = "multiproc") -> ExperimentAnalysis:
    """Run a hyperparameter search the classic way (Ray Tune's ``tune.run``) and return its
    ``ExperimentAnalysis``. ``storage_options`` (fsspec) and ``system`` are audition's own, as in
    ``RunConfig``. Raises ``TuneError("Trials did not complete", [trials])`` if a trial did not end
    TERMINATED, unless ``raise_on_failed_trial=False`` (as Ray)."""
    from actors._driver.tuner import Tuner

    experiment = _one_experiment(run_or_experiment)
    if experiment is not None:  # as Ray: the experiment's own settings, not run()'s arguments of those names
        given = experiment.run_kwargs()
        (name, stop, time_budget_s, config, resources_per_trial, num_samples, storage_path, sync_config,
         checkpoint_config, trial_name_creator, trial_dirname_creator, log_to_file, max_failures) = (
            given[k] for k in RUN_ARGS[:-1])
        storage_options = given["storage_options"] if given["storage_options"] is not None else storage_options
        run_or_experiment = experiment.run
    if local_dir is not None:
        _refuse("local_dir", "removed from Ray Tune (2.60 raises too); use storage_path=...")
    if chdir_to_trial_dir is not _UNSET:
        _refuse("chdir_to_trial_dir", "removed from Ray Tune (2.60 raises too); leave it out")
    if storage_filesystem is not None:
        _refuse("storage_filesystem", "audition reaches storage through fsspec, not pyarrow; pass "
                "storage_path='s3://bucket/prefix' and storage_options={...} (fsspec keyword arguments)")
    if export_formats:
        _refuse("export_formats", "audition exports no models at the end; write what you need in "
                "save_checkpoint() or report it with a checkpoint")
    if restore is not None:
        _refuse("restore", "starting a trial from a checkpoint path is not supported; load it in the "
                "trainable (e.g. pass the path in config and use Checkpoint.from_directory), or continue a "
                "whole experiment with resume='AUTO'")
    if isinstance(search_alg, str):  # Ray's names, as Ray's run builds them
        search_alg = create_searcher(search_alg)
    if isinstance(scheduler, str) and scheduler.lower() in RAY_SCHEDULER_NAMES:  # (else an import path)
        scheduler = create_scheduler(scheduler)
    if mode is not None and mode not in ("min", "max"):
        raise ConfigError(f"run(mode={mode!r}): use 'min' or 'max'")
    if config is not None and not isinstance(config, dict):
        raise ConfigError(f"run(config=...) must be a dict, got {type(config).__name__}")
    # as Ray: a resume_config resumes whatever resume= says (it replaces the choices resume= would make)
    resuming: ResumeChoices | None
    if resume_config is not None:
        resuming = choices_of(resume_config, "run(resume_config=...)")
    else:
        flags = _resume_choices(resume)
        resuming = None if flags is None else flags_choices(*flags)
    cc = _checkpointing(checkpoint_config, keep_checkpoints_num, checkpoint_score_attr, checkpoint_freq,
                        checkpoint_at_end)
    storage = os.fspath(storage_path) if storage_path is not None else None
    # as Ray: a mode without a metric is the mode of a scheduler's or searcher's own metric, and the analysis
    # compares the unnamed metric with it (a trainable that returns a number)
    tune_config = TuneConfig(
        metric=metric, mode=mode, num_samples=num_samples, scheduler=scheduler,
        search_alg=search_alg, max_concurrent_trials=max_concurrent_trials or None,
        reuse_actors=reuse_actors, time_budget_s=time_budget_s, trial_name_creator=trial_name_creator,
        trial_dirname_creator=trial_dirname_creator)
    run_config = RunConfig(
        name=name, storage=storage, storage_options=storage_options, stop=stop,
        failure_config=FailureConfig(max_failures=max_failures, fail_fast=fail_fast), checkpoint_config=cc,
        system=system, verbose=2 if verbose is None else int(verbose), progress_reporter=progress_reporter,
        sync_config=sync_config, log_to_file=log_to_file,
        callbacks=list(callbacks) if callbacks is not None else None,
        # (a PlacementGroupFactory, as Ray's run takes; anything else gets RunConfig's check, naming it)
        resources_per_trial=dict(resources_per_trial) if isinstance(resources_per_trial, Mapping)
        else resources_per_trial)
    path = None if name is None else f"{(storage or DEFAULT_STORAGE).rstrip('/')}/{name}"
    if path is not None and "://" not in path:
        path = os.path.expanduser(path)
    if resuming is not None and path is not None and Tuner.can_restore(path, storage_options):
        tuner = Tuner.restore(path, run_or_experiment, storage_options=storage_options,  # type: ignore[arg-type]
                              callbacks=run_config.callbacks, _resume_config=resuming)
        if run_config.resources_per_trial:  # (Ray: the trials its resume made PENDING get them)
            from actors._driver.restore import requeued_resources

            requeued_resources(tuner, run_config.resources_per_trial)
    else:
        # (an existing experiment of that name: Tuner.fit saves this run beside it, name_2, and says so)
        if resuming is not None:
            log.info("run(resume=%r): no experiment to resume at %s; starting a new one (as Ray)", resume,
                     path or "a newly named directory")
        tuner = Tuner(run_or_experiment, param_space=config, tune_config=tune_config, run_config=run_config)
    grid = tuner.fit()
    analysis = ExperimentAnalysis(grid, default_metric=metric, default_mode=mode,
                                  trainable_name=tuner.trainable_name)
    incomplete = [t for t in analysis.trials if t.status is not TrialStatus.TERMINATED]
    if incomplete:
        if raise_on_failed_trial:
            raise TuneError("Trials did not complete", incomplete)
        log.error("Trials did not complete: %s", incomplete)
    return analysis


__all__ = ["run"]
