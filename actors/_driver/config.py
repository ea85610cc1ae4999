"""User-facing configuration objects (Ray Tune's names), validated eagerly.

Validation happens in the driver, in ``Tuner(...)``, so a bad value never
reaches an actor: the user gets one clear message and nothing is started.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actors._driver.errors import ConfigError
from actors._driver.local_resources import machine_cpus
from actors._engine.resource_request import check_resources

DEPRECATED = "DEPRECATED"  # the default of a field Ray Tune keeps only to refuse it (Ray's _DEPRECATED_VALUE)

SYSTEMS = ("multiproc", "simple")
DEFAULT_STORAGE = "~/audition_results"


def check_mode(mode: str | None, where: str) -> None:
    if mode is not None and mode not in ("min", "max"):
        raise ConfigError(f"{where}: mode must be 'min' or 'max', got {mode!r}")


@dataclass
class FailureConfig:
    """How often a crashed trial is retried from its latest checkpoint (-1: forever)."""

    max_failures: int = 0
    # True: the first trial in ERROR stops the others and fit() returns the results (Ray Tune);
    # "raise": fit() raises that trial's error instead
    fail_fast: bool | str = False

    def __post_init__(self) -> None:
        if not isinstance(self.max_failures, int) or self.max_failures < -1:
            raise ConfigError(
                f"FailureConfig(max_failures={self.max_failures!r}): use an int >= 0, or -1 to retry forever"
            )
        if not isinstance(self.fail_fast, bool) and not (
                isinstance(self.fail_fast, str) and self.fail_fast.upper() == "RAISE"):
            raise ConfigError(f"FailureConfig(fail_fast={self.fail_fast!r}): use True, False or 'raise'")
        if self.fail_fast and self.max_failures != 0:  # Ray Tune refuses this too
            raise ConfigError(f"FailureConfig(fail_fast={self.fail_fast!r}, max_failures={self.max_failures}): "
                              "max_failures must be 0 when fail_fast is set (a retried trial never fails fast)")


@dataclass
class CheckpointConfig:
    """Which checkpoints to keep and when class trainables save one."""

    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool | None = None

    def __post_init__(self) -> None:
        if self.num_to_keep is not None and (not isinstance(self.num_to_keep, int) or isinstance(
                self.num_to_keep, bool) or self.num_to_keep < 1):
            raise ConfigError(
                f"CheckpointConfig(num_to_keep={self.num_to_keep!r}): use None (keep all) or an int >= 1"
            )
        if self.checkpoint_score_order not in ("min", "max"):
            raise ConfigError(
                f"CheckpointConfig(checkpoint_score_order={self.checkpoint_score_order!r}): use 'min' or 'max'"
            )
        if not isinstance(self.checkpoint_frequency, int) or isinstance(self.checkpoint_frequency, bool) \
                or self.checkpoint_frequency < 0:
            raise ConfigError(
                f"CheckpointConfig(checkpoint_frequency={self.checkpoint_frequency!r}): use an int >= 0"
            )
        if self.checkpoint_score_attribute is not None and (
                not isinstance(self.checkpoint_score_attribute, str) or not self.checkpoint_score_attribute):
            raise ConfigError(f"CheckpointConfig(checkpoint_score_attribute={self.checkpoint_score_attribute!r}): "
                              "use the name of a reported metric, or None to keep the newest")
        if self.checkpoint_at_end is not None and not isinstance(self.checkpoint_at_end, bool):
            raise ConfigError(f"CheckpointConfig(checkpoint_at_end={self.checkpoint_at_end!r}): use True or False")


@dataclass
class TuneConfig:
    """What to optimise and how to search (Ray Tune's ``TuneConfig``)."""

    # (Ray Tune 2.60's fields in its order, so that a positional call means the same; then audition's own)
    mode: str | None = None
    metric: str | None = None
    search_alg: Any = None
    scheduler: Any = None
    num_samples: int = 1
    max_concurrent_trials: int | None = None
    # the experiment's wall-clock budget (seconds or a timedelta), as in Ray Tune: when it is
    # spent every trial is stopped, reporting or not (a TimeoutStopper added to stop=)
    time_budget_s: float | datetime.timedelta | None = None
    reuse_actors: bool = True
    # Ray Tune's: each called with the new trial; a display name (str(trial)) and the name of the
    # trial's directory in storage (actors/_engine/naming.py says what is refused)
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None
    chdir_to_trial_dir: Any = field(default=DEPRECATED, repr=False)  # removed from Ray Tune: refused
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.chdir_to_trial_dir != DEPRECATED:  # (Ray 2.60 raises DeprecationWarning at fit())
            raise ConfigError("TuneConfig(chdir_to_trial_dir=...) was removed from Ray Tune (2.60 refuses it too): "
                              "leave it out; each trial runs in its own directory, and the environment variable "
                              "RAY_CHDIR_TO_TRIAL_DIR=0 keeps the driver's working directory instead")
        check_mode(self.mode, "TuneConfig")
        for knob in ("trial_name_creator", "trial_dirname_creator"):
            value = getattr(self, knob)
            if value is not None and not callable(value):
                raise ConfigError(f"TuneConfig({knob}={value!r}): pass a function taking the trial and returning "
                                  "a string, e.g. lambda trial: f'{trial.trainable_name}_{trial.trial_id}'")
        budget = self.time_budget_s
        if isinstance(budget, datetime.timedelta):
            budget = budget.total_seconds()
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float))
                                   or not budget > 0 or budget == float("inf")):
            raise ConfigError(f"TuneConfig(time_budget_s={self.time_budget_s!r}): use seconds > 0 (or a "
                              "datetime.timedelta), or None for no budget")
        if self.metric is not None and (not isinstance(self.metric, str) or not self.metric):
            raise ConfigError(f"TuneConfig(metric={self.metric!r}): use the name of a reported result key, "
                              "such as metric='loss'")
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int) or (
                self.num_samples < 0 and self.num_samples != -1):
            raise ConfigError(f"TuneConfig(num_samples={self.num_samples!r}): use an int >= 1 (0 runs no trial, as "
                              "in Ray), or -1 to sample until a stop condition (time_budget_s, a stopper's stop_all) "
                              "ends the run")
        if self.max_concurrent_trials is not None and (
            not isinstance(self.max_concurrent_trials, int) or self.max_concurrent_trials < 1
        ):
            raise ConfigError(
                f"TuneConfig(max_concurrent_trials={self.max_concurrent_trials!r}): use None or an int >= 1"
            )


def samples(tc: TuneConfig) -> int:
    """``num_samples`` as Ray's ``tune.run`` takes it: -1 is ``sys.maxsize`` (sample until the run is stopped)."""
    return sys.maxsize if tc.num_samples == -1 else tc.num_samples


def public_spec(tc: TuneConfig, stop: Any) -> dict[str, Any]:
    """Ray's ``Experiment.public_spec`` (its ``PUBLIC_KEYS``): the ``**spec`` a searcher's and a scheduler's
    ``set_search_properties`` get (recorded from Ray 2.60: ``stop`` is ``{}`` when none was given)."""
    return {"stop": {} if stop is None else stop, "num_samples": samples(tc), "time_budget_s": tc.time_budget_s}


@dataclass(frozen=True)
class SyncConfig:
    """Ray Tune's ``SyncConfig``. audition writes results and checkpoints straight to storage, so nothing
    is synced periodically: ``sync_period`` and ``sync_timeout`` are checked and otherwise unused.
    ``sync_artifacts`` asks that the files a trial writes in its working directory reach storage: with
    local storage they are there already (each trial runs in its own directory in the experiment); with
    remote storage audition does not upload them, and the ``Tuner`` refuses the setting rather than
    drop the files."""

    sync_period: float = 300
    sync_timeout: float = 1800
    sync_artifacts: bool = False
    sync_artifacts_on_checkpoint: bool = True

    def __post_init__(self) -> None:
        for knob in ("sync_period", "sync_timeout"):
            value = getattr(self, knob)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"SyncConfig({knob}={value!r}): use seconds >= 0")
        for knob in ("sync_artifacts", "sync_artifacts_on_checkpoint"):
            if not isinstance(getattr(self, knob), bool):
                raise ConfigError(f"SyncConfig({knob}={getattr(self, knob)!r}): use True or False")


@dataclass
class RunConfig:
    """Where results go, when trials stop, and which actor system runs them.

    ``system``: "multiproc" (default: Thespian's TCP base bound to loopback on a
    free port, one process per actor) or "simple" (everything in this process;
    deterministic, for tests).
    """

    name: str | None = None
    storage: str | None = None
    storage_options: dict[str, Any] | None = None
    stop: Mapping[str, Any] | Callable[..., Any] | Any = None
    failure_config: FailureConfig = field(default_factory=FailureConfig)
    checkpoint_config: CheckpointConfig = field(default_factory=CheckpointConfig)
    system: str = "multiproc"
    verbose: int = 1
    callbacks: list[Any] | None = None
    resources_per_trial: dict[str, float] | None = None
    # seconds without a word from the controller before the driver gives up
    controller_timeout_s: float = 60.0
    # multi-host (system="tcp://HOST:PORT"): does the driver's machine run trials too, and how
    # long a member may stay silent before its trials restart elsewhere
    leader_runs_trials: bool = True
    heartbeat_timeout_s: float = 10.0
    # multi-host: how long pending trials may wait for a member big enough to ever hold one
    # (workers may still be joining) before the experiment fails
    placement_timeout_s: float = 30.0
    # rows of the live progress table (Ray Tune's CLIReporter default); the rest are counted
    max_progress_rows: int = 20
    # how long a trial asked to stop or pause may take to reach its next report(); then its
    # process is killed and it ends as asked (TERMINATED, or PAUSED at its latest checkpoint)
    trial_stop_grace_s: float = 10.0
    # Ray Tune's name for ``storage`` (RunConfig(storage_path=...)): either may be given
    storage_path: str | None = None
    # echo what trials print on this terminal, prefixed "(trial_id pid=N)" (Ray's
    # ``ray.init(log_to_driver=...)``); it is saved in each trial's stdout.txt/stderr.txt either way
    log_to_driver: bool = True
    # Ray Tune's CLIReporter & co.: accepted and, as in Ray 2.60 by default, ignored with a warning
    progress_reporter: Any = None
    # Ray Tune's SyncConfig (see there) and log_to_file (True, a file name, or (stdout, stderr) names):
    # each trial's output is saved as stdout.txt/stderr.txt in its directory whatever this says
    sync_config: SyncConfig | None = None
    log_to_file: bool | str | Sequence[str] = False
    local_dir: str | None = field(default=None, repr=False)  # removed from Ray Tune: refused

    def __post_init__(self) -> None:
        if self.local_dir is not None:  # (Ray 2.60 raises DeprecationWarning here)
            raise ConfigError(f"RunConfig(local_dir={self.local_dir!r}) was removed from Ray Tune (2.60 refuses it "
                              f"too): use RunConfig(storage_path={self.local_dir!r})")
        if self.storage_path is not None:
            if self.storage is not None and os.fspath(self.storage) != os.fspath(self.storage_path):
                raise ConfigError(f"RunConfig(storage={self.storage!r}, storage_path={self.storage_path!r}): "
                                  "these name the same setting (storage_path is Ray Tune's name); give one")
            self.storage = self.storage_path
        if self.system not in SYSTEMS and not str(self.system).startswith("tcp://"):
            raise ConfigError(
                f"RunConfig(system={self.system!r}): use 'multiproc' (default), 'simple' (in-process) or "
                "'tcp://HOST:PORT' (a cluster's head, see docs/multi-host.md)"
            )
        if self.name is not None and (not self.name or "/" in self.name or self.name in (".", "..")):
            raise ConfigError(f"RunConfig(name={self.name!r}): use a non-empty name without '/'")
        if isinstance(self.storage, os.PathLike):
            self.storage = os.fspath(self.storage)
        if self.storage is not None and (not isinstance(self.storage, str) or not self.storage.strip()):
            raise ConfigError(f"RunConfig(storage={self.storage!r}): use a local directory or a URL such as "
                              f"s3://bucket/prefix, or leave it out for the default {DEFAULT_STORAGE}")
        if self.resources_per_trial is not None:
            self.resources_per_trial = check_resources(self.resources_per_trial,
                                                       "RunConfig(resources_per_trial=...)")
        if str(self.system).startswith("tcp://"):
            from actors._driver.system import parse_host_port

            parse_host_port(str(self.system)[len("tcp://"):], what=f"RunConfig(system={self.system!r})")
        for knob, kind in (("failure_config", FailureConfig), ("checkpoint_config", CheckpointConfig)):
            if not isinstance(getattr(self, knob), kind):
                raise ConfigError(f"RunConfig({knob}={getattr(self, knob)!r}): pass a {kind.__name__}(...), "
                                  f"e.g. {knob}={kind.__name__}()")
        if self.callbacks is not None and not isinstance(self.callbacks, (list, tuple)):
            raise ConfigError(f"RunConfig(callbacks={self.callbacks!r}): pass a list, e.g. callbacks=[cb]")
        for knob in ("heartbeat_timeout_s", "placement_timeout_s", "controller_timeout_s", "trial_stop_grace_s"):
            value = getattr(self, knob)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"RunConfig({knob}={value!r}): use seconds > 0")
        if not isinstance(self.log_to_driver, bool):
            raise ConfigError(f"RunConfig(log_to_driver={self.log_to_driver!r}): use True (echo trial output "
                              "on this terminal, the default) or False")
        if self.verbose not in (0, 1, 2, 3):  # (False/True are 0/1, as Ray takes them)
            raise ConfigError(f"RunConfig(verbose={self.verbose!r}): use 0 (silent), 1 (progress) or 2 (also "
                              "each finished trial); 3 is accepted as 2, as Ray Tune 2.60 takes it")
        if self.sync_config is not None and not isinstance(self.sync_config, SyncConfig):
            raise ConfigError(f"RunConfig(sync_config={self.sync_config!r}): pass a SyncConfig(...)")
        ltf = self.log_to_file
        if not (isinstance(ltf, (bool, str)) or (isinstance(ltf, Sequence) and len(ltf) == 2
                                                 and all(isinstance(n, str) for n in ltf))):
            raise ConfigError(f"RunConfig(log_to_file={ltf!r}): use True, a file name, or a pair of names "
                              "(stdout, stderr), as Ray Tune takes it")
        rows = self.max_progress_rows
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ConfigError(f"RunConfig(max_progress_rows={rows!r}): use an int >= 1 "
                              "(how many trials the live progress table shows; default 20)")


default_cpus = machine_cpus  # this machine's cores, whatever init(num_cpus=...) declared (tests fill the machine)


def with_resources(trainable: Any, resources: Mapping[str, float] | Any) -> Any:
    """Attach per-trial resources (e.g. ``{"cpu": 2, "gpu": 1}``, or a one-bundle
    ``PlacementGroupFactory``) to a trainable, or a function of the config that gives each trial its own
    (``lambda config: {"cpu": config["workers"]}``, as Ray's: ``actors._driver.resources.ResourcesOf``).

    Returns a new trainable (a wrapper function or a subclass); the original is not changed.
    """
    import functools
    import inspect

    from actors._driver.resources import PlacementGroupFactory, ResourcesOf

    res: dict[str, float] | ResourcesOf
    if callable(resources) and not isinstance(resources, (Mapping, PlacementGroupFactory)):
        res = ResourcesOf(resources, "with_resources(trainable, resources=<function>)")
    else:
        res = check_resources(resources, "with_resources")
    if inspect.isclass(trainable):
        return type(trainable.__name__, (trainable,), {"_audition_resources": res,
                                                       "__module__": trainable.__module__})

    @functools.wraps(trainable)
    def wrapped(config: dict[str, Any]) -> Any:
        return trainable(config)

    wrapped._audition_resources = res  # type: ignore[attr-defined]
    return wrapped


__all__ = ["CheckpointConfig", "FailureConfig", "RunConfig", "TuneConfig", "with_resources"]
