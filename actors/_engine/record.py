"""The controller's mutable row for one trial (``TrialRecord``), and the snapshot plugins get of it."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from actors._engine.effects import Phase
from actors._engine.marks import Mark
from actors._engine.reducer import Decision
from actors._engine.trial import TrialSnapshot, TrialStatus
from actors.messages import CheckpointRef, SchedulerAction


@dataclass(slots=True)
class TrialRecord:
    """The controller's mutable row for one trial (slots: kept for every trial of the experiment, and
    ~1.2 KB smaller each than with an instance dict of these 37 fields)."""

    trial_id: str
    config: dict[str, Any]
    status: TrialStatus = TrialStatus.PENDING
    phase: Phase = Phase.IDLE
    run_id: int = 0
    pending: Decision = Decision.CONTINUE
    pause_checkpoint: bool = False
    resume_requested: bool = False
    clone: SchedulerAction | None = None
    clone_checkpoint: CheckpointRef | None = None
    clone_waiting: bool = False  # the clone waits for its source's save in flight: applied once it lands
    # a clone of this trial restores the checkpoint its scheduler's last save asked for gave (Ray's PBT
    # last_checkpoint: of a source at its own perturbation), not a later one; exploit_save: on its way
    exploit_checkpoint: CheckpointRef | None = None
    exploit_save: bool = False
    cloned: bool = False  # this run restores a PBT source's checkpoint (its history is not rewound)
    # the trial's own last result as its latest clone started: its last result again should a retry
    # rewind all the clone's rows (the restored checkpoint's result is its source's)
    before_clone: dict[str, Any] = field(default_factory=dict)
    inflight: list[int] = field(default_factory=list)
    saves_inflight: int = 0
    checkpoint: CheckpointRef | None = None
    last_result: dict[str, Any] = field(default_factory=dict)
    iteration: int = 0
    time_total_s: float = 0.0
    num_failures: int = 0
    error: str | None = None
    traceback: str | None = None
    extra_result: dict[str, Any] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)
    name: str | None = None  # TuneConfig(trial_name_creator=...)
    # its directory's name: TuneConfig(trial_dirname_creator=...)'s, else Ray's, given at its first start
    # (naming.py); None: not named yet (its paths are then the trial id's)
    dirname: str | None = None
    dirname_custom: bool = False  # dirname is trial_dirname_creator's: Ray's Trial.custom_dirname
    opened: bool = False  # started once: its directory's params.json and empty result.json are written
    # the current run's auto-filled keys from its process (TrialProcess.started): its Result.metrics,
    # with the config, should it end before reporting; empty: it never came up
    started: dict[str, Any] = field(default_factory=dict)
    stop_row: int = 0  # the iteration of the result a stop was decided on (its row says done=True)
    tag: str = ""  # Ray's experiment_tag, given when the trial was drawn (suggest.TrialSource)
    run_start: dict[str, Any] = field(default_factory=dict)  # TrialSnapshot.run_start
    # its own resources: from the experiment's function of the config, a resume's resources_per_trial or a scheduler's
    # set_trial_resources (None: the experiment's resources_per_trial)
    resources: dict[str, float] | None = None

    def snapshot(self) -> TrialSnapshot:
        """A copy for plugins and loggers (a few hundred a simulated experiment: built as
        ``scheduler_host._with_last`` builds one, without the frozen dataclass's per-field
        ``object.__setattr__``; the fields in their declared order, the rest at their defaults)."""
        snap = object.__new__(TrialSnapshot)
        d = snap.__dict__
        d.update(_SNAPSHOT_TEMPLATE)  # every field, in declared order
        d.update(
            trial_id=self.trial_id, config=dict(self.config), status=self.status,
            last_result=dict(self.last_result), num_failures=self.num_failures,
            checkpoint_iteration=self.checkpoint.iteration if self.checkpoint else None,
            custom_trial_name=self.name, custom_dirname=self.dirname if self.dirname_custom else None,
            dirname=self.dirname, experiment_tag=self.tag, run_id=self.run_id,
            run_start=self.run_start,  # (never changed in place: replaced at each run's start)
            resources=self.resources)  # (its own, never changed in place; None: the experiment's)
        return snap


_SNAPSHOT_SET = ("trial_id", "config", "status", "last_result", "num_failures", "checkpoint_iteration",
                 "custom_trial_name", "custom_dirname", "dirname", "experiment_tag", "run_start", "run_id",
                 "resources")
# the fields of TrialSnapshot that snapshot() leaves at their defaults, which must be plain values
_SNAPSHOT_TEMPLATE = {f.name: None if f.name in _SNAPSHOT_SET else f.default for f in fields(TrialSnapshot)}
assert all(v is not MISSING for v in _SNAPSHOT_TEMPLATE.values()), "TrialRecord.snapshot() must set that field"


__all__ = ["TrialRecord"]
