"""What a trial's worker thread and its actor say to each other over their two queues.

``commands`` (actor -> worker) carry a ``Command`` and its argument; ``events`` (worker -> actor)
carry an ``Event``: a result (with the checkpoint committed in that ``report``, if any), a save
asked for, or the end of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from actors.messages import CheckpointRef, EndReason, SaveKind


class Command(Enum):
    PROCEED = "proceed"
    HOLD = "hold"
    SAVE = "save"
    STOP = "stop"


class EventKind(Enum):
    RESULT = "result"
    SAVED = "saved"
    ENDED = "ended"


@dataclass
class Event:
    kind: EventKind
    result: dict[str, Any] | None = None
    checkpoint: CheckpointRef | None = None
    reason: EndReason | None = None
    error: str | None = None
    traceback: str | None = None
    storage_failure: str | None = None
    setup_failed: bool = False
    started: dict[str, Any] | None = None  # Ray's keys of a result-less run, taken once it was built
    save: SaveKind | None = None  # SAVED: the kind of save it answers


__all__ = ["Command", "Event", "EventKind"]
