"""Trial status and the read-only view of a trial that plugins see."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class TrialStatus(StrEnum):
    """Life-cycle states of a trial (see docs/architecture.md for the state machine).

    Members are Ray Tune's strings: ``status == "RUNNING"`` and ``str(status) == "RUNNING"``."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    @property
    def is_finished(self) -> bool:
        return self in (TrialStatus.TERMINATED, TrialStatus.ERROR)


@dataclass(frozen=True)
class TrialSnapshot:
    """An immutable view of one trial, as schedulers and callbacks see it (Ray Tune's ``Trial``:
    ``trial_id``, ``config``, ``status``, ``last_result``, ``trainable_name``, ``path``,
    ``local_path``, ``custom_trial_name``, ``custom_dirname``, and ``str(trial)`` its name).

    Snapshots are copies: changing one never changes the controller's table,
    which is why plugins act on trials only through controller calls. ``trainable_name``,
    ``path`` and ``local_path`` are filled in where callbacks run (schedulers do not need them).
    """

    trial_id: str
    config: dict[str, Any]
    status: TrialStatus
    last_result: dict[str, Any] = field(default_factory=dict)
    num_failures: int = 0
    checkpoint_iteration: int | None = None
    custom_trial_name: str | None = None  # TuneConfig(trial_name_creator=...)
    custom_dirname: str | None = None  # TuneConfig(trial_dirname_creator=...)
    trainable_name: str = ""
    path: str | None = None  # the trial's directory in storage (a URL, or a local path)
    local_path: str | None = None  # the same on this machine's disk; None for remote storage

    def __hash__(self) -> int:
        return hash(self.trial_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrialSnapshot) and other.trial_id == self.trial_id

    def __str__(self) -> str:
        """The trial's name, as Ray Tune builds it: the custom name, else ``<trainable>_<trial_id>``."""
        return trial_name(self.trial_id, self.trainable_name, self.config, self.custom_trial_name)

    def is_finished(self) -> bool:
        return self.status.is_finished


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


__all__ = ["TrialSnapshot", "TrialStatus", "trial_name"]
