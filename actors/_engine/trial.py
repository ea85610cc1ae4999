"""Trial status and the read-only view of a trial that plugins see."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from actors._engine.resource_request import PlacementGroupFactory


class TrialStatus(StrEnum):
    """Life-cycle states of a trial (see docs/architecture.md for the state machine).

    Members are Ray Tune's strings: ``status == "RUNNING"``, ``str(status) == "RUNNING"``, and ``repr`` too, so a
    printed list of statuses reads as Ray's (``['RUNNING']``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    @property
    def is_finished(self) -> bool:
        return self in (TrialStatus.TERMINATED, TrialStatus.ERROR)

    def __repr__(self) -> str:
        return repr(self.value)


ERROR_FILE = "error.txt"  # storage's ERROR_NAME (storage/_layout.py; the core imports no storage)


@dataclass(frozen=True)
class TrialSnapshot:
    """An immutable view of one trial, as schedulers and callbacks see it (Ray Tune's ``Trial``:
    ``trial_id``, ``config``, ``status``, ``last_result``, ``trainable_name``, ``path``,
    ``local_path``, ``custom_trial_name``, ``custom_dirname``, and ``str(trial)`` its name).

    Snapshots are copies: changing one never changes the controller's table,
    which is why plugins act on trials only through controller calls. ``trainable_name``,
    ``path``, ``local_path`` and ``evaluated_params`` are filled in where plugins see them (the scheduler
    host and the driver's callbacks, ``TrialDescription``); the controller's own snapshots leave them out.
    """

    # Ray's Trial.PENDING, ... (a plugin ported from Ray compares trial.status with them)
    PENDING: ClassVar[TrialStatus] = TrialStatus.PENDING
    RUNNING: ClassVar[TrialStatus] = TrialStatus.RUNNING
    PAUSED: ClassVar[TrialStatus] = TrialStatus.PAUSED
    TERMINATED: ClassVar[TrialStatus] = TrialStatus.TERMINATED
    ERROR: ClassVar[TrialStatus] = TrialStatus.ERROR

    trial_id: str
    config: dict[str, Any]
    status: TrialStatus
    last_result: dict[str, Any] = field(default_factory=dict)
    num_failures: int = 0
    checkpoint_iteration: int | None = None
    custom_trial_name: str | None = None  # TuneConfig(trial_name_creator=...)
    custom_dirname: str | None = None  # TuneConfig(trial_dirname_creator=...)'s name; None without one, as Ray
    trainable_name: str = ""
    path: str | None = None  # the trial's directory in storage (a URL, or a local path)
    local_path: str | None = None  # the same on this machine's disk; None for remote storage
    # Ray's Trial.experiment_tag, .evaluated_params and .checkpoint (the latest committed one, an
    # actors.Checkpoint); filled in where callbacks run, like trainable_name
    experiment_tag: str = ""
    evaluated_params: dict[str, Any] | None = None
    checkpoint: Any = None
    # the engine's: Ray's last_result as the current run started (hook_view.before_result), before its
    # first result: the checkpoint's result it restored, else the keys it had once built (or empty)
    run_start: dict[str, Any] = field(default_factory=dict)
    # audition's (not Ray's): the name of the trial's directory in the experiment, the creator's or Ray's
    # default one given at its first start; None before that (its paths are then the trial id's)
    dirname: str | None = None
    # audition's: which run of the trial the controller last knew of (1 for its first start; 0 before it ran),
    # so the scheduler tells a late question of a run that has ended from one of a run just starting
    run_id: int = 0
    # audition's: the trial's resources in audition's form (``{"cpu": 2.0}``): its own (``with_resources`` of a
    # function) or the experiment's; None where not filled in (the controller's own snapshots of a trial
    # without resources of its own). Ray's ``Trial.placement_group_factory`` on the trials callbacks and
    # ``ExperimentAnalysis`` hold is built from it
    resources: dict[str, float] | None = None

    def __hash__(self) -> int:
        return hash(self.trial_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrialSnapshot) and other.trial_id == self.trial_id

    def __str__(self) -> str:
        """The trial's name, as Ray Tune builds it: the custom name, else ``<trainable>_<trial_id>``."""
        return trial_name(self.trial_id, self.trainable_name, self.config, self.custom_trial_name)

    def is_finished(self) -> bool:
        return self.status.is_finished

    @property
    def placement_group_factory(self) -> PlacementGroupFactory | None:
        """Ray's: the trial's resources as a one-bundle ``PlacementGroupFactory`` (``resources``); None where
        they are not known."""
        return None if self.resources is None else PlacementGroupFactory.from_resources(self.resources)

    @property
    def error_file(self) -> str | None:
        """Ray's: where the error of a trial in ERROR is written (``error.txt`` in its directory: a local path,
        or a URL on remote storage; Ray's is in its driver's staging directory), None for any other trial and
        where the trial's directory is not known (a scheduler's view of a run without one)."""
        if self.status is not TrialStatus.ERROR or not self.path:
            return None
        return f"{self.path.rstrip('/')}/{ERROR_FILE}"

    def has_checkpoint(self) -> bool:
        """Ray's: whether the trial holds a checkpoint (in a result's hooks: from an earlier result, as Ray
        registers the result's own checkpoint after them)."""
        if self.checkpoint is not None:
            return True
        it, seen = self.checkpoint_iteration, self.last_result.get("training_iteration")
        # (the hooks' last_result is the result before the one being decided, whose checkpoint is not yet held)
        return it is not None and (not isinstance(seen, int) or it <= seen)

    @property
    def has_reported_at_least_once(self) -> bool:
        """Ray's: whether the trial's last result is one it reported (in a result's hooks: an earlier one)."""
        return "training_iteration" in self.last_result

    @property
    def node_ip(self) -> str | None:
        """Ray's: the address of the machine the trial last reported from; None before its first result's
        hooks ran (Ray learns it from that result)."""
        last = self.last_result
        return last.get("node_ip") if "training_iteration" in last else None

    @property
    def logdir(self) -> str | None:
        """Gone from Ray 2.60's ``Trial`` (older guides still read it): raises Ray's error, naming ``local_path``."""
        raise DeprecationWarning("Use `local_path` instead of `logdir`.")


def trial_name(trial_id: str, trainable_name: str, config: dict[str, Any], custom: str | None = None) -> str:
    """Ray Tune's ``str(trial)``: the custom name, else ``<trainable>[_<env>]_<trial_id>``."""
    if custom:
        return custom
    if not trainable_name:
        return trial_id
    ident = trainable_name
    if "env" in config:
        env = config["env"]
        ident += f"_{env.__name__ if isinstance(env, type) else env}"
    return f"{ident}_{trial_id}".replace("/", "_")


def _clean(value: Any) -> str:
    """Ray's ``_clean_value``: floats to 4 places, anything outside ``[a-zA-Z0-9_-]`` to ``_``."""
    if isinstance(value, float):
        return f"{value:.4f}"
    return re.sub(r"[^a-zA-Z0-9_-]+", "_", str(value)).strip("_")


def _leaves(config: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    if isinstance(config, dict) and (config or not path):
        out: dict[tuple[Any, ...], Any] = {}
        for k, v in config.items():
            out.update(_leaves(v, (*path, k)))
        return out
    return {path: config}


_MISSING = object()


def _at(config: Any, path: tuple[Any, ...]) -> Any:
    """The value at ``path`` in a config of dicts, lists and tuples; ``_MISSING`` if there is none."""
    for part in path:
        if isinstance(config, dict) and part in config:
            config = config[part]
        elif isinstance(config, (list, tuple)) and isinstance(part, int) and 0 <= part < len(config):
            config = config[part]
        else:
            return _MISSING
    return config


def _path_order(item: tuple[tuple[Any, ...], Any]) -> tuple[Any, ...]:
    """Ray sorts tag entries by their path tuples (list indices as numbers: ``2`` before ``10``); a
    path part that is neither compares as its ``str``, after the numbers."""
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, str(part)) for part in item[0])


Paths = tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class TagPaths:
    """The default generator's paths a trial's tag lists when it has ``points_to_evaluate``: as Ray,
    a point's trials list only what the point left to sweep or draw (``points``: per point, how
    many trials it yields and those paths; the generator runs them first), the others ``paths``."""

    paths: Paths
    points: tuple[tuple[int, Paths], ...] = ()
    filled: Paths = ()  # what the scheduler fills in (evaluated_params only, after the rest)

    def of(self, index: int) -> Paths:
        for count, paths in self.points:
            if index < count:
                return paths
            index -= count
        return self.paths


def experiment_tag(index: int, config: dict[str, Any],
                   searched: Paths | TagPaths | None) -> tuple[str, dict[str, Any]]:
    """Ray's ``experiment_tag`` and ``evaluated_params`` of a trial: for the default generator
    (``searched`` = the paths of the space's domains and grids) ``"<index>_<k=v,...>"`` over the
    drawn values; for another searcher (``searched=None``) ``"<index + 1>_..."`` over the whole
    config, as Ray's ``SearchGenerator`` counts from 1. Keys are the last path part, sorted."""
    filled: Paths = ()
    if isinstance(searched, TagPaths):
        filled = searched.filled
        searched = searched.of(index)
    if searched is not None:
        # the value at each searched path, through lists too (``a/0``), a dict-valued one whole
        leaves = {p: v for p in searched if (v := _at(config, p)) is not _MISSING}
    else:
        leaves = _leaves(config)
        index += 1
    ordered = sorted(leaves.items(), key=_path_order)
    body = ",".join(f"{_clean(p[-1])}={_clean(v)}" for p, v in ordered if p)
    params = {"/".join(str(x) for x in p): v for p, v in leaves.items()}
    params.update(("/".join(str(x) for x in p), v) for p in filled if (v := _at(config, p)) is not _MISSING)
    return (f"{index}_{body}" if body else str(index)), params


def perturbed_tag(orig_tag: str, config: dict[str, Any], keys: Iterable[Any]) -> str:
    """Ray's tag of a trial after a PBT exploit (``_make_experiment_tag``): the tag the trial had when
    the scheduler was told of it, then ``@perturbed[k=v,...]`` over ``config``'s values of the
    mutated top-level ``keys``, sorted (a nested dict's value is cleaned whole: ``nest=x_0_5``). A
    later exploit starts again from ``orig_tag``: tags do not nest."""
    body = ",".join(f"{_clean(k)}={_clean(config[k])}" for k in sorted(keys, key=str) if k in config)
    return f"{orig_tag}@perturbed[{body}]"


def tag_of(trial_id: str, config: dict[str, Any],
           searched: Paths | TagPaths | None) -> tuple[str, dict[str, Any]]:
    """``experiment_tag`` for a trial id ``<prefix>_<index>`` (another id, such as a restarted trial's
    8 hex digits, which may all be digits, has no index: its record carries its tag)."""
    _, sep, index = trial_id.rpartition("_")
    return experiment_tag(int(index) if sep and index.isdigit() else 0, config, searched)


@dataclass(frozen=True)
class TrialDescription:
    """What Ray's ``Trial`` has beyond the controller's snapshot, filled into the views plugins are given:
    ``trainable_name`` (so ``str(trial)`` is Ray's name), ``path``/``local_path`` (the trial's directory)
    and ``evaluated_params`` (its tag's values). Plain data: it travels in ``SchedulerSetup``."""

    trainable_name: str
    experiment_path: str | None  # a URL, or a local path
    local: bool = False
    tag_paths: Paths | TagPaths | None = None
    resources: dict[str, float] | None = None  # the experiment's resources_per_trial (a trial's own win)

    def path(self, snap: TrialSnapshot) -> str | None:
        if self.experiment_path is None:
            return None
        return f"{self.experiment_path.rstrip('/')}/{snap.dirname or snap.trial_id}"

    def described(self, snap: TrialSnapshot, evaluated: dict[str, Any]) -> TrialSnapshot:
        """``snap`` with these filled in (``evaluated``: its ``evaluated_params``, worked out once per trial)."""
        path = self.path(snap)
        new = object.__new__(TrialSnapshot)  # (as hook views are copied: the frozen dataclass's fields kept)
        new.__dict__.update(snap.__dict__)
        new.__dict__.update(trainable_name=self.trainable_name, path=path, local_path=path if self.local else None,
                            evaluated_params=dict(evaluated), resources=snap.resources or self.resources)
        return new


__all__ = ["Paths", "TagPaths", "TrialDescription", "TrialSnapshot", "TrialStatus", "experiment_tag",
           "perturbed_tag", "tag_of", "trial_name"]
