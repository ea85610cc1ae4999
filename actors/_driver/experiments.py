"""Ray Tune's ``Experiment`` and ``run_experiments``: the classic API's experiment specs, over ``run()``.

An ``Experiment`` holds what ``run()`` would be given for one experiment (its name, trainable, space,
stopping criteria, storage, checkpointing); ``run(experiment, ...)`` takes those from it and the rest
(metric, mode, scheduler, searcher, callbacks, ...) from its own arguments, as Ray's ``run`` does.
audition runs one experiment per run: several experiments are run one after the other
(``run_experiments(..., concurrent=False)``); Ray's default of running them together in one run is
refused, naming that fix.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from actors._driver.config import CheckpointConfig, SyncConfig
from actors._driver.errors import ConfigError, TuneError

# the run() arguments an Experiment stands for (its own values win over run()'s, as in Ray)
RUN_ARGS = ("name", "stop", "time_budget_s", "config", "resources_per_trial", "num_samples", "storage_path",
            "sync_config", "checkpoint_config", "trial_name_creator", "trial_dirname_creator", "log_to_file",
            "max_failures", "storage_options")


class Experiment:
    """One experiment of the classic API (Ray Tune's ``Experiment``), for ``run()`` and ``run_experiments()``.

    Ray's arguments; ``storage_options`` (fsspec keyword arguments) is audition's own, as in ``RunConfig``.
    ``storage_filesystem``, ``export_formats``, ``restore`` and ``local_dir`` are refused as ``run()``
    refuses them. ``checkpoint_config`` and ``sync_config`` may be dicts of their fields, as in Ray."""

    def __init__(self, name: str | None, run: Callable[..., Any] | type | str, *,
                 stop: Mapping[str, Any] | Callable[..., Any] | Any = None,
                 time_budget_s: float | datetime.timedelta | None = None, config: dict[str, Any] | None = None,
                 resources_per_trial: Mapping[str, float] | None = None, num_samples: int = 1,
                 storage_path: str | os.PathLike[str] | None = None, storage_filesystem: Any = None,
                 sync_config: SyncConfig | dict[str, Any] | None = None,
                 checkpoint_config: CheckpointConfig | dict[str, Any] | None = None,
                 trial_name_creator: Callable[[Any], str] | None = None,
                 trial_dirname_creator: Callable[[Any], str] | None = None,
                 log_to_file: bool | str | Sequence[str] = False, export_formats: Sequence[str] | None = None,
                 max_failures: int = 0, restore: str | None = None, local_dir: str | None = None,
                 storage_options: dict[str, Any] | None = None) -> None:
        from actors.stoppers import Stopper, make_stopper, with_time_budget

        for arg, given, fix in (
                ("storage_filesystem", storage_filesystem, "pass storage_path='s3://bucket/prefix' and "
                 "storage_options={...} (fsspec keyword arguments)"),
                ("export_formats", export_formats, "write what you need in save_checkpoint() or report it "
                 "with a checkpoint"),
                ("restore", restore, "load the checkpoint in the trainable (pass its path in config)"),
                ("local_dir", local_dir, "removed from Ray Tune (2.60 raises too); use storage_path=...")):
            if given:
                raise ConfigError(f"Experiment({arg}=...) is not supported: {fix}")
        if config is not None and not isinstance(config, dict):
            raise ConfigError(f"Experiment(config) must be a dict, got {type(config).__name__}: convert the "
                              "search space to a dict")
        if isinstance(checkpoint_config, dict):
            checkpoint_config = CheckpointConfig(**checkpoint_config)
        if isinstance(sync_config, dict):
            sync_config = SyncConfig(**sync_config)
        try:  # checked now, as Ray's Experiment checks it
            stopper = None if isinstance(stop, Mapping) else make_stopper(stop)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Experiment(stop=...) is invalid: {exc}") from None
        self._stopper: Stopper | None = with_time_budget(stopper, time_budget_s)
        self._run = run
        self._values: dict[str, Any] = {
            "name": name or None, "stop": stop, "time_budget_s": time_budget_s, "config": config or {},
            "resources_per_trial": resources_per_trial, "num_samples": num_samples,
            "storage_path": os.fspath(storage_path) if storage_path is not None else None,
            "sync_config": sync_config, "checkpoint_config": checkpoint_config,
            "trial_name_creator": trial_name_creator, "trial_dirname_creator": trial_dirname_creator,
            "log_to_file": log_to_file, "max_failures": max_failures, "storage_options": storage_options}

    @classmethod
    def from_json(cls, name: str, spec: Mapping[str, Any]) -> Experiment:
        """An experiment from Ray's dict form (``{"run": train, "config": ..., "stop": ...}``), as
        ``run_experiments({name: spec})`` takes it. RLlib's ``"env"`` key goes into the config, as in Ray."""
        if "run" not in spec:
            raise TuneError(f"No trainable specified! Experiment {name!r} needs a 'run' key: the trainable")
        spec = dict(spec)
        if "env" in spec:
            spec["config"] = {**(spec.get("config") or {}), "env": spec.pop("env")}
        run = spec.pop("run")
        try:
            return cls(name, run, **spec)
        except TypeError as exc:
            raise TuneError(f"Failed to load the Tune experiment specification {name!r} ({sorted(spec)}): "
                            f"{exc}. Use Experiment's arguments as keys") from None

    @property
    def run(self) -> Callable[..., Any] | type | str:
        return self._run

    @property
    def run_identifier(self) -> str:
        """The trainable's name, as Ray registers it (a registered name: that name)."""
        from actors._driver.registry import resolve_trainable

        return self._run if isinstance(self._run, str) else resolve_trainable(self._run)[1]

    @property
    def spec(self) -> dict[str, Any]:
        """Ray's spec keys (``run`` is the trainable's name; ``stop`` the dict criteria, ``{}`` for others)."""
        v = self._values
        return {"run": self.run_identifier, "stop": dict(v["stop"]) if isinstance(v["stop"], Mapping) else {},
                "time_budget_s": v["time_budget_s"], "config": v["config"],
                "resources_per_trial": v["resources_per_trial"], "num_samples": v["num_samples"],
                "checkpoint_config": v["checkpoint_config"] or CheckpointConfig(),
                "trial_name_creator": v["trial_name_creator"], "trial_dirname_creator": v["trial_dirname_creator"],
                "log_to_file": v["log_to_file"], "export_formats": [], "max_failures": v["max_failures"],
                "restore": None}

    @property
    def public_spec(self) -> dict[str, Any]:
        """What Ray hands ``Callback.setup``: ``num_samples``, ``stop`` and ``time_budget_s``."""
        return {k: v for k, v in self.spec.items() if k in ("num_samples", "stop", "time_budget_s")}

    @property
    def stopper(self) -> Any:
        """A ``Stopper`` given as ``stop`` (a list: combined; a function: a ``FunctionStopper``) with the
        time budget's; None for dict criteria alone, as in Ray."""
        return self._stopper

    @property
    def checkpoint_config(self) -> CheckpointConfig:
        return self._values["checkpoint_config"] or CheckpointConfig()

    def run_kwargs(self) -> dict[str, Any]:
        """The ``run()`` arguments this experiment stands for."""
        return {k: self._values[k] for k in RUN_ARGS}

    def __repr__(self) -> str:
        return f"Experiment({self._values['name']!r}, {self.run_identifier!r})"


def experiment_list(experiments: Any) -> list[Experiment]:
    """``run_experiments``'s argument as a list: an ``Experiment``, a list of them, or Ray's dict of
    name -> spec."""
    if isinstance(experiments, Experiment):
        return [experiments]
    if isinstance(experiments, Mapping):
        return [Experiment.from_json(name, spec) for name, spec in experiments.items()]
    if isinstance(experiments, list | tuple) and experiments and all(isinstance(e, Experiment)
                                                                     for e in experiments):
        return list(experiments)
    raise ConfigError(f"run_experiments(experiments={experiments!r}): give an Experiment, a list of them, or a "
                      "dict of experiment name -> spec ({'run': train, 'config': {...}, ...})")


def run_experiments(experiments: Experiment | Mapping[str, Any] | Sequence[Experiment], scheduler: Any = None,
                    verbose: int | None = None, progress_reporter: Any = None, resume: bool | str | None = None,
                    resume_config: Any = None, reuse_actors: bool = False, raise_on_failed_trial: bool = True,
                    concurrent: bool = True, callbacks: Sequence[Any] | None = None, _remote: Any = None,
                    system: str = "multiproc") -> list[Any]:
    """Run experiments and return all their trials (Ray Tune's ``run_experiments``): each experiment is a
    ``run(experiment, scheduler=..., ...)``. Several experiments need ``concurrent=False`` (one after the
    other, as Ray then runs them); ``system`` is audition's own, as in ``RunConfig``."""
    from actors._driver.classic import run

    exps = experiment_list(experiments)
    if len(exps) > 1 and concurrent:
        raise ConfigError(
            f"run_experiments(concurrent=True) with {len(exps)} experiments: audition runs one experiment per "
            "run, and Ray's runs them together, sharing one scheduler and search algorithm, which audition "
            "cannot do. Pass concurrent=False to run them one after the other (each its own run, as Ray then "
            "does), or make them one experiment (one config with grid_search over what differs)")
    trials: list[Any] = []
    for exp in exps:
        trials += run(exp, scheduler=scheduler, verbose=verbose, progress_reporter=progress_reporter,
                      resume=resume, resume_config=resume_config, reuse_actors=reuse_actors,
                      raise_on_failed_trial=raise_on_failed_trial, callbacks=callbacks, system=system).trials
    return trials


__all__ = ["Experiment", "experiment_list", "run_experiments"]
