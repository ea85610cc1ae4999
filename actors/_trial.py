"""Trial status and the read-only view of a trial that plugins see."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class TrialStatus(str, Enum):
    """Life-cycle states of a trial (see docs/architecture.md for the state machine)."""

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
    """An immutable view of one trial, as schedulers and callbacks see it.

    Snapshots are copies: changing one never changes the controller's table,
    which is why plugins act on trials only through controller calls.
    """

    trial_id: str
    config: dict[str, Any]
    status: TrialStatus
    last_result: dict[str, Any] = field(default_factory=dict)
    num_failures: int = 0
    checkpoint_iteration: int | None = None

    def __hash__(self) -> int:
        return hash(self.trial_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrialSnapshot) and other.trial_id == self.trial_id


__all__ = ["TrialSnapshot", "TrialStatus"]
