"""What the driver hands the controller: one picklable description of the experiment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors._engine.trial import Paths, TagPaths


@dataclass
class ExperimentSpec:
    """Everything the controller needs; cloudpickled whole by the driver."""

    name: str
    trainable: bytes  # cloudpickled again separately: forwarded verbatim to trial actors
    trainable_name: str
    searcher: Any
    scheduler: bytes
    stopper: Any
    metric: str | None
    mode: str | None
    num_samples: int
    max_concurrent: int
    resources_per_trial: dict[str, float]
    total_resources: dict[str, float]
    max_failures: int
    fail_fast: bool  # True for FailureConfig(fail_fast=True) and for fail_fast="raise"
    storage_url: str
    storage_options: dict[str, Any]
    num_to_keep: int | None = None
    checkpoint_score_attribute: str | None = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: bool = False
    # True when checkpoint_at_end is only Ray's default for a class trainable (CheckpointConfig() left it
    # None), not asked for: then results may still be batched and run up to a decision horizon (core)
    checkpoint_at_end_by_default: bool = False
    batch_window: int = 256
    progress_interval_s: float = 1.0
    max_progress_rows: int = 20  # RunConfig(max_progress_rows); a class default for older saved specs
    # the default generator's domain paths, per point with points_to_evaluate (Ray's experiment_tag: PBT's
    # policy log); None: another searcher
    tag_paths: Paths | TagPaths | None = None
    # the experiment's directory as a URL or local path, and whether it is on this machine's disk: Ray's
    # trial.path / local_path in what scheduler hooks are given (None in specs saved before 2026-12-05)
    experiment_uri: str | None = None
    storage_is_local: bool = False
    trainable_registered: bool = False  # trainable_name is a tune.register_trainable name (Tuner.restore needs it)
    state_interval_s: float = 1.0  # what a crash can lose; a write is cheap
    restore_state: dict[str, Any] | None = None
    reuse_actors: bool = True
    # the driver's pid and admin port (multi-process only): if the driver dies without
    # shutting the system down (SIGKILL), the controller shuts it down itself
    driver_pid: int = 0
    admin_port: int = 0
    # every trial actor is an OS process of its own (not system="simple"): trial output is
    # captured at the file-descriptor level (actors/_worker/capture.py)
    actor_processes: bool = False
    # multi-host (system="tcp://..."): members join Thespian's convention led by the driver
    multi_host: bool = False
    leader_resources: dict[str, float] = field(default_factory=dict)
    # each trial's resources from its config (Ray's with_resources(train, fn), a class's default_resource_request):
    # a callable config -> {"cpu": ...} the core calls once per trial it draws (None: resources_per_trial for all)
    resources_of: Callable[[dict[str, Any]], dict[str, float]] | None = None
    heartbeat_interval_s: float = 1.0
    heartbeat_timeout_s: float = 10.0
    placement_grace_s: float = 30.0
    # RunConfig(trial_stop_grace_s): a trial asked to stop or pause is killed if it has not halted by then
    trial_stop_grace_s: float = 10.0
    # RunConfig(log_to_driver): trials send what they print, echoed on the driver's console
    log_to_driver: bool = True
    # send TrialEvents to the driver (only when callbacks are configured: it costs messages)
    forward_events: bool = False
    # send the driver an ExperimentProgress each tick (the simulator's driver reads none: it turns them off)
    progress_reports: bool = True
    # LoggerCallbacks run by the controller (None: the JSON and CSV loggers)
    loggers: list[Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # (result key, who needs it) checked in every result, as Ray Tune does: TuneConfig's metric, then
    # the scheduler's, then the searcher's (empty in specs saved before: TuneConfig's metric only)
    required_metrics: tuple[tuple[str, str], ...] = ()
    # FailureConfig(fail_fast="raise"): abort and raise the trial's error instead of returning the results
    fail_fast_raise: bool = False
    # a driver callback implements on_trial_result, so it may set should_checkpoint: each result
    # waits for the driver's answer before it is decided (actors/_shell/controller_gate.py)
    callback_gate: bool = False
    # TuneConfig(trial_name_creator=, trial_dirname_creator=): called in the controller per new trial
    trial_name_creator: Any = None
    trial_dirname_creator: Any = None
    # TUNE_MAX_LEN_IDENTIFIER (read by the driver, as Ray's is): the default directory name's cut
    max_len_identifier: int = 130
